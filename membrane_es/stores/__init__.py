"""Where events are kept: the backends, and what every backend agrees on.

``lmdb/`` is the embedded store (one directory), ``postgres/`` the store several processes
share. Beside them, the pieces no backend owns: the hash chain over the notification log and
the report of its check (``chain.py``), the per-record key store (``key_store.py``), export
files (``transfer.py``), the rule that event times follow log order (``event_times.py``) and
record numbers (``record_numbers.py``).
"""

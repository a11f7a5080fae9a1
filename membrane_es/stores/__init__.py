"""Where events are kept: the backends, and what every backend agrees on.

``lmdb/`` is the embedded store (one directory), ``postgres/`` the store several processes
share. Beside them, the pieces no backend owns: the hash chain over the notification log and
the report of its check (``chain.py``), the per-record key store (``key_store.py``), export
files (``transfer.py``), the rule that event times follow log order (``event_times.py``),
record numbers (``record_numbers.py``), the one typed value a save hands the recorder beside
its events (``log_stamp.py``), and what a recorder may offer beyond eventsourcing's interface
(``abilities.py``: declared once, checked once where the application makes its recorder).
"""

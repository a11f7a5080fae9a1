"""The embedded store: an eventsourcing persistence module over one LMDB directory.

Select it with ``PERSISTENCE_MODULE=membrane_es.stores.lmdb`` (its settings:
:mod:`membrane_es.stores.lmdb.recorders`). ``environment.py`` shares one LMDB environment
between recorders and commits their writes together; ``layout.py`` says how events, the log
and tracking are laid out and checked; ``heads.py`` and ``packs.py`` are two parts of that
layout (each originator's latest version, and rows packed together).
"""

from membrane_es.stores.lmdb.recorders import Factory, LMDBFactory

__all__ = ["Factory", "LMDBFactory"]

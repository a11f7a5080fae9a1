"""The shared store: eventsourcing's PostgreSQL persistence with the hash chain.

Select it with ``PERSISTENCE_MODULE=membrane_es.stores.postgres`` and the settings of
:func:`membrane_es.stores.postgres.database.postgres_settings`. ``recorders.py`` holds the
chained recorders and their factory, ``database.py`` where a store lives (settings, schema,
connections, its identity).
"""

from membrane_es.stores.postgres.recorders import ChainedPostgresFactory

__all__ = ["ChainedPostgresFactory"]

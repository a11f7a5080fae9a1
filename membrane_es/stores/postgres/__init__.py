"""The shared store: eventsourcing's PostgreSQL persistence with the hash chain.

Select it with ``PERSISTENCE_MODULE=membrane_es.stores.postgres.recorders:ChainedPostgresFactory``
and the settings of :func:`membrane_es.stores.postgres.database.postgres_settings` (which
fill both in). ``recorders.py`` holds the chained recorders and their factory, ``database.py``
where a store lives (settings, schema, connections, its identity). Nothing is imported here:
the driver (``psycopg``) is the ``postgres`` extra, and a base install must import the
engine without it.
"""

"""The name of the log in every store: eventsourcing names an application's tables
(PostgreSQL) and databases (LMDB) after it, so stores and the application share it."""

APPLICATION_NAME = "memory"

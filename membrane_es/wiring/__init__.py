"""The eventsourcing wiring: the application over the log, its record cache, and the
binding of a log to its key store."""

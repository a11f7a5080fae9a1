"""The PostgreSQL suites take a database of their own per test, as the integration tests do."""

from tests.integration.conftest import postgres_dsn, postgres_server

__all__ = ["postgres_dsn", "postgres_server"]

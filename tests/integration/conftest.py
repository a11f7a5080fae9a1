"""PostgreSQL for the tests that need it: a database made for each test (and dropped after it)
on the server named by ``MEMBRANE_TEST_POSTGRES_DSN``, a role that may create databases.
``.ci/with-postgres`` starts a private server and sets it.

Without that variable the tests skip, so a developer without PostgreSQL still runs the suite;
under ``CI=true`` they fail instead: CI must not pass without having tested the Postgres store.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

POSTGRES_ENV = "MEMBRANE_TEST_POSTGRES_DSN"


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The test server's DSN (skip, or under CI fail, when there is none)."""
    dsn = os.environ.get(POSTGRES_ENV, "")
    if not dsn:
        reason = f"{POSTGRES_ENV} is not set: no PostgreSQL server (.ci/with-postgres starts one)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; under CI=true the PostgreSQL tests must run", pytrace=False)
        pytest.skip(reason)
    return dsn


@pytest.fixture
def postgres_dsn(postgres_server: str) -> Iterator[str]:
    """A DSN naming an empty database of this test's own."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    dbname = f"membrane_test_{uuid.uuid4().hex[:16]}"
    name = sql.Identifier(dbname)
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(name))
    try:
        yield make_conninfo(postgres_server, dbname=dbname)
    finally:
        # FORCE: a connection a failed test left open must not keep the database alive
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))

"""PostgreSQL as the event log: eventsourcing's own module (``eventsourcing.postgres``).

That module takes its connection from ``POSTGRES_*`` settings and hands psycopg only the host,
port, database, user and password, so a DSN (libpq key=value or URL) is split into exactly
those; a parameter it would silently drop (``sslmode``, ``options``…) is refused instead, with
the ``PG*`` variable that libpq reads for it. Missing parts take libpq's defaults (the ``PG*``
variables, then the compiled ones), as ``psql`` would.

Each store lives in one schema (tables ``memory_events`` and friends, made by its first open
and marked with the version that made them, so later opens run no DDL): the daemon gives
every tenant its own schema, so isolation is a matter of names the server keeps apart.
psycopg is the ``postgres`` extra, imported only when a Postgres store is opened.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from membrane_es.errors import MembraneError

if TYPE_CHECKING:
    import psycopg

# eventsourcing's PostgreSQL module, its recorder given the hash chain and event times in log
# order (stores/postgres/recorders.py).
PERSISTENCE_MODULE = "membrane_es.stores.postgres.recorders:ChainedPostgresFactory"
DEFAULT_SCHEMA = "public"
# Setting: "y" when the open must find a store (``create=False``): with no log in the schema,
# the recorder raises StoreNotFoundError and makes nothing. Checked on the pool's first
# connection, with the tables' mark: an open makes no connection of its own.
MUST_EXIST = "POSTGRES_STORE_MUST_EXIST"
_MAX_IDENTIFIER = 63  # PostgreSQL truncates longer names silently (NAMEDATALEN - 1)

# DSN parameter -> eventsourcing setting; nothing else reaches the connection.
_SETTINGS = {
    "host": "POSTGRES_HOST",
    "port": "POSTGRES_PORT",
    "dbname": "POSTGRES_DBNAME",
    "user": "POSTGRES_USER",
    "password": "POSTGRES_PASSWORD",
    "connect_timeout": "POSTGRES_CONNECT_TIMEOUT",
}
# The library's default is 5 pooled connections (+10 overflow) per store; the daemon keeps a
# store per tenant, and idle connections count against the server's max_connections. Two: a
# following store's LISTEN holds one for as long as it is open, the other serves its reads
# and writes; four more at most under load. Its key store shares the pool, so a store
# holds 2 when idle and at most STORE_CONNECTIONS.
_POOL = {"POSTGRES_POOL_SIZE": "2", "POSTGRES_MAX_OVERFLOW": "4"}
STORE_CONNECTIONS = 6


def postgres_settings(dsn: str, schema: str = DEFAULT_SCHEMA) -> dict[str, str]:
    """eventsourcing settings for a store in ``schema`` of the database ``dsn`` names."""
    try:
        from psycopg import ProgrammingError, pq
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise MembraneError(
            "a PostgreSQL store needs psycopg: pip install 'membrane-es[postgres]'"
        ) from None

    try:
        given = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    except ProgrammingError as error:
        raise MembraneError(f"postgres_dsn: {error}") from None
    options = pq.Conninfo.get_defaults()
    dropped = sorted(set(given) - set(_SETTINGS))
    if dropped:
        envvars = {o.keyword.decode(): (o.envvar or b"").decode() for o in options}
        hints = ", ".join(
            f"{key} (use {envvars[key]})" if envvars.get(key) else key for key in dropped
        )
        raise MembraneError(
            f"postgres_dsn: unsupported parameters: {hints}; eventsourcing.postgres connects "
            "with host, port, dbname, user, password and connect_timeout only, and libpq "
            "reads the others from its environment variables"
        )
    # An empty value is libpq's "not given": the socket directory, the OS user, and so on.
    defaults = {o.keyword.decode(): (o.val or b"").decode() for o in options}
    settings = {
        "PERSISTENCE_MODULE": PERSISTENCE_MODULE,
        "CREATE_TABLE": "y",
        "POSTGRES_SCHEMA": check_schema(schema),
        **_POOL,
    }
    for key, setting in _SETTINGS.items():
        value = given.get(key, defaults.get(key, ""))
        if value or key != "connect_timeout":
            settings[setting] = value
    return settings


def check_schema(schema: str) -> str:
    if not schema or len(schema.encode()) > _MAX_IDENTIFIER:
        raise MembraneError(f"postgres schema must be 1-{_MAX_IDENTIFIER} bytes: {schema!r}")
    return schema


def tenant_schema(tenant: str) -> str:
    """The schema of a tenant's store: ``tenant_<name>``, or for names too long to fit, a
    prefix of the name and a digest of all of it (still one schema per name)."""
    schema = f"tenant_{tenant}"
    if len(schema.encode()) <= _MAX_IDENTIFIER:
        return schema
    digest = hashlib.sha256(tenant.encode()).hexdigest()[:16]
    return f"tenant_{tenant[:32]}_{digest}"


@contextmanager
def connect(settings: dict[str, str]) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A plain connection with the store's credentials (schema set-up, identity)."""
    with open_connection(settings) as connection:
        yield connection


def open_connection(settings: dict[str, str]) -> psycopg.Connection[tuple[object, ...]]:
    """A plain autocommit connection with the store's credentials; the caller closes it."""
    import psycopg

    timeout = int(settings.get("POSTGRES_CONNECT_TIMEOUT", "10"))
    where = f"{settings['POSTGRES_HOST']}:{settings['POSTGRES_PORT']}"
    try:
        connection = psycopg.connect(
            host=settings["POSTGRES_HOST"],
            port=settings["POSTGRES_PORT"],
            dbname=settings["POSTGRES_DBNAME"],
            user=settings["POSTGRES_USER"],
            password=settings["POSTGRES_PASSWORD"],
            connect_timeout=timeout,
            autocommit=True,
        )
    except psycopg.Error as error:
        raise MembraneError(f"postgres: cannot connect to {where}: {error}") from None
    return connection


def ensure_schema(connection: psycopg.Connection[Any], schema: str) -> None:
    """Create ``schema`` if missing; eventsourcing creates tables, not schemas."""
    from psycopg import errors, sql

    exists = connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
    if exists.fetchone() is not None:
        return  # checked first: IF NOT EXISTS still needs CREATE on the database
    try:
        connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    except (errors.UniqueViolation, errors.DuplicateSchema):
        pass  # another process created it in the meantime


def store_location(settings: Mapping[str, str]) -> str:
    """Where a store is, for messages: server, database and schema (never the password)."""
    return (
        f"postgres {settings['POSTGRES_HOST']}:{settings['POSTGRES_PORT']}"
        f"/{settings['POSTGRES_DBNAME']} schema {settings['POSTGRES_SCHEMA']}"
    )


def has_store(connection: psycopg.Connection[Any], settings: Mapping[str, str], table: str) -> bool:
    """Whether the schema ``settings`` name holds a store's log (its events ``table``)."""
    row = connection.execute(
        "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s",
        (settings["POSTGRES_SCHEMA"], table),
    ).fetchone()
    return row is not None


def store_identity(
    connection: psycopg.Connection[Any], settings: Mapping[str, str], table: str
) -> str:
    """Names this store's log: where it is, plus the events table's OID, which changes when
    the table is dropped and made again. Read views checkpointed against another identity
    describe another log. ``connection``: a plain one or the store's pool's."""
    from psycopg.rows import tuple_row

    with connection.cursor(row_factory=tuple_row) as cursor:
        row = cursor.execute(
            "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s",
            (settings["POSTGRES_SCHEMA"], table),
        ).fetchone()
    return identity_of(settings, table, row[0] if row is not None else None)


def identity_of(settings: Mapping[str, str], table: str, oid: object) -> str:
    """:func:`store_identity` of a log whose events table has this OID (None: no table)."""
    return (
        f"postgres {settings['POSTGRES_HOST']}:{settings['POSTGRES_PORT']}"
        f"/{settings['POSTGRES_DBNAME']}/{settings['POSTGRES_SCHEMA']}/{table}"
        f"#{'none' if oid is None else oid}"
    )


def stored_bytes(settings: dict[str, str]) -> int:
    """What the store in the schema ``settings`` name takes: its tables with their indexes
    and TOAST (``pg_total_relation_size``)."""
    with connect(settings) as connection:
        row = connection.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (settings["POSTGRES_SCHEMA"],),
        ).fetchone()
    return int(str(row[0])) if row is not None else 0

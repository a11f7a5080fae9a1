"""Opening an existing PostgreSQL store runs no DDL: its tables carry the mark of the version
that made them, so an open reads the catalogue once and creates nothing; a store made by one
process opens in another the same way, and a store from before the mark is brought up to
date once. DDL is observed with an event trigger that logs every command the database runs
(the test's DSN is a superuser's). Skipped without ``MEMBRANE_TEST_POSTGRES_DSN``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from membrane_es import Membrane
from membrane_es.stores.postgres.recorders import TABLES_VERSION
from tests.unit.builders import FULL_TRUST

pytestmark = pytest.mark.postgres

SCHEMA = "tenant_open"
_TRIGGER = """
CREATE TABLE public.ddl_log (command text NOT NULL, schema text);
CREATE FUNCTION public.log_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE c record;
BEGIN
    FOR c IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
        INSERT INTO public.ddl_log VALUES (c.command_tag, c.schema_name);
    END LOOP;
END $$;
CREATE EVENT TRIGGER log_ddl ON ddl_command_end EXECUTE FUNCTION public.log_ddl();
"""


@pytest.fixture
def ddl_logged(postgres_dsn: str) -> None:
    """Every DDL command run in this test's database from now on is logged (read and
    cleared with :func:`_commands`)."""
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(_TRIGGER)


def _commands(dsn: str) -> list[tuple[str, str | None]]:
    """The DDL commands (tag, schema) run since the last call."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        rows = connection.execute("SELECT command, schema FROM public.ddl_log").fetchall()
        connection.execute("DELETE FROM public.ddl_log")
    return [(str(command), schema) for command, schema in rows]


def _open(dsn: str, tmp_path: Path, *, create: bool = True) -> Membrane:
    return Membrane.open_postgres(
        dsn, schema=SCHEMA, views_dir=tmp_path / "views", create=create, embedder=None
    )


@pytest.mark.usefixtures("ddl_logged")
def test_reopening_a_store_runs_no_ddl(postgres_dsn: str, tmp_path: Path) -> None:
    memory = _open(postgres_dsn, tmp_path)
    fact = memory.ingest_observation("alice", "likes", "tea")
    memory.close()
    made = _commands(postgres_dsn)
    # The trigger sees the creation: the schema, the tables, the mark.
    assert ("CREATE TABLE", SCHEMA) in made
    assert ("COMMENT", SCHEMA) in made

    for create in (True, False):
        memory = _open(postgres_dsn, tmp_path, create=create)
        assert memory.retrieve_by_id(fact.id, trust=FULL_TRUST).id == fact.id
        memory.ingest_observation("bob", "likes", "coffee")
        memory.close()
        assert _commands(postgres_dsn) == []


@pytest.mark.usefixtures("ddl_logged")
def test_a_store_made_by_one_process_opens_in_another_without_ddl(
    postgres_dsn: str, tmp_path: Path
) -> None:
    made_elsewhere = (
        "import sys\n"
        "from membrane_es import Membrane\n"
        "m = Membrane.open_postgres(sys.argv[1], schema=sys.argv[2], embedder=None)\n"
        "print(m.ingest_observation('carol', 'likes', 'cocoa').id)\n"
        "m.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", made_elsewhere, postgres_dsn, SCHEMA],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    record_id = done.stdout.strip().splitlines()[-1]
    assert ("CREATE TABLE", SCHEMA) in _commands(postgres_dsn)

    memory = _open(postgres_dsn, tmp_path, create=False)
    try:
        assert memory.retrieve_by_id(record_id, trust=FULL_TRUST).id == record_id
        memory.ingest_observation("dave", "likes", "mate")
    finally:
        memory.close()
    assert _commands(postgres_dsn) == []


@pytest.mark.usefixtures("ddl_logged")
def test_a_store_without_the_mark_is_brought_up_to_date_once(
    postgres_dsn: str, tmp_path: Path
) -> None:
    memory = _open(postgres_dsn, tmp_path)
    fact = memory.ingest_observation("erin", "likes", "chai")
    memory.close()
    # As a store made before the mark (or by an older version) is.
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute(f'COMMENT ON TABLE "{SCHEMA}".memory_events IS NULL')
    _commands(postgres_dsn)

    memory = _open(postgres_dsn, tmp_path)
    assert memory.retrieve_by_id(fact.id, trust=FULL_TRUST).id == fact.id
    memory.close()
    assert ("COMMENT", SCHEMA) in _commands(postgres_dsn)  # the creation ran, marked
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        row = connection.execute(
            "SELECT obj_description(to_regclass(%s), 'pg_class')", (f"{SCHEMA}.memory_events",)
        ).fetchone()
    assert row == (TABLES_VERSION,)

    memory = _open(postgres_dsn, tmp_path)
    memory.close()
    assert _commands(postgres_dsn) == []


def _connections_apart(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Connections opened outside a store's pool from now on (psycopg's module-level
    ``connect`` and the store's own helper for one), by what opened them."""
    from membrane_es.stores.postgres import database

    made: list[str] = []
    plain, helper = psycopg.connect, database.open_connection

    def counted_plain(*args: object, **kwargs: object) -> object:
        made.append("psycopg.connect")
        return plain(*args, **kwargs)  # type: ignore[arg-type]

    def counted_helper(settings: dict[str, str]) -> object:
        made.append("open_connection")
        return helper(settings)

    monkeypatch.setattr(psycopg, "connect", counted_plain)
    monkeypatch.setattr(database, "open_connection", counted_helper)
    return made


def test_an_open_makes_no_connection_apart_from_its_pool(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from membrane_es.errors import StoreNotFoundError

    made = _connections_apart(monkeypatch)
    memory = _open(postgres_dsn, tmp_path)  # new: the schema and tables on the pool's
    fact = memory.ingest_observation("fay", "likes", "tea")
    memory.close()
    for create in (True, False):
        memory = _open(postgres_dsn, tmp_path, create=create)
        assert memory.retrieve_by_id(fact.id, trust=FULL_TRUST).id == fact.id
        memory.close()
    with pytest.raises(StoreNotFoundError, match="tenant_absent"):
        Membrane.open_postgres(postgres_dsn, schema="tenant_absent", create=False, embedder=None)
    assert made == []
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        absent = connection.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'tenant_absent'"
        ).fetchone()
    assert absent == (0,)  # a store that must exist is not made, nor its schema


def test_a_close_deletes_its_unused_keys_without_rewriting_the_key_table(
    postgres_dsn: str, tmp_path: Path
) -> None:
    def key_table() -> tuple[int, int]:
        """The key table's file (a rewrite, VACUUM FULL, gives it a new one), and its rows."""
        with psycopg.connect(postgres_dsn, autocommit=True) as connection:
            row = connection.execute(
                f'SELECT pg_relation_filenode(%s), (SELECT count(*) FROM "{SCHEMA}".memory_keys)',
                (f"{SCHEMA}.memory_keys",),
            ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    memory = _open(postgres_dsn, tmp_path)
    first = memory.ingest_observation("gus", "likes", "tea")  # a pool of keys is made
    memory.close()
    file_node, rows = key_table()
    for name in ("hal", "ida"):
        memory = _open(postgres_dsn, tmp_path)
        memory.ingest_observation(name, "likes", "tea")
        memory.close()  # its pool's unused keys deleted: no rewrite
        now_node, now_rows = key_table()
        assert now_node == file_node
        assert now_rows == rows + 1  # the key the write used stays; the unused are gone
        rows = now_rows
    memory = _open(postgres_dsn, tmp_path)
    memory.forget(first.id, "tester", "asked to")  # an erasure rewrites the table
    memory.close()
    assert key_table()[0] != file_node

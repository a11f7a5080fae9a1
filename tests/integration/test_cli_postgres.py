"""The command line on a PostgreSQL store: the store argument may be a ``postgresql://`` URL
(``#schema`` for a store in another schema, e.g. a tenant's), and every command works on it
as on an LMDB directory — reads of a schema holding no store are errors that create nothing,
``verify`` walks the PostgreSQL chain, ``stats`` counts the schema's tables, and an export
taken from PostgreSQL imports into LMDB with the same answers."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from tests.e2e.test_cli import as_json, fact, membrane_es, ok, refused

pytestmark = pytest.mark.postgres


def url_of(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    login = quote(parts.get("user", ""), safe="")
    if parts.get("password"):
        login += ":" + quote(parts["password"], safe="")
    host = parts.get("host", "127.0.0.1")
    return f"postgresql://{login}@{host}:{parts.get('port', '5432')}/{parts['dbname']}"


def schemas(dsn: str) -> set[str]:
    import psycopg

    with psycopg.connect(dsn) as connection:
        rows = connection.execute("SELECT nspname FROM pg_namespace").fetchall()
    return {row[0] for row in rows}


def test_commands_on_a_postgres_store(postgres_dsn: str, tmp_path: Path) -> None:
    store = url_of(postgres_dsn)
    tenant = f"{store}#tenant_acme"

    # nothing there yet: reads and verify are errors, and create nothing
    assert "no store at postgres" in refused("list", store, process=True)
    assert "no store at postgres" in refused("verify", tenant)
    assert "tenant_acme" not in schemas(postgres_dsn)

    first = as_json("create", store, fact("Orchid", "staging"), "--why", "heard")
    moved = as_json("supersede", store, first["id"], fact("Orchid", "production"), "--why", "r")
    ok("reinforce", store, moved["id"], "--why", "it helped")
    assert [r["id"] for r in as_json("list", store)["records"]] == [moved["id"]]
    assert (
        as_json("retrieve", store, "where does Orchid deploy")["records"][0]["id"] == (moved["id"])
    )
    events = [entry["event"] for entry in as_json("history", store, moved["id"])["entries"]]
    assert events[0] == "Created" and "Reinforced" in events

    report = as_json("verify", store)
    assert report["ok"] is True and report["checked"] >= 4
    stats = as_json("stats", store)
    assert stats["events"] == report["checked"] and stats["bytes_on_disk"] > 0
    assert "postgres" in stats["store"] and "schema public" in stats["store"]

    # a tenant's schema is another store
    other = as_json("create", tenant, fact("Lily", "staging"))
    assert [r["id"] for r in as_json("list", tenant)["records"]] == [other["id"]]
    assert other["id"] not in {r["id"] for r in as_json("list", store)["records"]}

    # rebuild is for a directory of views; a PostgreSQL store's live in its processes
    assert "read views live in each process" in refused("rebuild", store, status=2)

    # the log moves between back ends: PostgreSQL → export → LMDB, same answers
    exported = tmp_path / "log.jsonl"
    assert "exported" in membrane_es("export", store, str(exported)).stderr
    copy = str(tmp_path / "copy")
    assert as_json("import", copy, str(exported))["verify"].startswith("OK")
    moment = as_json("metrics", store)["collected_at"]
    args = ("--include-retracted", "--as-of", moment)
    assert as_json("list", copy, *args) == as_json("list", store, *args)


def test_a_password_in_the_url_is_never_printed() -> None:
    secret = "hunter2-not-the-password"
    result = membrane_es("list", f"postgresql://nobody:{secret}@127.0.0.1:1/none")
    assert result.returncode == 1 and "cannot connect to 127.0.0.1:1" in result.stderr
    assert secret not in result.stderr + result.stdout

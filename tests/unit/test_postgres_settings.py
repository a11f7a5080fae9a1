"""From a libpq DSN to eventsourcing.postgres settings, and tenant schema names (no server)."""

from __future__ import annotations

import socket

import pytest

from membrane_es import Membrane, MembraneError
from membrane_es.stores.postgres.database import postgres_settings, tenant_schema


def test_a_url_is_split_into_the_settings_the_module_reads() -> None:
    settings = postgres_settings("postgresql://agent:p%40ss@db.example:6543/memory", "mine")
    factory = "membrane_es.stores.postgres.recorders:ChainedPostgresFactory"
    assert settings["PERSISTENCE_MODULE"] == factory
    assert settings["CREATE_TABLE"] == "y"
    assert (
        settings["POSTGRES_HOST"],
        settings["POSTGRES_PORT"],
        settings["POSTGRES_DBNAME"],
        settings["POSTGRES_USER"],
        settings["POSTGRES_PASSWORD"],
        settings["POSTGRES_SCHEMA"],
    ) == ("db.example", "6543", "memory", "agent", "p@ss", "mine")
    assert "POSTGRES_CONNECT_TIMEOUT" not in settings  # the library's default stands


def test_key_value_form_and_connect_timeout() -> None:
    settings = postgres_settings("host=/run/pg dbname=m user=u password='a b' connect_timeout=3")
    assert settings["POSTGRES_HOST"] == "/run/pg"
    assert settings["POSTGRES_PASSWORD"] == "a b"
    assert settings["POSTGRES_CONNECT_TIMEOUT"] == "3"
    assert settings["POSTGRES_SCHEMA"] == "public"


def test_missing_parts_take_libpq_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSWORD", "from-env")
    monkeypatch.setenv("PGPORT", "5999")
    settings = postgres_settings("host=h dbname=d user=u")
    assert (settings["POSTGRES_PASSWORD"], settings["POSTGRES_PORT"]) == ("from-env", "5999")
    monkeypatch.delenv("PGPASSWORD")
    assert postgres_settings("host=h dbname=d user=u")["POSTGRES_PASSWORD"] == ""


def test_parameters_the_module_would_drop_are_refused() -> None:
    with pytest.raises(MembraneError, match=r"sslmode \(use PGSSLMODE\)"):
        postgres_settings("postgresql://u@h/d?sslmode=require")
    with pytest.raises(MembraneError, match="^postgres_dsn: "):
        postgres_settings("not a dsn")


def test_each_tenant_has_a_schema_of_its_own() -> None:
    assert tenant_schema("acme") == "tenant_acme"
    long_a, long_b = "a" * 63 + "x", "a" * 63 + "y"  # tenant names may be 64 characters
    assert len(tenant_schema(long_a)) <= 63 and len(tenant_schema(long_b)) <= 63
    assert tenant_schema(long_a) != tenant_schema(long_b)
    with pytest.raises(MembraneError, match="schema"):
        postgres_settings("host=h", "s" * 64)


def test_an_unreachable_server_fails_the_open_clearly() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dsn = f"postgresql://u:p@127.0.0.1:{port}/d?connect_timeout=2"
    with pytest.raises(MembraneError, match=f"postgres: cannot connect to 127.0.0.1:{port}"):
        Membrane.open_postgres(dsn)

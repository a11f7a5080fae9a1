"""Erasure on a PostgreSQL store: keys in the ``memory_keys`` table beside the log, destroyed
by ``forget`` (row deleted, table rewritten), the log's rows never holding the text, and
another process on the same log reading the record redacted. Skipped without
``MEMBRANE_TEST_POSTGRES_DSN`` (failed under ``CI=true``), see ``conftest.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from membrane_es import ForgottenError, Membrane, StorageFullError
from membrane_es.engine.addresses import StoreAddress
from membrane_es.stores.key_store import PostgresKeyStore
from tests.unit.builders import FULL_TRUST, semantic

pytestmark = pytest.mark.postgres

SECRET = "Zanzibarquux"


@pytest.fixture
def engines(postgres_dsn: str, tmp_path: Path) -> Iterator[list[Membrane]]:
    opened: list[Membrane] = []
    yield opened
    for engine in opened:
        engine.close()


def _count(dsn: str, query: str, *params: object) -> int:
    with psycopg.connect(dsn) as connection:
        row = connection.execute(query, params).fetchone()
    assert row is not None
    return int(row[0])


def test_forget_on_postgres(postgres_dsn: str, tmp_path: Path, engines: list[Membrane]) -> None:
    writer = Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / "a")
    engines.append(writer)
    secret = writer.create_record(semantic(SECRET, "lives_in", "Lisbon")).id
    kept = writer.create_record(semantic("api", "runs_on", "port 8080")).id
    reader = Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / "b")
    engines.append(reader)
    assert SECRET in str(reader.retrieve_by_id(secret, trust=FULL_TRUST).payload)
    keys = _count(postgres_dsn, "SELECT count(*) FROM public.memory_keys")
    text_rows = "SELECT count(*) FROM public.memory_events WHERE position(%s IN state) > 0"
    assert _count(postgres_dsn, text_rows, SECRET.encode()) == 0  # sealed in the log

    assert writer.forget(secret, "dpo", "erasure request") == [secret]

    assert _count(postgres_dsn, "SELECT count(*) FROM public.memory_keys") == keys - 1
    # another process that had read it (and holds its key in memory) reads it redacted too
    assert reader.retrieve_by_id(secret, trust=FULL_TRUST).payload is None
    assert [h.event for h in reader.history(secret, trust=FULL_TRUST)] == ["Created", "Forgotten"]
    assert [h.rationale for h in reader.history(secret, trust=FULL_TRUST)][0] == ""
    assert SECRET not in str(reader.retrieve(SECRET, trust=FULL_TRUST).records)
    assert reader.retrieve_by_id(kept, trust=FULL_TRUST).payload is not None
    assert writer.verify().ok  # the log only grew
    writer.close()
    reopened = Membrane.open_postgres(postgres_dsn)  # no checkpoint: views from the log
    engines.append(reopened)
    assert reopened.retrieve_by_id(secret, trust=FULL_TRUST).payload is None
    assert not reopened.views.text.search(SECRET)[0].size


def _fail(*args: object, **kwargs: object) -> None:
    raise StorageFullError(28, "no space left")


def test_a_forget_cut_short_after_its_events_is_finished_by_the_next_open(
    postgres_dsn: str, tmp_path: Path, engines: list[Membrane], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key table's delete fails once the events are saved: every process reads the record
    redacted (the event reaches them; the one that held the key in memory too), the key row
    and its note stay, ``verify`` names the record, and the next process to open finishes."""
    writer = Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / "a")
    engines.append(writer)
    secret = writer.create_record(semantic(SECRET, "lives_in", "Lisbon")).id
    reader = Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / "b")
    engines.append(reader)
    assert SECRET in str(reader.retrieve_by_id(secret, trust=FULL_TRUST).payload)
    key_id = writer.application.content_key(secret)
    key_row = "SELECT count(*) FROM public.memory_keys WHERE id = %s"
    doomed = "SELECT count(*) FROM public.memory_doomed_keys"

    with monkeypatch.context() as patched:
        patched.setattr(PostgresKeyStore, "_delete", _fail)
        with pytest.raises(StorageFullError):
            writer.forget(secret, "dpo", "erasure request")

    assert _count(postgres_dsn, key_row, key_id) == 1 and _count(postgres_dsn, doomed) == 1
    for engine in (writer, reader):
        assert engine.retrieve_by_id(secret, trust=FULL_TRUST).payload is None
        assert SECRET not in str(engine.retrieve(SECRET, trust=FULL_TRUST).records)
    report = Membrane.verify_store(StoreAddress(dsn=postgres_dsn))
    assert report.fault == "interrupted" and secret in report.detail
    assert "cut short after its Forgotten events were saved" in report.detail

    engines.append(Membrane.open_postgres(postgres_dsn))  # another process opens: finished

    assert _count(postgres_dsn, key_row, key_id) == 0 and _count(postgres_dsn, doomed) == 0
    assert Membrane.verify_store(StoreAddress(dsn=postgres_dsn)).ok
    with pytest.raises(ForgottenError):
        writer.forget(secret, "dpo", "erasure request")


def test_a_forget_cut_short_before_its_events_erased_nothing_and_runs_again(
    postgres_dsn: str, tmp_path: Path, engines: list[Membrane], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / "a")
    engines.append(writer)
    secret = writer.create_record(semantic(SECRET, "lives_in", "Lisbon")).id

    with monkeypatch.context() as patched:
        patched.setattr(writer.application, "save", _fail)
        with pytest.raises(StorageFullError):
            writer.forget(secret, "dpo", "erasure request")

    assert SECRET in str(writer.retrieve_by_id(secret, trust=FULL_TRUST).payload)
    report = Membrane.verify_store(StoreAddress(dsn=postgres_dsn))
    assert report.fault == "interrupted" and f"a forget of {secret} was cut short" in report.detail
    assert writer.forget(secret, "dpo", "erasure request") == [secret]
    assert writer.retrieve_by_id(secret, trust=FULL_TRUST).payload is None
    assert Membrane.verify_store(StoreAddress(dsn=postgres_dsn)).ok

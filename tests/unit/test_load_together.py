"""Loading several records at once (a search's results): their events read together and the
keys of their sealed content fetched in one lookup, with every record exactly as a load of
it alone gives it — revised, forgotten or missing."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from membrane_es import Membrane, NotFoundError
from membrane_es.stores.key_store import SqliteKeyStore
from tests.unit.builders import semantic

AT = datetime(2031, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["lmdb", "in_memory"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Membrane]:
    """An LMDB store (its events read in one transaction) and an in-memory one (read one
    record at a time, their keys still fetched together)."""
    if request.param == "lmdb":
        engine = Membrane.open(tmp_path / "store", resolve_writes=False)
    else:
        engine = Membrane.in_memory(resolve_writes=False)
    yield engine
    engine.close()


def _aggregate_state(memory: Membrane, record_ids: Sequence[str]) -> list[object]:
    return [memory.application.load(record_id).view(AT) for record_id in record_ids]


def test_records_loaded_together_equal_records_loaded_alone(
    memory: Membrane, monkeypatch: pytest.MonkeyPatch
) -> None:
    vector = np.linspace(-1.0, 1.0, 8, dtype=np.float32)
    ids = [
        memory.create_record(
            semantic(f"service{i}", "runs_on", f"port {8000 + i}"), embedding=vector
        ).id
        for i in range(12)
    ]
    memory.reinforce(ids[1], "ops", "confirmed")
    memory.penalize(ids[2], 0.2, "ops", "doubtful")
    memory.forget(ids[3], "dpo", "erasure request")
    app = memory.application
    app.cache.clear()
    alone = _aggregate_state(memory, ids)
    app.cache.clear()
    lookups: list[int] = []
    fetch_ids = SqliteKeyStore._fetch_ids
    fetch_run = SqliteKeyStore._fetch_run

    def counted_ids(self: SqliteKeyStore, key_ids: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
        lookups.append(len(key_ids))
        return fetch_ids(self, key_ids)

    def counted_run(self: SqliteKeyStore, key_id: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        lookups.append(-1)
        return fetch_run(self, key_id, limit)

    monkeypatch.setattr(SqliteKeyStore, "_fetch_ids", counted_ids)
    monkeypatch.setattr(SqliteKeyStore, "_fetch_run", counted_run)
    app.keys.drop_cache()
    order = [ids[5], ids[3], ids[0], ids[5], *ids[6:], ids[1], ids[2], ids[4]]
    together = app.load_many(order)

    assert [a.view(AT) for a in together] == [alone[ids.index(i)] for i in order]
    assert together[1].view(AT).payload is None  # forgotten: read redacted, as alone
    assert together[0] is not together[3]  # each a private copy
    assert lookups == [11]  # one lookup for every live record's key (the forgotten has none)


def test_a_missing_record_among_others_is_named(memory: Membrane) -> None:
    ids = [memory.create_record(semantic(f"db{i}", "runs_on", "host a")).id for i in range(3)]
    memory.application.cache.clear()
    missing = "0190c0de-0000-7000-8000-000000000000"
    with pytest.raises(NotFoundError, match=missing):
        memory.application.load_many([ids[0], missing, ids[2]])
    assert [a.view(AT).id for a in memory.application.load_many(ids)] == ids

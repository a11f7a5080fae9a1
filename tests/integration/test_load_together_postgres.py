"""A PostgreSQL store loads a search's results together as an LMDB one does: the keys of
their sealed content fetched in one query of the ``memory_keys`` table, every record as a
load of it alone gives it. Skipped without ``MEMBRANE_TEST_POSTGRES_DSN`` (failed under
``CI=true``), see ``conftest.py``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from membrane_es import Membrane
from membrane_es.stores.key_store import PostgresKeyStore
from tests.unit.builders import semantic

pytestmark = pytest.mark.postgres

AT = datetime(2031, 1, 1, tzinfo=UTC)


def test_records_loaded_together_equal_records_loaded_alone(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / "views")
    try:
        ids = [
            memory.create_record(semantic(f"queue{i}", "runs_on", f"host {i}")).id for i in range(8)
        ]
        memory.reinforce(ids[0], "ops", "confirmed")
        memory.forget(ids[1], "dpo", "erasure request")
        app = memory.application
        app.cache.clear()
        alone = [app.load(record_id).view(AT) for record_id in ids]
        app.cache.clear()
        app.keys.drop_cache()
        asked: list[int] = []
        fetch_ids = PostgresKeyStore._fetch_ids

        def counted(self: PostgresKeyStore, key_ids: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
            asked.append(len(key_ids))
            return fetch_ids(self, key_ids)

        monkeypatch.setattr(PostgresKeyStore, "_fetch_ids", counted)
        together = app.load_many(list(reversed(ids)))

        assert [aggregate.view(AT) for aggregate in together] == list(reversed(alone))
        assert together[-2].view(AT).payload is None  # forgotten: redacted, as alone
        assert asked == [7]  # every live record's key in one query
    finally:
        memory.close()

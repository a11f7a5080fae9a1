"""``verify`` over a range of positions on PostgreSQL, where a position is a notification id
(one a rolled back write took stays unused): the range links to the last hash before it."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from membrane_es import Membrane, ValidationError
from membrane_es.engine.addresses import StoreAddress
from tests.unit.builders import semantic


def test_ranges_on_postgres(postgres_dsn: str, tmp_path: Path) -> None:
    with Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / "views") as memory:
        ids = [memory.create_record(semantic(f"s{i}", "is", "x")).id for i in range(3)]
        for record_id in ids:
            memory.reinforce(record_id, "t", "helped")
        head = memory.last_position or 0
        assert memory.verify().ok
        part = memory.verify(from_position=2, to_position=4)
        assert part.ok and part.checked == 3 and (part.first, part.last) == (2, 4)
        assert memory.verify(from_position=head).head == memory.verify().head
        with pytest.raises(ValidationError, match="to_position.*beyond the log's head"):
            memory.verify(to_position=head + 1)
        with pytest.raises(ValidationError, match="from_position"):
            memory.verify(from_position=4, to_position=3)

    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute(
            "UPDATE public.memory_events SET state = overlay(state placing '\\x00'::bytea "
            "from 3 for 1) WHERE notification_id = 4"
        )
    store = StoreAddress(dsn=postgres_dsn)
    assert Membrane.verify_store(store, from_position=1, to_position=3).ok
    assert Membrane.verify_store(store, from_position=5).ok
    report = Membrane.verify_store(store, from_position=2, to_position=5)
    assert not report.ok and report.notification_id == 4 and report.checked == 2
    assert not Membrane.verify_store(store).ok

"""A deleted entry is known by its retraction's ``deleted`` mark; a log written before the
mark existed knew it by the retraction's rationale, and still reads the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from membrane_es import Membrane
from membrane_es.aggregates import RecordAggregate
from membrane_es.queries.entries import EntryQuery
from membrane_es.schema.entries import DELETE_RATIONALE, NewEntry
from membrane_es.stores.codec import MsgspecMapper

RETRACTED = get_topic(RecordAggregate.Retracted)


@pytest.fixture
def retractions_written_the_old_way(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Retractions stored as the first version of the class wrote them: no ``deleted``
    field and no class version in their state."""
    to_stored_event = MsgspecMapper.to_stored_event

    def old_way(self: MsgspecMapper, domain_event: Any) -> StoredEvent:
        stored = to_stored_event(self, domain_event)
        if stored.topic != RETRACTED:
            return stored
        state = msgspec.msgpack.decode(stored.state)
        del state["deleted"], state["class_version"]
        return StoredEvent(
            originator_id=stored.originator_id,
            originator_version=stored.originator_version,
            topic=stored.topic,
            state=msgspec.msgpack.encode(state),
        )

    monkeypatch.setattr(MsgspecMapper, "to_stored_event", old_way)
    yield


def _titles(memory: Membrane, **query: Any) -> list[str]:
    return [entry.title for entry in memory.list_entries(EntryQuery(**query)).entries]


VALID_FROM = 1_000_000  # epoch seconds: every entry here is valid from then


def _write_deleted_and_invalidated(path: Path) -> None:
    """A store with one entry deleted, one invalidated and one active."""
    with Membrane.open(path) as memory:
        deleted, invalidated, _ = (
            memory.create_entry(NewEntry(type="project", title=title, created_at=VALID_FROM))
            for title in ("orchid deleted", "orchid invalidated", "orchid active")
        )
        memory.delete_entry(deleted.id)
        memory.invalidate_entry(invalidated.id)


def _check_reads(path: Path) -> None:
    with Membrane.open(path) as memory:
        assert _titles(memory) == ["orchid active"]
        # Before the invalidation the invalidated entry was valid; the deleted one is
        # hidden from past reads too.
        past = sorted(_titles(memory, as_of=VALID_FROM + 1))
        assert past == ["orchid active", "orchid invalidated"]


def test_a_deleted_entry_is_hidden_from_past_reads_an_invalidated_one_is_not(
    tmp_path: Path,
) -> None:
    _write_deleted_and_invalidated(tmp_path / "store")
    _check_reads(tmp_path / "store")


def test_a_deletion_written_before_the_mark_is_read_by_its_rationale(
    tmp_path: Path, retractions_written_the_old_way: None
) -> None:
    _write_deleted_and_invalidated(tmp_path / "store")
    _check_reads(tmp_path / "store")


def test_an_old_retraction_upcasts_to_deleted_only_with_the_delete_rationale() -> None:
    upcast = RecordAggregate.Retracted.upcast_v1_v2
    deleted: dict[str, Any] = {"rationale": DELETE_RATIONALE}
    invalidated: dict[str, Any] = {"rationale": "entry invalidated"}
    upcast(deleted)
    upcast(invalidated)
    assert deleted["deleted"] is True
    assert invalidated["deleted"] is False

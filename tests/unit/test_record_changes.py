"""``Membrane.record_changes``: the records the log's events after a position touched, each
once, in the order of its last event, with whether an active read finds it now."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane_es import Membrane, ValidationError

FACT = {
    "type": "semantic",
    "payload": {"kind": "semantic", "subject": "a", "predicate": "b", "object": "c"},
    "provenance": {"sources": [{"kind": "artifact", "ref": "x"}]},
}
TURN = {
    "type": "episodic",
    "payload": {"kind": "episodic", "timeline": [{"t": "2026-01-01T00:00:00Z", "summary": "hi"}]},
    "provenance": {"sources": [{"kind": "event", "ref": "y"}]},
}


def test_changes_after_a_position_name_each_record_once_in_order() -> None:
    with Membrane.in_memory(embedder=None) as memory:
        start = memory.position
        first = memory.create_record(FACT)
        second = memory.supersede(first.id, FACT, "me", "revised")
        turn = memory.create_record(TURN)
        memory.penalize(turn.id, 1.0, "me", "taken out")  # out of use, not retracted
        kept = memory.create_record(FACT, resolve=False)  # the same fact, kept apart
        changes = memory.record_changes(start)
        assert changes is not None and changes.position == memory.position
        assert [(c.record_id, c.active) for c in changes.records] == [
            (first.id, False),
            (second.id, True),
            (turn.id, False),
            (kept.id, True),
        ]
        later = memory.record_changes(changes.position)
        assert later is not None and later.records == []
        memory.retract(second.id, "me", "gone")
        after = memory.record_changes(changes.position)
        assert after is not None and [(c.record_id, c.active) for c in after.records] == [
            (second.id, False)
        ]
        assert memory.record_changes(start, limit=2) is None  # more than asked for: re-read
        assert memory.record_changes(memory.position + 1) is None  # past the views


def test_changes_another_engine_wrote_are_read_from_the_log(tmp_path: Path) -> None:
    with (
        Membrane.open(tmp_path, embedder=None) as mine,
        Membrane.open(tmp_path, embedder=None) as theirs,
    ):
        start = mine.position
        written = theirs.create_record(FACT)
        changes = mine.record_changes(start)
        assert changes is not None
        assert [(c.record_id, c.active) for c in changes.records] == [(written.id, True)]


@pytest.mark.parametrize(("after", "limit", "field"), [(-1, 10, "after"), (0, 0, "limit")])
def test_bad_arguments_name_their_field(after: int, limit: int, field: str) -> None:
    with Membrane.in_memory(embedder=None) as memory, pytest.raises(ValidationError) as error:
        memory.record_changes(after, limit=limit)
    assert error.value.field == field

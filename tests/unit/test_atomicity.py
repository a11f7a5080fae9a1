"""Atomicity (spec §4.8, §10.3; DESIGN §3): a multi-record operation is one save.

Faults are injected part-way through that save: in the recorder after some of the
operation's events have gone by, or in the mapper while events are being encoded. Either way
no event of the operation reaches the log and the store keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from membrane_es import Membrane, MembraneError, NotFoundError
from tests.unit.builders import log_size, read, semantic, working


class InjectedFault(Exception):
    """The failure a test injects into the write path."""


class FailPartWay:
    """Wraps ``insert_events``: lets ``allow`` events through, then fails on the next one.

    If an operation were split over several inserts, the first ones would reach the real
    recorder before the fault: exactly the partial write these tests look for.
    """

    def __init__(self, inner: Callable[..., Any], allow: int) -> None:
        self.inner = inner
        self.allow = allow
        self.passed = 0
        self.armed = True

    def __call__(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Any:
        if self.armed:
            for _ in stored_events:
                if self.passed == self.allow:
                    raise InjectedFault(f"store failed after {self.passed} events")
                self.passed += 1
        return self.inner(stored_events, **kwargs)


class InsertSpy:
    """Wraps ``insert_events`` and remembers how many events each call carried."""

    def __init__(self, inner: Callable[..., Any]) -> None:
        self.inner = inner
        self.calls: list[int] = []

    def __call__(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Any:
        self.calls.append(len(stored_events))
        return self.inner(stored_events, **kwargs)


def fail_part_way(memory: Membrane, monkeypatch: pytest.MonkeyPatch, allow: int) -> FailPartWay:
    recorder = memory.application.recorder
    fault = FailPartWay(recorder.insert_events, allow)
    monkeypatch.setattr(recorder, "insert_events", fault)
    return fault


def spy_inserts(memory: Membrane, monkeypatch: pytest.MonkeyPatch) -> InsertSpy:
    recorder = memory.application.recorder
    spy = InsertSpy(recorder.insert_events)
    monkeypatch.setattr(recorder, "insert_events", spy)
    return spy


def events_of(memory: Membrane, record_id: str) -> list[str]:
    return [h.event for h in memory.history(record_id)]


@pytest.fixture
def facts(memory: Membrane) -> list[str]:
    ids = [memory.create_record(semantic(obj=port)).id for port in (80, 8080, 9090)]
    for record_id in ids:
        read(memory, record_id)  # warm any cache, so a fault must not leave it dirty
    return ids


# --- merge ------------------------------------------------------------------------------------


def test_merge_of_three_is_one_insert(
    memory: Membrane, facts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = spy_inserts(memory, monkeypatch)

    memory.merge(facts, semantic(evidence=True), "curator", "dedupe")

    assert spy.calls == [4]


def test_merge_failing_part_way_writes_nothing(
    memory: Membrane, facts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = log_size(memory)
    fail_part_way(memory, monkeypatch, allow=2)

    with pytest.raises(InjectedFault):
        memory.merge(facts, semantic(id="merged", evidence=True), "curator", "dedupe")

    assert log_size(memory) == before
    with pytest.raises(NotFoundError):
        read(memory, "merged")


def test_merge_failing_part_way_leaves_every_source_active(
    memory: Membrane, facts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_part_way(memory, monkeypatch, allow=2)

    with pytest.raises(InjectedFault):
        memory.merge(facts, semantic(evidence=True), "curator", "dedupe")

    for record_id in facts:
        assert read(memory, record_id).salience > 0
        assert events_of(memory, record_id) == ["Created"]


def test_store_works_after_a_failed_merge(
    memory: Membrane, facts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fault = fail_part_way(memory, monkeypatch, allow=2)
    with pytest.raises(InjectedFault):
        memory.merge(facts, semantic(id="merged", evidence=True), "curator", "dedupe")
    fault.armed = False

    merged = memory.merge(facts, semantic(id="merged", evidence=True), "curator", "again")

    assert merged.id == "merged"
    assert [read(memory, i).salience for i in facts] == [0.0, 0.0, 0.0]
    assert all(events_of(memory, i) == ["Created", "MergedInto"] for i in facts)


def test_merge_failing_while_encoding_writes_nothing(
    memory: Membrane, facts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mapper = memory.application.mapper
    encode = mapper.to_stored_event
    encoded: list[object] = []

    def encode_two_then_fail(event: Any) -> StoredEvent:
        if len(encoded) == 2:
            raise InjectedFault("encoder failed")
        encoded.append(event)
        return encode(event)

    before = log_size(memory)
    monkeypatch.setattr(mapper, "to_stored_event", encode_two_then_fail)

    with pytest.raises(InjectedFault):
        memory.merge(facts, semantic(evidence=True), "curator", "dedupe")

    assert log_size(memory) == before
    assert all(read(memory, i).salience > 0 for i in facts)


# --- supersede and paired relations -----------------------------------------------------------


def test_supersede_failing_part_way_writes_nothing(
    memory: Membrane, facts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    old = facts[0]
    before = log_size(memory)
    fail_part_way(memory, monkeypatch, allow=1)

    with pytest.raises(InjectedFault):
        memory.supersede(old, semantic(id="new", evidence=True), "ops", "moved")

    assert log_size(memory) == before
    assert read(memory, old).salience > 0
    with pytest.raises(NotFoundError):
        read(memory, "new")


def test_supersede_is_one_insert(
    memory: Membrane, facts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = spy_inserts(memory, monkeypatch)

    memory.supersede(facts[0], semantic(evidence=True), "ops", "moved")

    assert spy.calls == [2]


def test_paired_relation_failing_part_way_writes_neither_edge(
    memory: Membrane, facts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target, _ = facts
    fail_part_way(memory, monkeypatch, allow=1)

    with pytest.raises(InjectedFault):
        memory.add_relation(source, "supports", target, inverse="supported_by")

    assert read(memory, source).relations == []
    assert read(memory, target).relations == []


# --- batches ----------------------------------------------------------------------------------


def test_batch_rolls_back_entirely_when_its_block_raises(
    memory: Membrane, facts: list[str]
) -> None:
    before = log_size(memory)

    with pytest.raises(RuntimeError, match="changed my mind"), memory.batch():
        memory.create_record(semantic(id="draft"))
        memory.reinforce(facts[0], "agent", "r")
        memory.merge(facts[1:], semantic(evidence=True), "curator", "dedupe")
        raise RuntimeError("changed my mind")

    assert log_size(memory) == before
    with pytest.raises(NotFoundError):
        read(memory, "draft")
    assert all(events_of(memory, i) == ["Created"] for i in facts)


def test_batch_commits_everything_in_one_insert(
    memory: Membrane, facts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = spy_inserts(memory, monkeypatch)

    with memory.batch():
        memory.create_record(working(id="note"))
        memory.reinforce(facts[0], "agent", "r")
        memory.retract(facts[1], "agent", "r")

    assert spy.calls == [3]
    assert read(memory, "note").id == "note"


def test_batch_writes_are_invisible_until_the_block_ends(
    memory: Membrane, facts: list[str]
) -> None:
    before = log_size(memory)

    with memory.batch():
        memory.create_record(working(id="note"))
        assert log_size(memory) == before
        with pytest.raises(NotFoundError):
            read(memory, "note")

    assert log_size(memory) == before + 1


def test_commands_in_a_batch_see_earlier_commands_of_the_batch(
    memory: Membrane, facts: list[str]
) -> None:
    with memory.batch():
        memory.create_record(working(id="note"))
        memory.reinforce("note", "agent", "r")
        memory.add_relation("note", "about", facts[0])

    assert events_of(memory, "note") == ["Created", "Reinforced", "RelationAdded"]


def test_batch_failing_at_commit_writes_nothing(
    memory: Membrane, facts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = log_size(memory)
    fault = fail_part_way(memory, monkeypatch, allow=2)

    with pytest.raises(InjectedFault), memory.batch():
        memory.create_record(working(id="note"))
        memory.reinforce(facts[0], "agent", "r")
        memory.retract(facts[1], "agent", "r")

    assert log_size(memory) == before
    fault.armed = False
    memory.reinforce(facts[0], "agent", "after")
    assert events_of(memory, facts[0]) == ["Created", "Reinforced"]


def test_failed_command_caught_inside_a_batch_adds_nothing(
    memory: Membrane, facts: list[str]
) -> None:
    with memory.batch():
        memory.reinforce(facts[0], "agent", "r")
        with pytest.raises(NotFoundError):
            memory.merge([facts[1], "missing"], semantic(evidence=True), "curator", "x")

    assert events_of(memory, facts[0]) == ["Created", "Reinforced"]
    assert events_of(memory, facts[1]) == ["Created"]


def test_batches_do_not_nest(memory: Membrane) -> None:
    with pytest.raises(MembraneError, match="nest"), memory.batch(), memory.batch():
        pass  # pragma: no cover

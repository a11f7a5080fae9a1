"""The ``RecordAggregate`` aggregate, given/when/then, and the shape of its events.

Events are past tense and carry who and why; the audit log is derived from them; event
times strictly increase, within one operation and across the whole log.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from datetime import datetime, timedelta
from typing import Any

import msgspec
import pytest
from eventsourcing.domain import DomainEvent

from membrane_es import EpisodicImmutableError, Membrane
from membrane_es.aggregates import RecordAggregate, record_key
from membrane_es.schema import (
    AuditEntry,
    EpisodicPayload,
    MemoryRecord,
    MemoryType,
    Relation,
    RevisionStatus,
    SemanticPayload,
)
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import episodic, semantic, working
from tests.unit.conftest import START, ManualTime

TICK = timedelta(seconds=1)
LATER = START + timedelta(days=1)


def event_classes() -> list[type[DomainEvent]]:
    return [
        value
        for value in vars(RecordAggregate).values()
        if isinstance(value, type)
        and issubclass(value, DomainEvent)
        and value is not RecordAggregate.Event
    ]


def new_fact(record_id: str = "fact-1", salience: float = 0.8) -> RecordAggregate:
    record = MemoryRecord(
        id=record_id,
        type=MemoryType.SEMANTIC,
        salience=salience,
        payload=SemanticPayload(subject="api", predicate="port", object=8080),
    )
    return RecordAggregate.create(record, actor="system", rationale="Initial creation", at=START)


def log_events(memory: Membrane) -> list[Any]:
    """Every event in the log, in notification order, as domain events."""
    app = memory.application
    notifications = app.recorder.select_notifications(start=1, limit=1000)
    return [app.mapper.to_domain_event(n) for n in notifications]


def strictly_increasing(moments: list[datetime]) -> bool:
    return all(a < b for a, b in zip(moments, moments[1:], strict=False))


# --- the events themselves --------------------------------------------------------------------


@pytest.mark.parametrize("cls", event_classes(), ids=lambda c: c.__name__)
def test_event_names_are_past_tense(cls: type) -> None:
    words = re.findall(r"[A-Z][a-z]*", cls.__name__)

    # Regular past participles end in -ed; DESIGN.md names the one irregular event.
    assert any(word.endswith("ed") or word == "Forgotten" for word in words), cls.__name__


@pytest.mark.parametrize("cls", event_classes(), ids=lambda c: c.__name__)
def test_every_event_carries_actor_and_rationale(cls: type) -> None:
    fields = {f.name for f in dataclasses.fields(cls)}

    assert {"actor", "rationale"} <= fields


@pytest.mark.parametrize("cls", event_classes(), ids=lambda c: c.__name__)
def test_no_event_stores_an_audit_entry(cls: type) -> None:
    hints = typing.get_type_hints(cls)

    for name, hint in hints.items():
        assert "audit" not in name
        assert AuditEntry not in (hint, *typing.get_args(hint)), name


# --- given/when/then on the aggregate -----------------------------------------------------------


def test_created_record_holds_its_content_and_one_audit_entry() -> None:
    record = new_fact()

    view = record.view(START)

    assert (view.id, view.salience, view.created_at) == ("fact-1", 0.8, START)
    assert [(e.action, e.actor, e.timestamp) for e in view.audit_log] == [
        ("create", "system", START)
    ]
    assert record.version == 1


def test_created_event_stores_no_audit_entry() -> None:
    record = new_fact()

    (created,) = record.collect_events()

    assert isinstance(created, RecordAggregate.Created)
    assert created.record.audit_log == []


def test_record_id_maps_to_a_stable_aggregate_id() -> None:
    assert new_fact("fact-1").id == record_key("fact-1") == new_fact("fact-1").id


def test_each_change_adds_one_version() -> None:
    record = new_fact()

    record.reinforce(actor="a", rationale="r", at=START + TICK)
    record.penalize(0.1, actor="a", rationale="r", at=START + 2 * TICK)

    assert record.version == 3
    assert [type(e).__name__ for e in record.collect_events()] == [
        "Created",
        "Reinforced",
        "Penalized",
    ]


def test_audit_entries_are_derived_from_events_in_order() -> None:
    record = new_fact()
    record.reinforce(actor="alice", rationale="useful", at=START + TICK)
    record.contest("", actor="bob", rationale="doubt", at=START + 2 * TICK)
    record.retract(actor="carol", rationale="wrong", at=START + 3 * TICK)

    trail = [(e.action, e.actor, e.rationale, e.timestamp) for e in record.view(LATER).audit_log]

    assert trail == [
        ("create", "system", "Initial creation", START),
        ("reinforce", "alice", "useful", START + TICK),
        ("revise", "bob", "doubt", START + 2 * TICK),
        ("delete", "carol", "wrong", START + 3 * TICK),
    ]


def test_relations_and_pins_are_not_audit_entries() -> None:
    record = new_fact()
    relation = Relation(predicate="supports", target_id="fact-0", created_at=START + TICK)
    record.add_relation(relation, actor="a", rationale="r", at=START + TICK)
    record.pin(actor="a", rationale="r", at=START + 2 * TICK)
    record.unpin(actor="a", rationale="r", at=START + 3 * TICK)

    assert len(record.view(LATER).audit_log) == 1


def test_superseded_record_is_retracted_and_points_forward() -> None:
    record = new_fact()

    record.supersede("fact-2", actor="a", rationale="r", at=START + TICK)

    view = record.view(START + TICK)
    assert view.salience == 0.0
    assert isinstance(view.payload, SemanticPayload) and view.payload.revision is not None
    assert view.payload.revision.superseded_by == "fact-2"
    assert view.payload.revision.status == RevisionStatus.RETRACTED


def test_forked_record_is_unchanged_but_audited() -> None:
    record = new_fact()

    record.fork("fact-2", actor="a", rationale="dev", at=START + TICK)

    view = record.view(START)
    assert view.salience == 0.8
    assert view.audit_log[-1].rationale == "forked to fact-2: dev"


def test_contest_with_a_ref_adds_a_relation() -> None:
    record = new_fact()

    record.contest("fact-9", actor="a", rationale="r", at=START + TICK)

    assert [(r.predicate, r.target_id) for r in record.view(LATER).relations] == [
        ("contested_by", "fact-9")
    ]


def test_adding_the_same_relation_again_replaces_it() -> None:
    record = new_fact()
    for weight, at in ((0.3, START + TICK), (0.9, START + 2 * TICK)):
        relation = Relation(predicate="supports", target_id="fact-0", weight=weight, created_at=at)
        record.add_relation(relation, actor="a", rationale="r", at=at)

    assert [r.weight for r in record.view(LATER).relations] == [0.9]


def test_reinforced_event_records_the_new_base() -> None:
    record = new_fact(salience=0.5)

    record.reinforce(actor="a", rationale="r", at=START)

    (_, reinforced) = record.collect_events()
    assert isinstance(reinforced, RecordAggregate.Reinforced)
    assert reinforced.salience == pytest.approx(0.6)


def test_penalized_event_records_amount_and_new_base() -> None:
    record = new_fact(salience=0.5)

    record.penalize(0.2, actor="a", rationale="r", at=START)

    (_, penalized) = record.collect_events()
    assert isinstance(penalized, RecordAggregate.Penalized)
    assert (penalized.amount, penalized.salience) == (0.2, pytest.approx(0.3))


def test_episodic_record_refuses_revision_and_emits_nothing() -> None:
    data = MemoryRecord(id="ep-1", type=MemoryType.EPISODIC, payload=EpisodicPayload())
    record = RecordAggregate.create(data, actor="a", rationale="r", at=START)

    with pytest.raises(EpisodicImmutableError):
        record.retract(actor="a", rationale="r", at=START + TICK)

    assert record.version == 1


def test_outcome_shows_in_the_episodic_payload() -> None:
    data = MemoryRecord(id="ep-1", type=MemoryType.EPISODIC, payload=EpisodicPayload())
    record = RecordAggregate.create(data, actor="a", rationale="r", at=START)

    record.record_outcome("failure", actor="runner", rationale="", at=START + TICK)

    view = record.view(LATER)
    assert isinstance(view.payload, EpisodicPayload)
    assert view.payload.outcome == "failure"
    assert view.audit_log[-1].rationale == "Outcome recorded: failure"


def test_viewing_does_not_change_the_aggregate() -> None:
    record = new_fact()
    before = msgspec.msgpack.encode(record.state)

    record.view(LATER)
    record.view(START)

    assert msgspec.msgpack.encode(record.state) == before
    assert record.version == 1


def test_replaying_the_events_rebuilds_the_same_view() -> None:
    record = new_fact()
    record.reinforce(actor="a", rationale="r", at=START + TICK)
    record.contest("fact-0", actor="a", rationale="r", at=START + 2 * TICK)

    rebuilt: Any = None
    for event in record.collect_events():
        rebuilt = event.mutate(rebuilt)

    assert rebuilt.view(LATER) == record.view(LATER)


# --- event times --------------------------------------------------------------------------------


def test_event_times_increase_within_a_merge(memory: Membrane) -> None:
    ids = [memory.create_record(semantic(obj=i)).id for i in range(3)]
    before = len(log_events(memory))

    memory.merge(ids, semantic(evidence=True), "curator", "dedupe")

    merge_events = log_events(memory)[before:]
    assert [type(e).__name__ for e in merge_events].count("MergedInto") == 3
    assert type(merge_events[-1]).__name__ == "Created"
    assert strictly_increasing([e.timestamp for e in merge_events])


def test_event_times_increase_across_the_log_on_a_stopped_clock(memory: Membrane) -> None:
    fact = memory.create_record(semantic())
    other = memory.create_record(working())
    memory.reinforce(fact.id, "a", "r")
    memory.penalize(fact.id, 0.1, "a", "r")
    memory.add_relation(fact.id, "supports", other.id, inverse="supported_by")
    with memory.batch():
        memory.pin(fact.id)
        memory.contest(fact.id, other.id, "a", "r")
    memory.supersede(fact.id, semantic(evidence=True), "a", "r")
    memory.fork(other.id, working("t-2"), "a", "r")

    events = log_events(memory)

    assert len(events) == 12
    assert strictly_increasing([e.timestamp for e in events])


def test_event_times_increase_when_the_wall_clock_steps_back(
    memory: Membrane, time: ManualTime
) -> None:
    fact = memory.create_record(semantic())
    time.advance(hours=-2)
    memory.reinforce(fact.id, "a", "r")
    time.advance(hours=-2)
    memory.create_record(episodic())

    assert strictly_increasing([e.timestamp for e in log_events(memory)])


def test_a_new_engine_starts_after_the_last_event(memory: Membrane, time: ManualTime) -> None:
    fact = memory.create_record(semantic())
    time.advance(days=1)
    memory.reinforce(fact.id, "a", "r")
    behind = ManualTime(START - timedelta(days=365))

    reopened = Membrane(memory.application, clock=MonotonicClock(source=behind))
    reopened.reinforce(fact.id, "a", "again")

    assert strictly_increasing([e.timestamp for e in log_events(memory)])


def test_an_engine_with_a_slow_clock_stamps_after_the_records_last_event(
    memory: Membrane, time: ManualTime
) -> None:
    """Two engines share one log; the second's clock runs a day behind the first's."""
    behind = ManualTime(START - timedelta(days=1))
    slow = Membrane(memory.application, clock=MonotonicClock(source=behind))
    fact = memory.create_record(semantic())
    memory.reinforce(fact.id, "fast", "r")

    slow.penalize(fact.id, 0.1, "slow", "r")

    stamps = [e.timestamp for e in log_events(memory)]
    assert strictly_increasing(stamps)
    later = memory.retrieve_by_id(fact.id, as_of=stamps[-1])
    assert [e.actor for e in later.audit_log] == ["system", "fast", "slow"]

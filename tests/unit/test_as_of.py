"""``retrieve_by_id(as_of=T)`` against a replay oracle, for random histories (hypothesis).

Given a random history of writes on a few records, with a hand-driven clock advancing by
random amounts, reading any record as of any moment T gives exactly what a fresh aggregate
built from only the events stamped at or before T shows at T, and exactly what a live read
returned at that moment.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es import Membrane, MembraneError, MemoryRecord, NotFoundError
from membrane_es.aggregates import record_key
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import FULL_TRUST, episodic, semantic, working
from tests.unit.conftest import START, ManualTime

RECORD_IDS = ("r0", "r1", "r2")
MICRO = timedelta(microseconds=1)
DAY_US = 86_400 * 10**6

ids = st.sampled_from(RECORD_IDS)
operations = st.one_of(
    st.tuples(
        st.just("create"),
        ids,
        st.sampled_from(["semantic", "working", "episodic"]),
        st.floats(0.0, 1.0),
        st.sampled_from([60, 3600, 86_400]),
        st.sampled_from([0.0, 0.1]),
    ),
    st.tuples(st.just("reinforce"), ids),
    st.tuples(st.just("penalize"), ids, st.floats(0.0, 1.0)),
    st.tuples(st.just("retract"), ids),
    st.tuples(st.just("contest"), ids, st.sampled_from(["", *RECORD_IDS])),
    st.tuples(st.just("pin"), ids),
    st.tuples(st.just("unpin"), ids),
    st.tuples(st.just("relate"), ids, ids),
    st.tuples(st.just("advance"), st.integers(0, 2 * DAY_US)),
    st.tuples(st.just("look"), ids),
)

BUILDERS = {"semantic": semantic, "working": working, "episodic": episodic}


def apply(memory: Membrane, time: ManualTime, operation: tuple[Any, ...]) -> None:
    """Run one operation; one that the engine refuses writes nothing, so it is skipped."""
    name, *args = operation
    try:
        if name == "create":
            record_id, kind, salience, half_life, floor = args
            decay = {"half_life_seconds": half_life, "min_salience": floor}
            record = BUILDERS[kind](id=record_id, salience=salience, lifecycle={"decay": decay})
            memory.create_record(record)
        elif name == "reinforce":
            memory.reinforce(args[0], "agent", "useful")
        elif name == "penalize":
            memory.penalize(args[0], args[1], "agent", "misled")
        elif name == "retract":
            memory.retract(args[0], "agent", "wrong")
        elif name == "contest":
            memory.contest(args[0], args[1], "agent", "doubt")
        elif name == "pin":
            memory.pin(args[0])
        elif name == "unpin":
            memory.unpin(args[0])
        elif name == "relate":
            memory.add_relation(args[0], "relates_to", args[1], inverse="related_from")
        elif name == "advance":
            time.advance(microseconds=args[0])
    except MembraneError:
        pass


def look(memory: Membrane, clock: MonotonicClock, record_id: str) -> tuple[datetime, Any]:
    """A live read and the moment it was taken (None when the record does not exist yet)."""
    try:
        record: MemoryRecord | None = memory.retrieve_by_id(record_id, trust=FULL_TRUST)
    except NotFoundError:
        record = None
    assert clock.last is not None
    return clock.last, record


def oracle(events: list[Any], record_id: str, moment: datetime) -> MemoryRecord | None:
    """Fold only this record's events stamped at or before ``moment``; view it then."""
    aggregate: Any = None
    key = record_key(record_id)
    for event in events:
        if event.originator_id == key and event.timestamp <= moment:
            aggregate = event.mutate(aggregate)
    return None if aggregate is None else aggregate.view(moment)


def as_of(memory: Membrane, record_id: str, moment: datetime) -> MemoryRecord | None:
    try:
        return memory.retrieve_by_id(record_id, trust=FULL_TRUST, as_of=moment)
    except NotFoundError:
        return None


def all_events(memory: Membrane) -> list[Any]:
    app = memory.application
    notifications = app.recorder.select_notifications(start=1, limit=10_000)
    return [app.mapper.to_domain_event(n) for n in notifications]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(operations, min_size=1, max_size=40), data=st.data())
def test_as_of_equals_replay_and_live_reads(
    history: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    time = ManualTime()
    clock = MonotonicClock(source=time)
    with Membrane.in_memory(clock=clock) as memory:
        looks: list[tuple[str, datetime, Any]] = []
        for operation in history:
            if operation[0] == "look":
                looks.append((operation[1], *look(memory, clock, operation[1])))
            else:
                apply(memory, time, operation)

        # Every live read is reproduced exactly by reading as of its moment.
        for record_id, moment, seen in looks:
            assert as_of(memory, record_id, moment) == seen

        # Any moment, on or between event times, matches the replay oracle.
        events = all_events(memory)
        stamps = [e.timestamp for e in events] or [START]
        end = max(stamps[-1], time.current) + timedelta(days=1)
        span_us = int((end - START) / MICRO)
        moments = data.draw(
            st.lists(
                st.one_of(
                    st.integers(-DAY_US, span_us).map(lambda us: START + us * MICRO),
                    st.tuples(st.sampled_from(stamps), st.sampled_from([-1, 0, 1])).map(
                        lambda pair: pair[0] + pair[1] * MICRO
                    ),
                ),
                min_size=1,
                max_size=8,
            ),
            label="moments",
        )
        for moment in moments:
            for record_id in RECORD_IDS:
                assert as_of(memory, record_id, moment) == oracle(events, record_id, moment)


def test_as_of_before_creation_is_not_found(memory: Membrane, time: ManualTime) -> None:
    time.advance(hours=1)
    record = memory.create_record(semantic())

    assert as_of(memory, record.id, START) is None


def test_as_of_shows_the_state_before_a_later_change(memory: Membrane, time: ManualTime) -> None:
    record = memory.create_record(semantic())
    time.advance(hours=1)
    memory.retract(record.id, "agent", "wrong")

    before = as_of(memory, record.id, START + timedelta(minutes=30))

    assert before is not None
    assert before.salience > 0
    assert [entry.action for entry in before.audit_log] == ["create"]


def test_as_of_evaluates_decay_at_that_moment(memory: Membrane, time: ManualTime) -> None:
    record = memory.create_record(
        semantic(salience=0.8, lifecycle={"decay": {"half_life_seconds": 3600}})
    )
    time.advance(days=3)

    then = as_of(memory, record.id, START + timedelta(hours=1))

    assert then is not None and abs(then.salience - 0.4) < 1e-9

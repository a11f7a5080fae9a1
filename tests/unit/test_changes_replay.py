"""The change feed against the store, for random histories (hypothesis).

Each change's fields are the inspector's diff between the record before and after it.
Folding the feed from position 0 — keeping, per record, the record its last change carried
— gives at every position N exactly what ``retrieve_by_id(as_of_position=N)`` gives (decay
aside: a change carries salience at its own time, the read at N's); a reader with a lower
ceiling or other scopes receives a whole change only of a record it may ``get``, and a
redacted one only of a record one level above its ceiling; an erased secret is in no
change; and a page walk resumed at each ``next_after`` is the feed itself.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es import (
    AccessDeniedError,
    Change,
    Membrane,
    MembraneError,
    MemoryRecord,
    NotFoundError,
    TrustContext,
)
from membrane_es.engine import field_diff
from tests.unit.builders import FULL_TRUST, episodic, semantic

SECRET = "secret-7c41"
SLOTS = (0, 1, 2, 3)

slots = st.sampled_from(SLOTS)
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("create"),
            st.sampled_from(["low", "medium", "high"]),
            st.sampled_from(["", "team-a", "team-b"]),
            st.booleans(),
        ),
        st.tuples(st.just("reinforce"), slots),
        st.tuples(st.just("pin"), slots),
        st.tuples(st.just("supersede"), slots),
        st.tuples(st.just("relate"), slots, slots),
        st.tuples(st.just("forget"), slots),
        st.tuples(st.just("batch"), st.integers(1, 3)),
    ),
    min_size=1,
    max_size=12,
)
READERS = [
    TrustContext(max_sensitivity="low"),
    TrustContext(max_sensitivity="medium", scopes=["team-a"]),
    TrustContext(max_sensitivity="high", scopes=["team-b"]),
]


def run(memory: Membrane, ids: list[str], operation: tuple[Any, ...]) -> None:
    name, *args = operation
    try:
        if name == "create":
            sensitivity, scope, secret = args
            obj = SECRET if secret else f"fact {len(ids)}"
            ids.append(
                memory.create_record(
                    semantic(obj=obj, sensitivity=sensitivity, scope=scope, evidence=True)
                ).id
            )
        elif name == "batch":
            with memory.batch():
                for n in range(args[0]):
                    ids.append(memory.create_record(episodic(summary=f"step {n}")).id)
        elif not ids:
            return
        elif name == "reinforce":
            memory.reinforce(ids[args[0] % len(ids)], actor="a", rationale="used")
        elif name == "pin":
            memory.pin(ids[args[0] % len(ids)], actor="a", rationale="keep")
        elif name == "supersede":
            old = ids[args[0] % len(ids)]
            ids.append(
                memory.supersede(
                    old, semantic(obj="newer", evidence=True), actor="a", rationale="newer"
                ).id
            )
        elif name == "relate":
            source, target = ids[args[0] % len(ids)], ids[args[1] % len(ids)]
            memory.add_relation(source, "supports", target, actor="a", rationale="r")
        elif name == "forget":
            memory.forget(ids[args[0] % len(ids)], actor="dpo", rationale="request")
    except MembraneError:
        pass  # refused (an episodic record revised, a forgotten one touched): nothing written


def without_salience(record: MemoryRecord) -> MemoryRecord:
    return msgspec.structs.replace(record, salience=0.0)


def get(memory: Membrane, record_id: str, trust: TrustContext, position: int) -> Any:
    try:
        return memory.retrieve_by_id(record_id, trust=trust, as_of_position=position)
    except (NotFoundError, AccessDeniedError) as refused:
        return type(refused)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_folding_the_feed_is_reading_as_of_each_position(history: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        memory = Membrane.open(Path(directory) / "store")
        try:
            ids: list[str] = []
            for operation in history:
                run(memory, ids, operation)
            changes = list(memory.changes(trust=FULL_TRUST))
            head = memory.event_count()
            assert [c.position for c in changes] == list(range(1, head + 1))
            folded: dict[str, MemoryRecord] = {}
            every = sorted(set(ids))
            for position in range(head + 1):
                if position:
                    change = changes[position - 1]
                    previous = folded.get(change.record_id)
                    # the inspector's diff between the two versions, exactly
                    expected = field_diff.changes(
                        {} if previous is None else field_diff.record_fields(previous),
                        field_diff.record_fields(change.record),
                    )
                    assert [(f.path, f.kind, f.before, f.after) for f in change.fields] == [
                        (c.path, c.kind, c.before, c.after) for c in expected
                    ]
                    folded[change.record_id] = change.record
                for record_id in every:
                    read = get(memory, record_id, FULL_TRUST, position)
                    if record_id not in folded:
                        assert read is NotFoundError
                    else:
                        assert without_salience(read) == without_salience(folded[record_id])
            forgotten = {c.record_id for c in changes if c.operation == "forgotten"}
            assert not any(
                SECRET in msgspec.json.encode(c).decode()
                for c in changes
                if c.record_id in forgotten
            )
            for reader in READERS:
                check_reader(memory, reader, head)
            walked: list[Change] = []
            after = 0
            while after < head:
                page = memory.changes_page(after=after, limit=3, trust=FULL_TRUST)
                walked.extend(page.changes)
                assert page.next_after > after
                after = page.next_after
            assert walked == changes
        finally:
            memory.close()


def check_reader(memory: Membrane, reader: TrustContext, head: int) -> None:
    for change in memory.changes(trust=reader):
        read = get(memory, change.record_id, reader, change.position)
        if change.redacted:
            assert read is AccessDeniedError
            listed = memory.retrieve(
                trust=reader, as_of_position=change.position, limit=0, include_retracted=True
            )
            assert change.record_id in {r.id for r in listed.records}
        else:
            assert isinstance(read, MemoryRecord)

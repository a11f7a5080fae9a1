"""Export and import of the event log: a random history, exported and imported into an empty
store, gives the same verify() and the same answers at every moment; a file changed in any
way is refused, naming its first bad line, with nothing written."""

from __future__ import annotations

import io
import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.persistence import StoredEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es import Membrane, TrustContext
from membrane_es.clock import MonotonicClock
from membrane_es.errors import MembraneError
from membrane_es.schema import Sensitivity
from membrane_es.stores.event_times import EventTimeBehind
from membrane_es.stores.log_stamp import LogStamp
from membrane_es.stores.transfer import TransferError

OWNER = TrustContext(max_sensitivity=Sensitivity.HYPER)
START = datetime(2025, 1, 1, tzinfo=UTC)


class Hand:
    """A wall clock moved by the test."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def fact(obj: str) -> dict[str, Any]:
    return {
        "type": "semantic",
        "scope": "project:orchid",
        "payload": {"kind": "semantic", "subject": "Orchid", "predicate": "runs", "object": obj},
        "provenance": {"sources": [{"kind": "observation", "ref": "notes"}]},
    }


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "create",
                "capture",
                "supersede",
                "fork",
                "reinforce",
                "penalize",
                "retract",
                "contest",
                "forget",
            ]
        ),
        st.integers(min_value=0, max_value=50),  # which earlier record it touches
        st.integers(min_value=1, max_value=72),  # hours since the previous write
    ),
    min_size=1,
    max_size=14,
)


def play(memory: Membrane, hand: Hand, operations: list[tuple[str, int, int]]) -> None:
    """Apply a random history; operations a record refuses (retracted, replaced…) are
    skipped, as a caller would see them fail."""
    ids: list[str] = []
    for step, (operation, pick, hours) in enumerate(operations):
        hand.now += timedelta(hours=hours)
        target = ids[pick % len(ids)] if ids else None
        try:
            if operation == "create" or target is None:
                ids.append(memory.create_record(fact(f"v{step}")).id)
            elif operation == "capture":
                captured = memory.capture_memory(
                    {"text": f"Orchid note {step}", "project": "Orchid"}, source_kind="event"
                )
                ids.append(captured.primary_record.id)
            elif operation == "supersede":
                ids.append(memory.supersede(target, fact(f"s{step}"), "agent", "moved").id)
            elif operation == "fork":
                ids.append(memory.fork(target, fact(f"f{step}"), "agent", "variant").id)
            elif operation == "reinforce":
                memory.reinforce(target, "agent", "helped")
            elif operation == "penalize":
                memory.penalize(target, 0.1 * (pick % 5), "agent", "misled")
            elif operation == "retract":
                memory.retract(target, "agent", "wrong")
            elif operation == "forget":
                memory.forget(target, "agent", "asked to")
            else:
                memory.contest(target, ids[(pick + 1) % len(ids)], "agent", "disagrees")
        except MembraneError:
            continue


def answers(memory: Membrane, moments: list[datetime]) -> list[Any]:
    """Everything a reader can ask, at each moment."""
    seen: list[Any] = []
    for moment in moments:
        result = memory.retrieve("Orchid runs", trust=OWNER, as_of=moment, include_retracted=True)
        seen.append(result)
        for record in result.records:
            seen.append(memory.retrieve_by_id(record.id, trust=OWNER, as_of=moment))
            seen.append(memory.history(record.id, trust=OWNER))
        seen.append(memory.get_metrics(as_of=moment))
        seen.append(memory.retrieve_graph("Orchid", trust=OWNER, as_of=moment))
    return seen


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(operations=OPERATIONS)
def test_import_gives_the_same_answers_at_every_moment(
    operations: list[tuple[str, int, int]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        hand = Hand()
        with Membrane.open(root / "a", clock=MonotonicClock(hand), sync=False) as original:
            play(original, hand, operations)
            exported = root / "log.jsonl"
            with exported.open("wb") as out:
                count = original.export_log(out)
            end = hand.now + timedelta(days=3)
            moments = _every_state(exported) + [end]
            expected = answers(original, moments)
            chain = original.verify()

        with Membrane.open(root / "b", clock=MonotonicClock(lambda: end), sync=False) as copy:
            progress: list[tuple[int, int]] = []
            assert copy.import_log(exported, lambda done, total: progress.append((done, total)))
            assert progress[-1] == (count, count)
            assert str(copy.verify()) == str(chain) and copy.verify().ok
            assert answers(copy, moments) == expected
            # the copy exports the same file
            again = io.BytesIO()
            copy.export_log(again)
            assert again.getvalue() == exported.read_bytes()


def _every_state(exported: Path) -> list[datetime]:
    """A moment in each state the store passed through: each event's time (the state it
    made) and the microsecond before it (the state it replaced)."""
    times = {
        datetime.fromisoformat(json.loads(line)["time"])
        for line in exported.read_text().splitlines()
        if json.loads(line)["kind"] == "event"
    }
    return sorted(times | {moment - timedelta(microseconds=1) for moment in times})


@pytest.fixture
def exported(tmp_path: Path) -> list[bytes]:
    with Membrane.open(tmp_path / "a") as memory:
        first = memory.create_record(fact("staging"))
        moved = memory.supersede(first.id, fact("production"), "agent", "moved")
        memory.reinforce(moved.id, "agent", "helped")
        out = io.BytesIO()
        memory.export_log(out)
    return out.getvalue().splitlines(keepends=True)


def _refused(tmp_path: Path, lines: list[bytes]) -> str:
    path = tmp_path / "changed.jsonl"
    path.write_bytes(b"".join(lines))
    with Membrane.open(tmp_path / "target") as memory:
        with pytest.raises(TransferError) as refused:
            memory.import_log(path)
        assert memory.application.recorder.max_notification_id() is None  # nothing written
    return str(refused.value)


def test_a_changed_line_is_refused_by_number(tmp_path: Path, exported: list[bytes]) -> None:
    changed = list(exported)
    assert json.loads(changed[1])["kind"] == "key"  # the record's content key, then its event
    line = json.loads(changed[2])
    line["originator_version"] += 1
    changed[2] = json.dumps(line).encode() + b"\n"
    assert _refused(tmp_path, changed).startswith("line 3: hash does not match")


def test_removed_reordered_or_cut_lines_are_refused(tmp_path: Path, exported: list[bytes]) -> None:
    header, *events, end = exported
    assert len(events) >= 3
    assert _refused(tmp_path, [header, *events[1:], end]).startswith("line 2:")
    assert _refused(tmp_path, [header, events[1], events[0], *events[2:], end]).startswith(
        "line 2:"
    )
    assert "cut short" in _refused(tmp_path, [header, *events])
    assert _refused(tmp_path, [*exported, exported[1]]).startswith(f"line {len(exported) + 1}:")
    assert _refused(tmp_path, [b"{}\n", *events, end]).startswith("line 1:")
    assert _refused(tmp_path, [header, b"not json\n", *events, end]).startswith("line 2:")
    assert _refused(tmp_path, []).startswith("line 1:")


def test_import_needs_an_empty_store(tmp_path: Path, exported: list[bytes]) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(exported))
    with Membrane.open(tmp_path / "full") as memory:
        memory.create_record(fact("x"))
        with pytest.raises(TransferError, match="empty store; this one holds 1 events"):
            memory.import_log(path)


def test_an_import_gives_the_log_its_newest_time(tmp_path: Path, exported: list[bytes]) -> None:
    """Another process sharing the store checks its next write against the imported events'
    times, as against any other write's (the store, not this engine's clock, holds them)."""
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(exported))
    newest = max(
        datetime.fromisoformat(json.loads(line)["time"])
        for line in exported
        if json.loads(line)["kind"] == "event"
    )
    with Membrane.open(tmp_path / "copy") as memory:
        memory.import_log(path)
        late = StoredEvent(uuid4(), 1, "timed", b"state")
        with pytest.raises(EventTimeBehind) as behind:
            memory.application.recorder.insert_events(
                [late], log_stamp=LogStamp(event_times=(newest, newest))
            )
        assert behind.value.log_time == newest

"""Export and import of the event log: a random history, exported and imported into an empty
store, gives the same verify() and the same answers at every moment; a file changed in any
way is refused, naming its first bad line, with nothing written; an import stopped part way
(its writes failing, or its process killed) leaves a store that refuses to open and that
``verify`` reports, until the import is run again into it, which starts over."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
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
from membrane_es.cli import main
from membrane_es.errors import IntegrityError, MembraneError, StoreClosedError, ValidationError
from membrane_es.schema import Sensitivity
from membrane_es.stores import transfer
from membrane_es.stores.event_times import EventTimeBehind
from membrane_es.stores.log_stamp import LogStamp
from membrane_es.stores.transfer import TransferError
from membrane_es.timekeeping.clock import MonotonicClock

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


# An import stopped part way -------------------------------------------------------------------

BATCH = 2  # events per write on import in these tests: the file below takes four writes


@pytest.fixture
def long_file(tmp_path: Path) -> Path:
    """An export of eight events and six content keys."""
    with Membrane.open(tmp_path / "source", embedder=None, sync=False) as memory:
        first = memory.create_record(fact("staging"))
        moved = memory.supersede(first.id, fact("production"), "agent", "moved")
        memory.reinforce(moved.id, "agent", "helped")
        for n in range(4):
            memory.create_record(fact(f"node {n}"))
        path = tmp_path / "log.jsonl"
        with path.open("wb") as out:
            assert memory.export_log(out) == 8
    return path


def _stop_import(
    store: Path, file: Path, writes: int, monkeypatch: pytest.MonkeyPatch, **open_options: Any
) -> None:
    """Import ``file`` into a new store at ``store``, its recorder failing after ``writes``
    writes of events (0: after the first batch's keys, before any event): an import stopped
    part way, as a killed process or a full disk leaves it."""
    monkeypatch.setattr(transfer, "IMPORT_BATCH", BATCH)
    memory = Membrane.open(store, embedder=None, **open_options)
    recorder = memory.application.recorder
    insert = recorder.insert_events
    done = 0

    def failing(events: Any, **kwargs: Any) -> Any:
        nonlocal done
        if done == writes:
            raise OSError("the disk went away")
        done += 1
        return insert(events, **kwargs)

    monkeypatch.setattr(recorder, "insert_events", failing)
    with pytest.raises(OSError, match="went away"):
        memory.import_log(file)
    with pytest.raises(StoreClosedError):  # it let go of the part it wrote
        memory.get_metrics()


def _keys_held(store: Path) -> int:
    with contextlib.closing(sqlite3.connect(store / "keys.sqlite")) as keys:
        (count,) = keys.execute("SELECT count(*) FROM data_keys").fetchone()
    return int(count)


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _assert_refused_until_imported_again(store: Path) -> None:
    """What a store an import did not finish answers: open (read-only too) and ``verify``
    refuse it, naming the way out."""
    for read_only in (False, True):
        with pytest.raises(IntegrityError, match="did not finish") as refused:
            Membrane.open(store, embedder=None, read_only=read_only)
        assert "Run the import again into it" in str(refused.value)
    report = Membrane.verify_store(store)
    assert not report.ok and report.fault == "import" and "did not finish" in report.detail
    code, printed, _ = _cli("verify", str(store))
    assert code == 2 and printed.startswith("import: ")
    code, _, error = _cli("list", str(store))
    assert code == 1 and error.startswith("error: an import into this store did not finish")


def _assert_whole(store: Path, file: Path, tmp_path: Path) -> None:
    """The store holds what an import never stopped gives: the same file out, and the same
    answers at every moment."""
    moments = _every_state(file)
    with Membrane.open(tmp_path / "uninterrupted", embedder=None) as memory:
        memory.import_log(file)
        expected = answers(memory, moments)
    with Membrane.open(store, embedder=None) as memory:
        assert memory.verify().ok
        out = io.BytesIO()
        memory.export_log(out)
        assert answers(memory, moments) == expected
    assert out.getvalue() == file.read_bytes()
    assert Membrane.verify_store(store).ok


@pytest.mark.parametrize("writes", [0, 2], ids=["after-its-keys", "after-two-writes"])
def test_an_import_stopped_part_way_is_refused_then_run_again_by_the_cli(
    tmp_path: Path,
    long_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    writes: int,
) -> None:
    store = tmp_path / "target"
    _stop_import(store, long_file, writes, monkeypatch)
    assert _keys_held(store) >= 1  # the first batch's keys were written before its events
    _assert_refused_until_imported_again(store)

    code, _, said = _cli("import", str(store), str(long_file))
    assert code == 0 and "imported 8 events" in said, said
    assert f"did not finish: the {writes * BATCH} events it wrote" in caplog.text
    _assert_whole(store, long_file, tmp_path)
    assert _keys_held(store) == 6  # the file's, once each: none left from the first run


def test_an_import_stopped_part_way_is_run_again_through_the_library(
    tmp_path: Path, long_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "target"
    _stop_import(store, long_file, 1, monkeypatch)
    with pytest.raises(ValidationError) as refused:  # emptying is a write
        Membrane.connect(store, embedder=None, read_only=True, discard_unfinished_import=True)
    assert refused.value.field == "discard_unfinished_import"
    _assert_refused_until_imported_again(store)  # nothing was emptied by that
    with Membrane.connect(store, embedder=None, discard_unfinished_import=True) as memory:
        assert memory.application.recorder.max_notification_id() is None  # emptied
        assert memory.import_log(long_file) == 8
    _assert_whole(store, long_file, tmp_path)


def test_a_whole_store_opened_to_discard_an_unfinished_import_is_left_as_it_is(
    tmp_path: Path, long_file: Path
) -> None:
    with Membrane.open(tmp_path / "whole", embedder=None) as memory:
        memory.import_log(long_file)
    with Membrane.connect(tmp_path / "whole", embedder=None, discard_unfinished_import=True) as m:
        assert m.application.recorder.max_notification_id() == 8
        with pytest.raises(TransferError, match="needs an empty store"):
            m.import_log(long_file)
    code, _, said = _cli("import", str(tmp_path / "whole"), str(long_file))
    assert code == 1 and "needs an empty store; this one holds 8 events" in said


KILLED_IMPORT = """
import os, signal, sys
from membrane_es import Membrane
from membrane_es.stores import transfer

transfer.IMPORT_BATCH = {batch}

def progress(done, total):
    if done == {batch}:  # the first batch is written: the process dies at once
        os.kill(os.getpid(), signal.SIGKILL)

with Membrane.open(sys.argv[1], embedder=None) as memory:
    memory.import_log(sys.argv[2], progress)
"""


def test_an_import_killed_part_way_is_refused_then_run_again(
    tmp_path: Path, long_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "target"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IMPORT.format(batch=BATCH), str(store), str(long_file)],
        env={**os.environ, "MEMBRANE_EMBEDDER": "none"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr
    _assert_refused_until_imported_again(store)
    code, _, said = _cli("import", str(store), str(long_file))
    assert code == 0, said
    assert f"the {BATCH} events it wrote" in caplog.text  # the first batch, and no more
    _assert_whole(store, long_file, tmp_path)


@pytest.mark.postgres
def test_an_import_stopped_part_way_on_postgres(
    postgres_dsn: str, tmp_path: Path, long_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer, "IMPORT_BATCH", BATCH)
    memory = Membrane.open_postgres(postgres_dsn, embedder=None, follow=False)
    recorder = memory.application.recorder
    insert = recorder.insert_events
    written: list[int] = []

    def failing(events: Any, **kwargs: Any) -> Any:
        if written:
            raise OSError("the server went away")
        written.append(len(events))
        return insert(events, **kwargs)

    monkeypatch.setattr(recorder, "insert_events", failing)
    with pytest.raises(OSError, match="went away"):
        memory.import_log(long_file)
    with pytest.raises(IntegrityError, match="did not finish"):
        Membrane.open_postgres(postgres_dsn, embedder=None, follow=False)
    report = Membrane.verify_store(_url(postgres_dsn))
    assert not report.ok and report.fault == "import"

    with Membrane.connect(
        _url(postgres_dsn), embedder=None, follow=False, discard_unfinished_import=True
    ) as memory:
        assert memory.application.recorder.max_notification_id() is None
        assert memory.import_log(long_file) == 8
        out = io.BytesIO()
        memory.export_log(out)  # ids from 1 again, as in the file
    assert out.getvalue() == long_file.read_bytes()
    assert Membrane.verify_store(_url(postgres_dsn)).ok


def _url(dsn: str) -> str:
    from tests.integration.test_cli_postgres import url_of

    return url_of(dsn)

"""Concurrent revisions (DESIGN §3): no event is ever lost.

Writers on one engine are serialised; a writer that loses an optimistic-concurrency race
(another engine, or another process, saved first) is retried from a fresh load and, if it
keeps losing, reports :class:`ConflictError`. Readers never see a half-applied record.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError as ConcurrentWrite

from membrane_es import ConflictError, Membrane, MembraneError
from membrane_es.engine import CONFLICT_ATTEMPTS
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import FULL_TRUST, read, semantic

OPS_PER_THREAD = 150


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Let the interpreter switch threads very often, so races show up quickly."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def run_together(*jobs: Callable[[], None]) -> list[BaseException]:
    """Run each job on its own thread, started together; return what they raised."""
    start = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job: Callable[[], None]) -> None:
        start.wait()
        try:
            job()
        except BaseException as exc:  # reported to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    return errors


def version_of(memory: Membrane, record_id: str) -> int:
    return memory.history(record_id, trust=FULL_TRUST)[-1].version


# --- one engine, two writers --------------------------------------------------------------------


def test_two_threads_revising_one_record_lose_no_event(
    memory: Membrane, busy_switching: None
) -> None:
    record = memory.create_record(semantic())

    def reinforce() -> None:
        for i in range(OPS_PER_THREAD):
            memory.reinforce(record.id, "booster", f"r{i}")

    def penalize() -> None:
        for i in range(OPS_PER_THREAD):
            memory.penalize(record.id, 0.01, "critic", f"p{i}")

    assert run_together(reinforce, penalize) == []

    assert version_of(memory, record.id) == 1 + 2 * OPS_PER_THREAD
    trail = [(e.actor, e.rationale) for e in memory.history(record.id, trust=FULL_TRUST)]
    assert [r for a, r in trail if a == "booster"] == [f"r{i}" for i in range(OPS_PER_THREAD)]
    assert [r for a, r in trail if a == "critic"] == [
        f"penalty: p{i}" for i in range(OPS_PER_THREAD)
    ]


def test_readers_during_writes_see_whole_versions(memory: Membrane, busy_switching: None) -> None:
    record = memory.create_record(semantic())
    done = threading.Event()

    def write() -> None:
        try:
            for i in range(OPS_PER_THREAD):
                memory.reinforce(record.id, "writer", str(i))
        finally:
            done.set()

    def read_while_writing() -> None:
        seen: list[int] = []
        while not done.is_set():
            rationales = [entry.rationale for entry in read(memory, record.id).audit_log[1:]]
            assert rationales == [str(i) for i in range(len(rationales))]
            seen.append(len(rationales))
        assert seen == sorted(seen)  # never an older version after a newer one

    assert run_together(write, read_while_writing, read_while_writing) == []

    assert len(read(memory, record.id).audit_log) == 1 + OPS_PER_THREAD


# --- two engines over one log -------------------------------------------------------------------


def test_two_engines_racing_on_one_record_lose_no_event(
    memory: Membrane, clock: MonotonicClock, busy_switching: None
) -> None:
    rival = Membrane(memory.application, clock=clock)
    record = memory.create_record(semantic())
    done: dict[str, int] = {"mine": 0, "theirs": 0}

    def write(engine: Membrane, name: str) -> Callable[[], None]:
        def job() -> None:
            for i in range(OPS_PER_THREAD):
                try:
                    engine.reinforce(record.id, name, str(i))
                except ConflictError:
                    continue  # reported, not lost: nothing of it was written
                done[name] += 1

        return job

    assert run_together(write(memory, "mine"), write(rival, "theirs")) == []

    history = memory.history(record.id, trust=FULL_TRUST)
    assert history[-1].version == 1 + done["mine"] + done["theirs"]
    assert sum(e.actor == "mine" for e in history) == done["mine"]
    assert sum(e.actor == "theirs" for e in history) == done["theirs"]


def test_a_command_that_loses_a_race_is_retried(
    memory: Membrane, clock: MonotonicClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    rival = Membrane(memory.application, clock=clock)
    record = memory.create_record(semantic())
    app = memory.application
    load = app.load
    loads: list[str] = []

    def load_then_let_the_rival_win(record_id: str) -> Any:
        loaded = load(record_id)
        loads.append(record_id)
        if len(loads) == 1:
            rival.reinforce(record_id, "rival", "got there first")
        return loaded

    monkeypatch.setattr(app, "load", load_then_let_the_rival_win)

    memory.penalize(record.id, 0.2, "me", "after a retry")

    monkeypatch.undo()
    events = [(e.event, e.actor) for e in memory.history(record.id, trust=FULL_TRUST)]
    assert events == [("Created", "system"), ("Reinforced", "rival"), ("Penalized", "me")]
    assert loads.count(record.id) >= 2


def test_a_command_that_keeps_losing_raises_conflict(
    memory: Membrane, clock: MonotonicClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    rival = Membrane(memory.application, clock=clock)
    record = memory.create_record(semantic())
    app = memory.application
    load = app.load
    inside_rival = threading.local()

    def load_then_let_the_rival_win(record_id: str) -> Any:
        loaded = load(record_id)
        if not getattr(inside_rival, "active", False):
            inside_rival.active = True
            try:
                rival.reinforce(record_id, "rival", "again first")
            finally:
                inside_rival.active = False
        return loaded

    monkeypatch.setattr(app, "load", load_then_let_the_rival_win)

    with pytest.raises(ConflictError):
        memory.penalize(record.id, 0.2, "me", "never lands")

    monkeypatch.undo()
    events = [e.actor for e in memory.history(record.id, trust=FULL_TRUST)]
    assert events == ["system"] + ["rival"] * CONFLICT_ATTEMPTS
    assert issubclass(ConflictError, MembraneError)


def test_saving_a_stale_aggregate_is_refused(memory: Membrane) -> None:
    record = memory.create_record(semantic())
    app = memory.application
    stale = app.load(record.id)
    memory.reinforce(record.id, "fresh", "first")

    stale.penalize(0.5, actor="stale", rationale="late", at=stale.modified_on)
    with pytest.raises(ConcurrentWrite):
        app.save(stale)

    assert [e.actor for e in memory.history(record.id, trust=FULL_TRUST)] == ["system", "fresh"]


def test_readers_catch_up_with_another_writer_without_clashing(
    memory: Membrane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two readers catch up the same cached record after another process wrote to the log."""
    record = memory.create_record(semantic())
    app = memory.application
    read(memory, record.id)  # cached at version 1
    elsewhere = app.load(record.id)
    elsewhere.reinforce(actor="other process", rationale="r", at=elsewhere.modified_on)
    app.recorder.insert_events([app.mapper.to_stored_event(e) for e in elsewhere.collect_events()])
    get_events = app.events.get
    nested: list[int] = []
    other_reader_waiting = [True]

    def get_then_let_another_reader_in(*args: Any, **kwargs: Any) -> Any:
        events = list(get_events(*args, **kwargs))
        if other_reader_waiting:
            other_reader_waiting.clear()
            nested.append(len(read(memory, record.id).audit_log))
        return iter(events)

    monkeypatch.setattr(app.events, "get", get_then_let_another_reader_in)

    first = read(memory, record.id)

    assert [e.actor for e in first.audit_log] == ["system", "other process"]
    assert nested == [2]


def test_a_batch_that_loses_a_race_raises_conflict_and_writes_nothing(
    memory: Membrane, clock: MonotonicClock
) -> None:
    rival = Membrane(memory.application, clock=clock)
    record = memory.create_record(semantic())
    before = memory.application.recorder.max_notification_id()

    with pytest.raises(ConflictError), memory.batch():
        memory.penalize(record.id, 0.2, "me", "inside the batch")
        memory.create_record(semantic())
        rival.reinforce(record.id, "rival", "lands first")

    after = memory.application.recorder.max_notification_id()
    assert after == (before or 0) + 1  # only the rival's reinforce
    events = [e.event for e in memory.history(record.id, trust=FULL_TRUST)]
    assert events == ["Created", "Reinforced"]


def test_cached_loads_skip_the_store_until_another_writer_appends(
    memory: Membrane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache is known current up to a log position: while the log's head is there, a
    load asks the store nothing; a write from elsewhere evicts just what it touched."""
    kept = memory.create_record(semantic())
    touched = memory.create_record(semantic())
    memory.reinforce(kept.id, "me", "own writes keep the cache current")
    app = memory.application
    get_events = app.events.get
    asked: list[Any] = []

    def counting_get(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("originator_id", args[0] if args else None))
        return get_events(*args, **kwargs)

    monkeypatch.setattr(app.events, "get", counting_get)
    assert app.load(kept.id).version == 2 and app.load(touched.id).version == 1
    assert asked == []

    elsewhere = app.load(touched.id)
    elsewhere.reinforce(actor="other process", rationale="r", at=elsewhere.modified_on)
    app.recorder.insert_events([app.mapper.to_stored_event(e) for e in elsewhere.collect_events()])

    assert app.load(touched.id).version == 2
    assert app.load(kept.id).version == 2
    assert asked == [elsewhere.id]  # only the record written elsewhere was read again


def test_a_load_that_raced_a_foreign_write_is_not_cached(
    memory: Membrane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load from the store that began before another writer's event, and finished after a
    refresh evicted that record, must not leave its older version in the cache."""
    record = memory.create_record(semantic())
    app = memory.application
    app.cache.clear()
    get_aggregate = app.repository.get

    def get_then_another_process_writes(*args: Any, **kwargs: Any) -> Any:
        loaded = get_aggregate(*args, **kwargs)
        monkeypatch.setattr(app.repository, "get", get_aggregate)
        elsewhere = loaded.copy()
        elsewhere.reinforce(actor="other process", rationale="r", at=elsewhere.modified_on)
        stored = [app.mapper.to_stored_event(e) for e in elsewhere.collect_events()]
        app.recorder.insert_events(stored)
        app._keep_cache_coherent()  # another reader notices the write first
        return loaded

    monkeypatch.setattr(app.repository, "get", get_then_another_process_writes)
    assert app.load(record.id).version == 1  # read while the other write landed

    assert app.load(record.id).version == 2  # and not stuck there afterwards

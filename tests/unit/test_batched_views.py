"""Events reach the views in batches of any size (one write of the engine, a page of the log, a
whole rebuild), and every way of cutting the log into batches gives exactly the views of applying
each event in turn: over histories with every event type, across page boundaries, with timeline
checkpoints falling inside a page, and for every "as of" answer."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections import read_model
from membrane_es.projections.read_model import ReadModel
from membrane_es.projections.timecodes import micros
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import competence, entity, episodic, plan_graph, semantic
from tests.unit.conftest import ManualTime
from tests.views_support import assert_same_views, random_history


@pytest.fixture
def embedded(clock: MonotonicClock) -> Membrane:
    return Membrane.in_memory(clock=clock, embedder=HashingEmbedder(64))


def entry(action: str) -> dict[str, Any]:
    return {"action": action, "actor": "client", "timestamp": "2024-12-31T00:00:00Z"}


def every_event(memory: Membrane, rng: random.Random, ids: list[str]) -> None:
    """What random_history does not make: figures, imported audit entries, entities, forks,
    merges, outcomes, contests without a reference, pins of fresh and revised records."""
    performance = {"kind": "competence", "skill_name": "deploy"}
    performance["performance"] = {"success_rate": rng.random()}  # type: ignore[assignment]
    ids.append(memory.create_record(competence(payload=performance)).id)
    plan = {"kind": "plan_graph", "plan_id": "p", "intent": "release"}
    plan["metrics"] = {"execution_count": rng.randint(0, 9)}  # type: ignore[assignment]
    ids.append(memory.create_record(plan_graph(payload=plan)).id)
    imported = [entry(rng.choice(["reinforce", "merge", "decay", "create", "revise"]))]
    ids.append(memory.create_record(semantic("imported", audit_log=imported)).id)
    ids.append(memory.create_record(entity(f"Orchid {rng.randint(0, 3)}")).id)
    episode = memory.create_record(episodic(f"deployed {rng.choice(['a', 'b'])}")).id
    memory.record_outcome(episode, rng.choice(["success", "failure", "partial"]))
    ids.append(episode)
    fresh = memory.create_record(semantic("fresh", evidence=True)).id
    memory.reinforce(fresh, "t", "useful")
    memory.pin(fresh)
    memory.unpin(fresh)
    memory.pin(fresh)
    ids.append(fresh)
    facts = [
        i
        for i in ids
        if not memory.application.load(i).state.retracted
        and memory.application.load(i).memory_type.value == "semantic"
    ]
    if len(facts) >= 3:
        ids.append(
            memory.fork(facts[0], semantic("variant", evidence=True), "t", "branch", widen=True).id
        )
        ids.append(
            memory.merge(facts[1:3], semantic("merged", evidence=True), "t", "same", widen=True).id
        )
        memory.contest(facts[0], "", "t", "doubt")


def history(memory: Membrane, time: ManualTime, seed: int, rounds: int = 4) -> list[datetime]:
    """Rounds of random and every-type events, hours apart; returns a moment in each."""
    rng = random.Random(seed)
    ids: list[str] = []
    moments: list[datetime] = []
    for _ in range(rounds):
        ids += random_history(memory, rng, 12)
        every_event(memory, rng, ids)
        moments.append(time.current + timedelta(seconds=1))
        time.advance(minutes=rng.randint(1, 900))
    return moments


@pytest.mark.parametrize("text_worker", [True, False])
@pytest.mark.parametrize("page", [1, 7, 64, 500])
@pytest.mark.parametrize("seed", range(3))
def test_batched_rebuild_equals_the_live_views(
    embedded: Membrane,
    time: ManualTime,
    seed: int,
    page: int,
    text_worker: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history(embedded, time, seed)
    monkeypatch.setattr(read_model, "CATCH_UP_BATCH", page)
    monkeypatch.setattr(read_model, "TEXT_WORKER_MIN_BACKLOG", 0 if text_worker else 10**9)
    assert_same_views(embedded.views, ReadModel.rebuild(embedded.application))


@pytest.mark.parametrize("interval", [3, 5, 11])
def test_checkpoints_inside_a_page_equal_the_live_ones(
    embedded: Membrane, time: ManualTime, interval: int
) -> None:
    live = embedded.views.table.timeline
    live.min_interval = live.interval = interval
    moments = history(embedded, time, seed=interval)
    batched = ReadModel()
    batched.table.timeline.min_interval = batched.table.timeline.interval = interval
    batched.catch_up(embedded.application)
    assert len(batched.table.timeline.checkpoints) > 3
    assert_same_views(embedded.views, batched)
    for moment in moments:
        at = micros(moment)
        ours, theirs = embedded.views.table.state_at(at), batched.table.state_at(at)
        assert ours.size == theirs.size
        for name in ours.columns:
            np.testing.assert_array_equal(ours.columns[name], theirs.columns[name])


@pytest.mark.parametrize("seed", range(3))
def test_as_of_answers_equal_the_live_ones(embedded: Membrane, time: ManualTime, seed: int) -> None:
    moments = history(embedded, time, seed)
    rebuilt = ReadModel.rebuild(embedded.application)
    live = embedded.views
    for moment in [*moments, time.current]:
        at = micros(moment)
        for views in (live, rebuilt):
            views.table.state_at(at)
        a, b = live.table.state_at(at), rebuilt.table.state_at(at)
        rows = np.arange(a.size)
        np.testing.assert_array_equal(
            live.table.salience(rows, at, a), rebuilt.table.salience(rows, at, b)
        )
        assert live.metrics.snapshot(live.table, at, a, live=False) == rebuilt.metrics.snapshot(
            rebuilt.table, at, b, live=False
        )
    now = micros(time.current)
    assert live.metrics.snapshot(
        live.table, now, live.table.state_now(), live=True
    ) == rebuilt.metrics.snapshot(rebuilt.table, now, rebuilt.table.state_now(), live=True)


@pytest.mark.parametrize("seed", range(3))
def test_batches_of_any_size_equal_events_one_at_a_time(
    embedded: Membrane, time: ManualTime, seed: int
) -> None:
    history(embedded, time, seed, rounds=3)
    app = embedded.application
    notifications = app.recorder.select_notifications(start=1, limit=10_000)
    events = [app.mapper.to_domain_event(n) for n in notifications]
    one_by_one, batched = ReadModel(), ReadModel()
    for event, notification in zip(events, notifications, strict=True):
        one_by_one.apply_many([event], notification.id)
    rng = random.Random(seed)
    first = 0
    while first < len(events):
        last = min(len(events), first + rng.randint(1, 40))
        batched.apply_many(events[first:last], notifications[last - 1].id)
        first = last
    assert_same_views(one_by_one, batched)


def test_vectors_of_another_size_are_skipped_alike(memory: Membrane) -> None:
    for i in range(12):
        size = 4 if i % 3 else 3  # the first vector (3 dimensions) sets the index's size
        vector = [float(i + 1)] + [0.5] * (size - 1)
        memory.create_record(semantic(f"s{i}", scope=["", "a", "b"][i % 3]), embedding=vector)
    rebuilt = ReadModel.rebuild(memory.application)
    assert rebuilt.embeddings.skipped == memory.views.embeddings.skipped == 8
    assert_same_views(memory.views, rebuilt)


def test_a_large_write_is_followed_in_bulk_alike(embedded: Membrane, time: ManualTime) -> None:
    rng = random.Random(9)
    ids = random_history(embedded, rng, 10)
    every_event(embedded, rng, ids)
    before = embedded.application.recorder.max_notification_id() or 0
    with embedded.batch():  # one write of many events, followed as one batch
        ids += random_history(embedded, rng, 60)
    written = (embedded.application.recorder.max_notification_id() or 0) - before
    assert written > 60
    app = embedded.application
    one_by_one = ReadModel()
    for notification in app.recorder.select_notifications(start=1, limit=10_000):
        one_by_one.apply_many([app.mapper.to_domain_event(notification)], notification.id)
    assert_same_views(one_by_one, embedded.views)

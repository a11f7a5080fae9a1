"""The read side is derived data: rebuilt from the log it equals the live views, and its
state timeline answers "as of" for every record at once, exactly as replaying each one."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections.read_model import ReadModel
from membrane_es.projections.timecodes import micros
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import semantic
from tests.unit.conftest import ManualTime
from tests.views_support import assert_same_views, random_history


@pytest.fixture
def embedded(clock: MonotonicClock) -> Membrane:
    return Membrane.in_memory(clock=clock, embedder=HashingEmbedder(64))


@pytest.mark.parametrize("seed", range(5))
def test_rebuilt_views_equal_the_live_ones(embedded: Membrane, time: ManualTime, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(6):
        random_history(embedded, rng, 10)
        time.advance(minutes=rng.randint(1, 600))
    assert_same_views(embedded.views, ReadModel.rebuild(embedded.application))


@pytest.mark.parametrize("seed", range(3))
def test_live_views_agree_with_every_record_in_the_store(
    embedded: Membrane, time: ManualTime, seed: int
) -> None:
    """An oracle independent of the views' code: each row's state against its aggregate."""
    rng = random.Random(seed)
    for _ in range(4):
        random_history(embedded, rng, 15)
        time.advance(minutes=rng.randint(1, 600))
    table, app, now = embedded.views.table, embedded.application, time.current
    state = table.state_now()
    salience = table.salience(np.arange(table.size), micros(now), state)
    statuses = {0: "", 1: "active", 2: "contested", 3: "retracted"}
    for row, record_id in enumerate(table.ids):
        record = app.load(record_id)
        assert salience[row] == pytest.approx(record.salience(now), abs=1e-12)
        assert bool(state.columns["pinned"][row]) == record.state.pinned
        assert bool(state.columns["retracted"][row]) == record.state.retracted
        if record.state.status:
            assert statuses[int(state.columns["status"][row])] == record.state.status
        assert table.ids[table.row_of_key[record.id]] == record_id


def test_every_event_moves_the_position(embedded: Membrane) -> None:
    random_history(embedded, random.Random(1), 20)
    assert embedded.views.position == embedded.application.recorder.max_notification_id()


def test_a_write_after_one_the_views_missed_brings_both_in(
    embedded: Membrane, time: ManualTime
) -> None:
    """A write is applied to the views directly only when it follows what they reflect; one
    that another writer's events preceded is caught up from the log, theirs included."""
    first = embedded.create_record(semantic("first")).id
    second = embedded.create_record(semantic("second")).id
    time.advance(seconds=1)
    app = embedded.application
    other = app.load(first)  # another writer, unseen by the views
    other.reinforce(actor="other", rationale="useful", at=time.current)
    app.save(other)
    assert embedded.position == (app.recorder.max_notification_id() or 0) - 1
    time.advance(seconds=1)
    embedded.reinforce(second, "t", "useful")
    assert embedded.position == app.recorder.max_notification_id()
    assert_same_views(embedded.views, ReadModel.rebuild(app))


@pytest.mark.parametrize("seed", range(4))
def test_state_as_of_any_moment_equals_replaying_each_record(
    embedded: Membrane, time: ManualTime, seed: int
) -> None:
    rng = random.Random(seed)
    moments: list[datetime] = []
    for _ in range(8):
        random_history(embedded, rng, 6)
        moments.append(time.current + timedelta(seconds=1))
        time.advance(minutes=rng.randint(1, 900))
    table = embedded.views.table
    app = embedded.application
    for moment in moments:
        at = micros(moment)
        state = table.state_at(at)
        rows = np.arange(state.size)
        salience = table.salience(rows, at, state)
        for row in rows:
            record = app.load_as_of(table.ids[row], moment).view(moment)
            assert salience[row] == pytest.approx(record.salience, abs=1e-12)
            assert bool(state.columns["pinned"][row]) == record.lifecycle.pinned
        created_later = [
            record_id
            for record_id in table.ids[state.size :]
            if app.load(record_id).created_on > moment
        ]
        assert len(created_later) == table.size - state.size


def test_timeline_checkpoints_give_the_same_answers(embedded: Membrane, time: ManualTime) -> None:
    table = embedded.views.table
    table.timeline.min_interval = table.timeline.interval = 7  # checkpoint often
    rng = random.Random(3)
    moments = []
    for _ in range(6):
        random_history(embedded, rng, 12)
        moments.append(time.current)
        time.advance(hours=1)
    assert len(table.timeline.checkpoints) > 3
    rebuilt = ReadModel.rebuild(embedded.application)  # default interval: few or no checkpoints
    for moment in moments:
        ours, theirs = table.state_at(micros(moment)), rebuilt.table.state_at(micros(moment))
        assert ours.size == theirs.size
        for name in ours.columns:
            np.testing.assert_array_equal(ours.columns[name], theirs.columns[name])


def test_vectors_are_indexed_by_scope(embedded: Membrane) -> None:
    random_history(embedded, random.Random(5), 30)
    index = embedded.views.embeddings
    table = embedded.views.table
    assert len(index) == table.size
    for scope, block in index.blocks.items():
        assert set(table.content["scope"][block.rows[: block.size]]) == {scope}

"""The metrics view survives a checkpoint: loaded (and caught up) it answers as the live one."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from membrane_es import Membrane
from membrane_es.projections.read_model import ReadModel
from membrane_es.projections.timecodes import micros
from membrane_es.timekeeping.clock import MonotonicClock
from tests.views_support import random_history

START = datetime(2025, 1, 1, tzinfo=UTC)


class Steps:
    """A wall clock that moves an hour each time it is read (so histories span days)."""

    def __init__(self) -> None:
        self.current = START

    def __call__(self) -> datetime:
        self.current += timedelta(hours=1)
        return self.current


def snapshots(views: ReadModel, moments: list[datetime]) -> list[dict[str, Any]]:
    """The live snapshot at the last moment, and as-of snapshots at every moment."""
    table, metrics = views.table, views.metrics
    last = micros(moments[-1])
    answers = [metrics.snapshot(table, last, table.state_now(), live=True)]
    for moment in moments:
        at = micros(moment)
        answers.append(metrics.snapshot(table, at, table.state_at(at), live=False))
    return answers


def history(memory: Membrane, rng: random.Random) -> None:
    random_history(memory, rng, 30)
    memory.create_record(
        {
            "type": "competence",
            "sensitivity": "low",
            "payload": {"kind": "competence", "performance": {"success_rate": rng.random()}},
            "audit_log": [{"action": "reinforce", "actor": "c", "timestamp": START.isoformat()}],
        }
    )
    memory.create_record(
        {
            "type": "plan_graph",
            "sensitivity": "low",
            "payload": {"kind": "plan_graph", "metrics": {"execution_count": rng.randint(1, 9)}},
        }
    )


def test_checkpointed_metrics_equal_the_live_ones(tmp_path: Path) -> None:
    rng = random.Random(3)
    clock = MonotonicClock(source=Steps())
    with Membrane.open(tmp_path, sync=False, clock=clock) as memory:
        history(memory, rng)
        moments = [START + timedelta(hours=h) for h in (5, 20, 40)] + [clock.now()]
        before = snapshots(memory.views, moments)
        assert before[0]["total_audit_entries"] > 0

    with Membrane.open(tmp_path, sync=False, read_only=True) as reader:
        loaded = ReadModel.load(tmp_path / "views", reader.application)
    assert loaded is not None
    assert snapshots(loaded, moments) == before
    loaded.close()

    # A restart that catches up: the counters carry on from the checkpoint.
    with Membrane.open(tmp_path, sync=False, clock=MonotonicClock(source=Steps())) as memory:
        history(memory, rng)
        later = [*moments, memory.application.last_event_time() or START]
        rebuilt = ReadModel.rebuild(memory.application)
        assert snapshots(memory.views, later) == snapshots(rebuilt, later)
        rebuilt.close()

"""The background schedule: runs every interval, survives failing runs, stops cleanly."""

from __future__ import annotations

import pytest

from membrane_es.timekeeping.scheduler import PeriodicTask


def test_a_failing_run_is_counted_and_the_loop_goes_on() -> None:
    calls: list[int] = []

    def work() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first run fails")

    task = PeriodicTask("test", 0.005, work)
    task.start()
    assert task.wait_for_runs(3, timeout=30)
    task.stop()
    assert task.failures == 1
    assert len(calls) >= 3


def test_stop_before_start_is_safe_and_idempotent() -> None:
    task = PeriodicTask("test", 1.0, lambda: None)
    task.stop()
    task.stop()
    assert task.runs == 0


def test_starting_twice_is_refused() -> None:
    task = PeriodicTask("test", 1.0, lambda: None)
    task.start()
    with pytest.raises(RuntimeError):
        task.start()
    task.stop()


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        PeriodicTask("test", 0, lambda: None)

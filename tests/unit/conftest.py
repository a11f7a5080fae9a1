"""Unit-test fixtures: an in-memory engine on a clock the test drives by hand."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from membrane_es import Membrane
from membrane_es.timekeeping.clock import MonotonicClock

START = datetime(2025, 1, 1, tzinfo=UTC)


class ManualTime:
    """A wall clock that moves only when the test says so."""

    def __init__(self, start: datetime = START) -> None:
        self.current = start

    def __call__(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> datetime:
        self.current += timedelta(**delta)
        return self.current


@pytest.fixture
def time() -> ManualTime:
    return ManualTime()


@pytest.fixture
def clock(time: ManualTime) -> MonotonicClock:
    return MonotonicClock(source=time)


@pytest.fixture
def memory(clock: MonotonicClock) -> Iterator[Membrane]:
    # These tests assert the reference's write behaviour (spec §10: repeated facts are
    # separate records); resolution on write has its own tests (test_resolution.py).
    engine = Membrane.in_memory(clock=clock, resolve_writes=False)
    yield engine
    engine.close()

"""The engine's clock: UTC, strictly increasing, never earlier than the last event it saw.

Event times are transaction time and order the log; a wall clock can step backwards
(NTP, VM migration), so each reading is at least one microsecond after the previous one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

_TICK = timedelta(microseconds=1)


def wall_clock() -> datetime:
    return datetime.now(UTC)


class MonotonicClock:
    """Hands out strictly increasing UTC timestamps; thread-safe."""

    def __init__(self, source: Callable[[], datetime] = wall_clock) -> None:
        self._source = source
        self._last: datetime | None = None
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """A timestamp later than every one handed out or observed before."""
        with self._lock:
            moment = self._source()
            if self._last is not None and moment <= self._last:
                moment = self._last + _TICK
            self._last = moment
            return moment

    def peek(self) -> datetime:
        """What :meth:`now` would say, without handing the moment out."""
        with self._lock:
            moment = self._source()
            if self._last is not None and moment <= self._last:
                return self._last
            return moment

    def observe(self, moment: datetime) -> None:
        """Never hand out a time at or before ``moment`` (e.g. the last committed event)."""
        with self._lock:
            if self._last is None or moment > self._last:
                self._last = moment

    @property
    def last(self) -> datetime | None:
        return self._last

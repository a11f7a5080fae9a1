"""``MemoryApplication.position_at(T)``: the log position at a moment, found by binary search,
against counting every event — on a real store, and on a log whose ids have gaps (as
PostgreSQL's sequence leaves them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from membrane_es import Membrane
from membrane_es.wiring.application import MemoryApplication
from tests.unit.builders import semantic
from tests.unit.conftest import START, ManualTime

MICRO = timedelta(microseconds=1)


def test_each_moment_gives_the_events_at_or_before_it(memory: Membrane, time: ManualTime) -> None:
    for step in range(7):
        time.advance(minutes=step + 1)
        memory.create_record(semantic(f"fact {step}"))
    app = memory.application
    last = app.recorder.max_notification_id()
    times = [
        app.mapper.to_domain_event(notification).timestamp
        for notification in app.recorder.select_notifications(start=1, limit=last)
    ]

    assert app.position_at(times[0] - MICRO) == 0
    for position, moment in enumerate(times, start=1):
        assert app.position_at(moment) == position
        assert app.position_at(moment + MICRO) == position
    assert app.position_at(times[-1] + timedelta(days=1)) == last


@dataclass
class _Notification:
    id: int
    timestamp: datetime


class _GappedLog:
    """The parts of an application ``position_at`` reads, over a log with missing ids."""

    def __init__(self, ids: list[int]) -> None:
        self.log = [_Notification(i, START + timedelta(seconds=i)) for i in ids]
        self.recorder = self
        self.mapper = self

    def max_notification_id(self) -> int | None:
        return self.log[-1].id if self.log else None

    def select_notifications(self, start: int, limit: int, stop: int) -> list[_Notification]:
        return [n for n in self.log if start <= n.id <= stop][:limit]

    def to_domain_event(self, notification: _Notification) -> Any:
        return notification


def test_gaps_in_the_ids_are_stepped_over() -> None:
    for ids in ([], [4], [1, 2, 5, 9, 10], [3, 4, 20, 21, 22, 40]):
        log: Any = _GappedLog(ids)
        for second in range(45):
            moment = START + timedelta(seconds=second)
            expected = max((i for i in ids if i <= second), default=0)
            assert MemoryApplication.position_at(log, moment) == expected, (ids, second)

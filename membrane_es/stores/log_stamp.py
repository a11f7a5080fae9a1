"""What a save hands the recorder beside its events: one typed value, :class:`LogStamp`.

eventsourcing passes a save's keyword arguments through its event store to the recorder's
``insert_events``; this package passes exactly one, :data:`LOG_STAMP`, whose value says what
the recorder checks and keeps with the events (see :mod:`membrane_es.stores.event_times` and
:mod:`membrane_es.stores.record_numbers`). A recorder reads it with :func:`stamp_of`, which
refuses a value of another type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from membrane_es.errors import MembraneError

LOG_STAMP = "log_stamp"  # the keyword of ``insert_events`` that carries the stamp


@dataclass(frozen=True, slots=True)
class LogStamp:
    """``event_times``: the first and last event's times (the recorder refuses the save
    unless the first is later than the newest time in the log); ``record_numbers``: the
    first record number the save wrote, and how many (refused unless the first follows the
    log's count of records); ``imported_time``: for events that keep the times they had (an
    import), the newest of them (not checked, but the log's time moves up to it). None:
    nothing to check or keep."""

    event_times: tuple[datetime, datetime] | None = None
    record_numbers: tuple[int, int] | None = None
    imported_time: datetime | None = None


UNSTAMPED = LogStamp()


def stamp_of(insert_kwargs: Mapping[str, Any]) -> LogStamp:
    """The stamp among ``insert_events``' keyword arguments (:data:`UNSTAMPED` if none)."""
    stamp = insert_kwargs.get(LOG_STAMP)
    if stamp is None:
        return UNSTAMPED
    if not isinstance(stamp, LogStamp):
        raise MembraneError(
            f"insert_events: {LOG_STAMP} must be a LogStamp, not {type(stamp).__name__}"
        )
    return stamp


__all__ = ["LOG_STAMP", "UNSTAMPED", "LogStamp", "stamp_of"]

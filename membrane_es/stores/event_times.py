"""Event times in log order, across every process writing one log.

:meth:`~membrane_es.wiring.application.MemoryApplication.save` hands the recorder, with a save's
events, the times of the first and the last of them (``LogStamp.event_times``, see
:mod:`membrane_es.stores.log_stamp`). A recorder that orders several writers' events (LMDB's
across processes, PostgreSQL's across machines) refuses a save whose first event is not
later than the newest one already in the log (:class:`EventTimeBehind`); the engine then
moves its clock past the log's time and runs the command again, so event times never go
backwards along the log and ``as_of(T)`` always sees a prefix of it.

Events written with the times they already carry (an import of an exported log) are not
checked; the recorder is handed the newest of those times (``LogStamp.imported_time``)
and moves the log's time up to it, so the next write is checked against them.
"""

from __future__ import annotations

from datetime import datetime

from eventsourcing.persistence import IntegrityError as ConcurrentWrite


class EventTimeBehind(ConcurrentWrite):
    """A save's first event is not later than the newest event already in the log (another
    process's clock is ahead). Nothing was written; a retry must take times after
    ``log_time``."""

    def __init__(self, log_time: datetime) -> None:
        self.log_time = log_time
        super().__init__(f"the log already holds an event at {log_time.isoformat()}")

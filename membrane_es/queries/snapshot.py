"""The read side at one moment, and the records a query returns, hydrated as of that moment.

A query first takes a :class:`Snapshot`: the moment it answers for (now, or ``as_of``) and the
state columns of every record that existed then (DESIGN §2: content is fixed at creation, so
"existed then" is "row below the table size then", and the state is one timeline lookup).
Everything a query decides — who may see what, salience, ranking — is computed from the
snapshot's columns. Only the records it returns are then loaded, by :class:`Hydrator`: from
the aggregate cache for a live read, or by replaying their events up to the moment for
``as_of``, so an answer read as of T is exactly the answer a live read gave at T. (A live
read racing a write from another thread may load a record a moment newer than the columns
it was ranked by; a read ``as_of`` never does.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from membrane_es.projections.read_model import ReadModel
from membrane_es.projections.records import RecordTable, State
from membrane_es.projections.timecodes import micros
from membrane_es.queries.records import EventReader
from membrane_es.queries.trust import redact
from membrane_es.schema.records import MemoryRecord, copy_record

Array = npt.NDArray[Any]


@dataclass(frozen=True)
class Snapshot:
    """The views as they stood at ``moment`` (``at`` in microseconds).

    ``state`` holds the state columns of rows ``[0, size)``, the records created at or before
    the moment; ``historical`` says records are hydrated by replay (``as_of``) rather than
    from their current aggregates.
    """

    views: ReadModel
    moment: datetime
    at: int
    state: State
    historical: bool

    @property
    def table(self) -> RecordTable:
        return self.views.table

    @property
    def size(self) -> int:
        return self.state.size

    def row(self, record_id: str) -> int | None:
        """The row of a record that existed at the moment; None otherwise."""
        row = self.views.table.row_of.get(record_id)
        return row if row is not None and row < self.state.size else None

    def salience(self, rows: Array) -> Array:
        return self.views.table.salience(rows, self.at, self.state)


def take_snapshot(views: ReadModel, now: datetime, as_of: datetime | None) -> Snapshot:
    """The views now (state copied, so later writes do not show through), or as of a moment."""
    table = views.table
    if as_of is None:
        with views.lock:
            size = table.size
            state = State(size, {n: c[:size].copy() for n, c in table.state.items()})
        return Snapshot(views, now, micros(now), state, historical=False)
    at = micros(as_of)
    with views.lock:
        state = table.state_at(at)
    return Snapshot(views, as_of, at, state, historical=True)


@dataclass
class Hydrator:
    """Loads full records of a snapshot, each at most once per query.

    Returned records are private copies whose salience is the snapshot's (the value the
    query ranked by), so what a caller sees is ordered as it was ranked.
    """

    reader: EventReader
    snapshot: Snapshot
    _full: dict[int, MemoryRecord] = field(default_factory=dict)

    def full(self, row: int) -> MemoryRecord:
        """The whole record (before any redaction), as of the snapshot's moment."""
        record = self._full.get(row)
        if record is None:
            snapshot = self.snapshot
            record_id = snapshot.table.ids[row]
            if snapshot.historical:
                aggregate = self.reader.load_as_of(record_id, snapshot.moment)
            else:
                aggregate = self.reader.load(record_id)
            salience = float(snapshot.salience(np.array([row]))[0])
            view = aggregate.view(snapshot.moment)
            record = self._full[row] = msgspec.structs.replace(view, salience=salience)
        return record

    def visible(self, row: int, redacted: bool) -> MemoryRecord:
        """What the caller receives: a private copy, or the redacted one."""
        record = self.full(row)
        return redact(record) if redacted else copy_record(record)

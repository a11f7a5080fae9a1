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

A live snapshot does not copy the state columns (a copy costs a pass over every record, even
for a read limited to a few scopes): it reads them in place and notes the views' log
position. :func:`consistently` answers from it and checks afterwards that no write was
applied meanwhile; if one was, it answers again from a private copy taken under the lock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.projections.read_model import ReadModel
from membrane_es.projections.record_table import RecordTable, State
from membrane_es.projections.timecodes import micros
from membrane_es.queries.by_id import EventReader
from membrane_es.queries.trust import redact
from membrane_es.schema.records import MemoryRecord, copy_record

Array = npt.NDArray[Any]
T = TypeVar("T")
PRIVATE = -1  # the position of a snapshot that owns its state (never stale)


@dataclass(frozen=True)
class Snapshot:
    """The views as they stood at ``moment`` (``at`` in microseconds).

    ``state`` holds the state columns of rows ``[0, size)``, the records created at or before
    the moment; ``historical`` says records are hydrated by replay (``as_of``) rather than
    from their current aggregates. ``position`` is the views' log position when a live
    snapshot that reads the state columns in place was taken (``PRIVATE`` otherwise).
    """

    views: ReadModel
    moment: datetime
    at: int
    state: State
    historical: bool
    position: int = PRIVATE

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


def take_snapshot(
    views: ReadModel, now: datetime, as_of: datetime | None, private: bool = False
) -> Snapshot:
    """The views now, or as of a moment. A live snapshot reads the state columns in place
    unless ``private`` asks for a copy (so later writes cannot show through)."""
    table = views.table
    with views.lock.shared():  # beside other reads and a checkpoint; no event applied
        # Rows by scope, for reads limited to some scopes: brought up to date here, under
        # the lock, rather than on every write.
        table.partitions.sync(table.content["scope"], table.size)
        if as_of is None:
            size = table.size
            if private:
                columns = {n: c[:size].copy() for n, c in table.state.items()}
                return Snapshot(views, now, micros(now), State(size, columns), False)
            columns = {n: c[:size] for n, c in table.state.items()}
            return Snapshot(views, now, micros(now), State(size, columns), False, views.position)
        at = micros(as_of)
        state = table.past_state(at)
    return Snapshot(views, as_of, at, state, historical=True)


def stale(snapshot: Snapshot) -> bool:
    """Whether a write was applied to the views since this in-place snapshot was taken (its
    answer may then mix states from before and after it)."""
    if snapshot.position == PRIVATE:
        return False
    with snapshot.views.lock.shared():  # waits for a write being applied to finish
        return snapshot.views.position != snapshot.position


def consistently(
    views: ReadModel, now: datetime, as_of: datetime | None, read: Callable[[Snapshot], T]
) -> T:
    """``read`` of a snapshot of the views whose answer reflects one state of them: read in
    place, and again from a private copy if a write landed meanwhile."""
    snapshot = take_snapshot(views, now, as_of)
    answer = read(snapshot)
    if not stale(snapshot):
        return answer
    return read(take_snapshot(views, now, as_of, private=True))


@dataclass
class Hydrator:
    """Loads full records of a snapshot, each at most once per query.

    Returned records are private copies whose salience is the snapshot's (the value the
    query ranked by), so what a caller sees is ordered as it was ranked.
    """

    reader: EventReader
    snapshot: Snapshot
    _full: dict[int, MemoryRecord] = field(default_factory=dict)
    _salience: dict[int, float] = field(default_factory=dict)
    _loaded: dict[int, RecordAggregate] = field(default_factory=dict)

    def know(self, rows: Array, salience: Array) -> None:
        """Salience the query already computed for these rows (from this snapshot), so
        hydrating them does not compute it again, one row at a time."""
        self._salience.update(zip(rows.tolist(), salience.tolist(), strict=True))

    def prepare(self, rows: Array) -> None:
        """Load these rows' aggregates together, ahead of hydrating them (a live read: the
        event store's log head is then read once, not once a record)."""
        if self.snapshot.historical:
            return
        wanted = [row for row in rows.tolist() if row not in self._full]
        ids = self.snapshot.table.ids
        loaded = self.reader.load_many([ids[row] for row in wanted])
        self._loaded.update(zip(wanted, loaded, strict=True))

    def full(self, row: int) -> MemoryRecord:
        """The whole record (before any redaction), as of the snapshot's moment."""
        record = self._full.get(row)
        if record is None:
            snapshot = self.snapshot
            record_id = snapshot.table.ids[row]
            if snapshot.historical:
                aggregate = self.reader.load_as_of(record_id, snapshot.moment)
            else:
                preloaded = self._loaded.pop(row, None)
                aggregate = self.reader.load(record_id) if preloaded is None else preloaded
            salience = self._salience.get(row)
            if salience is None:
                salience = float(snapshot.salience(np.array([row]))[0])
            view = aggregate.view(snapshot.moment)
            record = self._full[row] = msgspec.structs.replace(view, salience=salience)
        return record

    def visible(self, row: int, redacted: bool) -> MemoryRecord:
        """What the caller receives: a private copy, or the redacted one."""
        record = self.full(row)
        return redact(record) if redacted else copy_record(record)

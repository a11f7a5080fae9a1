"""The state columns as they stood at a past moment, computed for the rows a read asks about.

:meth:`Timeline.state_at <membrane_es.projections.record_table.Timeline.state_at>` rebuilds every
state column of every row that existed at the moment: a pass over the whole table (and over
the changes since the last full copy), which at a million records costs more than the read
itself once that read only touches a scope's rows or its shortlist. :class:`PastState` gives
the same values lazily: a column indexed by rows computes just those rows — their values in
the last full copy before the moment, overwritten by their last change up to it — and a
column indexed by a slice (a read over every row) computes every row once, densely.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from membrane_es.projections.record_table import Timeline

Array = npt.NDArray[Any]


class PastState(Mapping[str, "PastColumn"]):
    """State columns (by name) of rows ``[0, size)`` as of ``at``, from a timeline and the
    current columns (for their names and types)."""

    def __init__(self, timeline: Timeline, current: dict[str, Array], at: int, size: int):
        self._timeline = timeline
        self._current = current
        self._at = at
        self._size = size
        self._upto = int(np.searchsorted(timeline.times[: timeline.size], at, side="right"))
        self._start, self._copied, self._copies = 0, 0, dict[str, Array]()
        for count, table_size, copies in reversed(timeline.checkpoints):
            if count <= self._upto:
                self._start, self._copied, self._copies = count, min(size, table_size), copies
                break
        self._dense: dict[str, Array] | None = None
        self._last_rows: Array | None = None
        self._last_values: dict[str, Array] = {}

    def __getitem__(self, name: str) -> PastColumn:
        if name not in self._current:
            raise KeyError(name)
        return PastColumn(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._current)

    def __len__(self) -> int:
        return len(self._current)

    def dense(self) -> dict[str, Array]:
        """Every column of every row (computed once)."""
        if self._dense is None:
            state = self._timeline.state_at(self._at, self._size, self._current)
            self._dense = dict(state.columns)
        return self._dense

    def of_rows(self, rows: Array) -> dict[str, Array]:
        """Every column's values at the given rows (any order, each below ``size``). Kept
        for the last rows asked about: a read asks for several columns of the same rows."""
        if rows is self._last_rows:
            return self._last_values
        if self._dense is not None:
            values = {name: column[rows] for name, column in self._dense.items()}
        else:
            values = self._compute(np.asarray(rows, dtype=np.int64))
        self._last_rows, self._last_values = rows, values
        return values

    def _compute(self, rows: Array) -> dict[str, Array]:
        timeline = self._timeline
        values = {name: np.zeros(len(rows), dtype=c.dtype) for name, c in self._current.items()}
        if self._copies:
            copied = rows < self._copied
            for name, column in values.items():
                column[copied] = self._copies[name][rows[copied]]
        changes = timeline.rows[self._start : self._upto]
        if not len(rows) or not len(changes):
            return values
        # The changes since that copy that touch the rows asked about, and of those, each
        # row's last: its value at the moment.
        asked = np.zeros(len(next(iter(self._current.values()))), dtype=bool)
        asked[rows] = True
        hits = np.flatnonzero(asked[changes])
        if not len(hits):
            return values
        changed = changes[hits]
        touched, from_end = np.unique(changed[::-1], return_index=True)
        last = hits[len(hits) - 1 - from_end] + self._start
        places = np.minimum(np.searchsorted(touched, rows), len(touched) - 1)
        found = touched[places] == rows
        picks = last[places[found]]
        for name, column in values.items():
            column[found] = timeline.values[name][picks]
        return values


class PastColumn:
    """One state column as of the moment; index it with rows (or a slice)."""

    def __init__(self, state: PastState, name: str) -> None:
        self._state = state
        self._name = name

    def __getitem__(self, key: Array | slice) -> Array:
        if isinstance(key, slice):
            return self._state.dense()[self._name][key]
        return self._state.of_rows(key)[self._name]

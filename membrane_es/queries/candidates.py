"""Which records a read may consider: the filters of layered retrieval, over numpy columns.

For a snapshot and a trust context, a record is a candidate when

* its type is among the requested memory types (all types when none are given);
* the trust rules admit it (spec §3.1): in full at or below ``max_sensitivity``, redacted one
  level above, never two or more above; a non-empty scope list admits scoped records only in
  those scopes, and unscoped records always;
* it is *active*: not retracted (superseded, merged or withdrawn) and not taken out of use
  by a penalty to nothing or its own ``max_age_seconds``
  (:meth:`~membrane_es.projections.record_table.RecordTable.hidden`; decay alone never hides a
  record, it only ranks it lower) — unless ``include_retracted`` asks for those too;
* a semantic fact's validity window ``[start, end)`` contains ``valid_at``, when given
  (missing bounds are open; other types have no window);
* its event time (``created_at``: when it happened, as given or as captured) is within
  ``[created_after, created_before)``, when given;
* its salience at the snapshot's moment is at least ``min_salience`` (when above 0;
  redacted records keep their salience).

A caller whose trust lists scopes is only ever shown rows of those scopes and unscoped rows,
so only those rows are examined (the table's scope partitions list them): the cost of a
scoped read follows the records it may see, not the size of the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.record_table import STATUS_RETRACTED, TYPE_CODE
from membrane_es.queries.snapshot import Snapshot
from membrane_es.queries.trust import visibility_columns
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.records import TrustContext

Array = npt.NDArray[Any]


@dataclass(frozen=True)
class Filters:
    """What a query asks for beyond trust. ``types`` empty means every type; ``valid_at`` is
    in microseconds."""

    types: frozenset[MemoryType] = frozenset()
    min_salience: float = 0.0
    include_retracted: bool = False
    valid_at: int | None = None
    created_after: int | None = None  # event time window [after, before), microseconds
    created_before: int | None = None


@dataclass(frozen=True)
class Candidates:
    """Rows that passed, with their salience at the snapshot and whether they are redacted."""

    rows: Array
    salience: Array
    redacted: Array

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, picks: Array) -> Candidates:
        return Candidates(self.rows[picks], self.salience[picks], self.redacted[picks])


def find(snapshot: Snapshot, trust: TrustContext, filters: Filters) -> Candidates:
    """Every candidate row of the snapshot, in row order."""
    rows = universe(snapshot, trust)
    if rows is None:
        return _admit_every_row(snapshot, trust, filters)
    return admit(snapshot, rows, trust, filters)


def universe(snapshot: Snapshot, trust: TrustContext) -> Array | None:
    """The rows the trust's scopes let a caller see (ascending), or None when it lists no
    scopes (every row)."""
    if not trust.scopes:
        return None
    table = snapshot.table
    scopes = [0, *(table.scope_ids[s] for s in trust.scopes if s in table.scope_ids)]
    return table.partitions.rows(scopes, snapshot.size)


def _admit_every_row(snapshot: Snapshot, trust: TrustContext, filters: Filters) -> Candidates:
    """:func:`admit` of every row of the snapshot, reading the columns through one slice
    (views, not gathered copies: the same values, about half the time)."""
    table, size = snapshot.table, snapshot.size
    every = slice(0, size)
    content = table.content
    full, redacted = visibility_columns(
        trust, content["sensitivity"][every], content["scope"][every], table.scope_ids
    )
    keep = full | redacted
    if filters.types:
        keep &= np.isin(content["type"][every], type_codes(filters.types))
    salience = table.salience(every, snapshot.at, snapshot.state)
    keep &= active(snapshot, every, salience, filters)
    if filters.min_salience > 0:
        keep &= salience >= filters.min_salience
    rows = np.flatnonzero(keep)
    return Candidates(rows, salience[rows], redacted[rows])


def admit(snapshot: Snapshot, rows: Array, trust: TrustContext, filters: Filters) -> Candidates:
    """The rows among ``rows`` (all below the snapshot's size) that pass every filter."""
    content = snapshot.table.content
    if filters.types:
        rows = rows[np.isin(content["type"][rows], type_codes(filters.types))]
    full, redacted = visibility(snapshot, rows, trust)
    keep = full | redacted
    rows, redacted = rows[keep], redacted[keep]
    salience = snapshot.salience(rows)
    keep = active(snapshot, rows, salience, filters)
    if filters.min_salience > 0:
        keep &= salience >= filters.min_salience
    return Candidates(rows[keep], salience[keep], redacted[keep])


def visibility(snapshot: Snapshot, rows: Array, trust: TrustContext) -> tuple[Array, Array]:
    """(full, redacted) masks of ``rows`` under ``trust``."""
    table = snapshot.table
    return visibility_columns(
        trust,
        table.content["sensitivity"][rows],
        table.content["scope"][rows],
        table.scope_ids,
    )


def active(snapshot: Snapshot, rows: Array | slice, salience: Array, filters: Filters) -> Array:
    """Mask of ``rows`` that active reads show: not retracted or hidden (unless
    ``include_retracted``), within the event-time window and valid at ``valid_at`` when
    those are given."""
    table, columns = snapshot.table, snapshot.state.columns
    keep = np.ones(len(salience), dtype=bool)
    if not filters.include_retracted:
        retracted = columns["retracted"][rows] | (columns["status"][rows] == STATUS_RETRACTED)
        keep &= ~retracted & ~table.hidden(rows, snapshot.at, snapshot.state)
    if filters.created_after is not None:
        keep &= table.content["created_at"][rows] >= filters.created_after
    if filters.created_before is not None:
        keep &= table.content["created_at"][rows] < filters.created_before
    if filters.valid_at is not None:
        semantic = table.content["type"][rows] == TYPE_CODE[MemoryType.SEMANTIC]
        inside = (table.content["valid_from"][rows] <= filters.valid_at) & (
            filters.valid_at < table.content["valid_until"][rows]
        )
        keep &= ~semantic | inside
    return keep


def type_codes(types: Iterable[MemoryType]) -> Array:
    return np.asarray(sorted(TYPE_CODE[t] for t in types), dtype=np.int8)

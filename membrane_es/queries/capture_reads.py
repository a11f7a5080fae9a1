"""What capture reads of the record table before it writes (spec §1.10, §2.4): the most
salient records of a scope, and the episodes of a scope in a time window. The unit of work
adds the records it created itself and orders the whole by the ranking's tie rule
(:func:`best_first`), the one every read uses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.record_table import TYPE_CODE, RecordTable
from membrane_es.queries.ranking import order
from membrane_es.schema.enums import MemoryType

Array = npt.NDArray[Any]
# (salience, created_at in µs, record id): one candidate of the pool.
Pick = tuple[float, int, str]


def most_salient(table: RecordTable, scope: str | None, limit: int, at: int) -> list[Pick]:
    """The ``limit`` most salient active rows of ``scope`` (every scope for None) at ``at``
    (µs), unordered; ties at the cut are all kept for :func:`best_first` to order."""
    rows = np.arange(table.size)
    if scope is not None:
        scope_id = table.scope_ids.get(scope)
        if scope_id is None:
            return []
        rows = rows[table.content["scope"][: table.size] == scope_id]
    state = table.state_now()
    salience = table.salience(rows, at, state)
    active = ~state.columns["retracted"][rows] & ~table.hidden(rows, at, state)
    rows, salience = rows[active], salience[active]
    if len(rows) > limit:
        cut = np.partition(salience, len(rows) - limit)[len(rows) - limit]
        keep = salience >= cut
        rows, salience = rows[keep], salience[keep]
    created = table.content["created_at"][rows]
    return [
        (float(s), int(c), table.ids[int(r)])
        for r, s, c in zip(rows.tolist(), salience.tolist(), created.tolist(), strict=True)
    ]


def best_first(picks: Sequence[Pick], limit: int) -> list[str]:
    """The ids of the ``limit`` most salient picks, by the ranking's tie rule (salience, then
    newer, then id)."""
    if not picks or limit <= 0:
        return []
    salience = np.array([s for s, _, _ in picks], dtype=np.float64)
    created = np.array([c for _, c, _ in picks], dtype=np.int64)
    ids = [record_id for _, _, record_id in picks]
    return [ids[int(i)] for i in order(salience, salience, created, ids.__getitem__, limit)]


def episodes(table: RecordTable, scope: str, low: int, high: int) -> Array:
    """Rows of episodic records of ``scope`` with event times in ``[low, high]`` (µs). The
    time window is the narrow test (a sitting's minutes), so it runs first over the whole
    column, and scope and type are checked on what it leaves."""
    scope_id = table.scope_ids.get(scope)
    if scope_id is None:
        return np.zeros(0, dtype=np.int64)
    content, size = table.content, table.size
    created = content["created_at"][:size]
    rows = np.flatnonzero((created >= low) & (created <= high))
    keep = (content["scope"][rows] == scope_id) & (
        content["type"][rows] == TYPE_CODE[MemoryType.EPISODIC]
    )
    return rows[keep]

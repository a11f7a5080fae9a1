"""Every record's row, grouped by scope: what a scoped read considers, without scanning the rest.

A caller whose trust lists scopes can see only the records of those scopes and the unscoped
ones (scope id 0). Reading just their rows keeps every per-query step — admission, salience,
lexical and vector scores — proportional to the rows the caller may see rather than to the
whole store.

Derived from the record table's scope column (content, written once per row) and brought up
to date lazily, under the read model's lock, when a query takes its snapshot: the write path
and checkpoint loading need not know about it.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]


class RowList:
    """Ascending rows of one scope, int32 (4 bytes a record), grown by doubling (the unused
    half is untouched zero pages)."""

    def __init__(self) -> None:
        self.rows = np.zeros(64, dtype=np.int32)
        self.size = 0

    def extend(self, rows: Array) -> None:
        end = self.size + len(rows)
        if end > len(self.rows):
            grown = np.zeros(max(end, 2 * len(self.rows)), dtype=np.int32)
            grown[: self.size] = self.rows[: self.size]
            self.rows = grown
        self.rows[self.size : end] = rows
        self.size = end

    def below(self, limit: int) -> Array:
        """The rows under ``limit`` (a view; appends never rewrite it)."""
        rows = self.rows[: self.size]
        return rows[: int(np.searchsorted(rows, limit, side="left"))]


class ScopePartitions:
    """Rows by scope id, following the table's scope column up to ``synced`` rows."""

    def __init__(self) -> None:
        self.lists: dict[int, RowList] = {}
        self.synced = 0
        self._syncing = threading.Lock()  # reads sync it side by side (the views held shared)

    def sync(self, scopes: Array, size: int) -> None:
        """Take in rows ``[synced, size)``, whose scope ids are ``scopes[synced:size]``."""
        if size <= self.synced:
            return
        with self._syncing:
            self._sync(scopes, size)

    def _sync(self, scopes: Array, size: int) -> None:
        if size <= self.synced:
            return
        first = self.synced
        new = np.asarray(scopes[first:size])
        order = np.argsort(new, kind="stable")  # stable: rows stay ascending within a scope
        ordered = new[order]
        edges = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), len(new)]
        for start, end in zip(edges[:-1], edges[1:], strict=True):
            scope = int(ordered[start])
            target = self.lists.get(scope)
            if target is None:
                target = self.lists[scope] = RowList()
            target.extend(order[start:end] + first)
        self.synced = size

    def rows(self, scopes: list[int], below: int) -> Array:
        """Ascending rows under ``below`` of the given scope ids (int64)."""
        parts = [self.lists[s].below(below) for s in dict.fromkeys(scopes) if s in self.lists]
        parts = [p for p in parts if len(p)]
        if not parts:
            return np.zeros(0, dtype=np.int64)
        if len(parts) == 1:
            return parts[0].astype(np.int64)
        return np.sort(np.concatenate(parts).astype(np.int64))

    def nbytes(self) -> int:
        return sum(r.rows.nbytes for r in self.lists.values())

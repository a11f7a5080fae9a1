"""The Membrane metrics snapshot (spec §6), kept incrementally by the read model.

What is kept, and why it is exact for any moment (``as_of``) in O(changes) memory:

* **Row-aligned figures.** One float per record row, written once at creation: the
  competence record's ``performance.success_rate`` or the plan graph's
  ``metrics.execution_count`` (NaN when the record has none). Content never changes, so
  together with the record table's content columns (type, confidence, created_at) and
  ``tx_time`` these answer "which records existed at T, of which type, with which figures":
  the rows ``[0, size(T))``, ``size(T)`` being one binary search of ``tx_time``.
* **The audit log, as an append-only time index.** One ``(time, action code)`` pair per audit
  entry, in log order: each event whose ``action`` is one of the reference's seven audit
  actions adds one, and a ``Created`` event adds one per imported client-supplied entry plus
  its own ``create``. The entries counted as of T are a prefix (one binary search).
* **Running counters** for the moment now: records by type, audit entries by action, and the
  sums and counts of the two figures. They are updated per event, so a live snapshot reads
  them directly; an ``as_of`` snapshot recomputes the same numbers from the prefix above.
  Counters are derived data: a checkpoint saves the arrays and recomputes the counters.

Keys that depend on time (``avg_salience``, ``salience_distribution``, ``active_records``,
``pinned_records``, ``memory_growth_rate``) are computed vectorised from the record table's
columns and the state at the moment (``state_now()`` or ``state_at(T)``); no record is read.

Retracted records (stored forever here) are counted, with salience 0, as the reference counts
every stored record before a sweep deletes anything; so are records decayed to nothing that
the reference would have pruned.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.record_table import FEW_ROWS, TYPE_CODE, TYPES, RecordTable, State
from membrane_es.projections.timecodes import from_micros
from membrane_es.schema.enums import AuditAction, MemoryType
from membrane_es.schema.payloads import CompetencePayload, PlanGraphPayload
from membrane_es.schema.records import MemoryRecord
from membrane_es.schema.timestamps import rfc3339

Array = npt.NDArray[Any]

ACTIONS: tuple[AuditAction, ...] = tuple(AuditAction)
ACTION_CODE = {a.value: i for i, a in enumerate(ACTIONS)}
_REINFORCE = ACTION_CODE[AuditAction.REINFORCE.value]
_REVISIONS = [
    ACTION_CODE[a.value] for a in (AuditAction.REVISE, AuditAction.FORK, AuditAction.MERGE)
]
_COMPETENCE = TYPE_CODE[MemoryType.COMPETENCE]
_PLAN = TYPE_CODE[MemoryType.PLAN_GRAPH]
DAY_US = 86_400 * 1_000_000
BUCKETS = ("0.0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1.0")


class MetricsView:
    """Row figures, the audit time index and the running counters (see the module doc)."""

    def __init__(self, capacity: int = 1024) -> None:
        self.figures = np.full(capacity, np.nan, dtype="f8")
        self.audit_times = np.zeros(capacity, dtype="i8")
        self.audit_codes = np.zeros(capacity, dtype="i1")
        self.audit_size = 0
        self.by_type = np.zeros(len(TYPES), dtype="i8")
        self.by_action = np.zeros(len(ACTIONS), dtype="i8")
        self.figure_sum = np.zeros(len(TYPES), dtype="f8")
        self.figure_count = np.zeros(len(TYPES), dtype="i8")

    # --- writes (called by the read model, in log order) ---------------------------------

    def add_many(
        self, first_row: int, types: list[int], figures: list[float], audit: list[tuple[int, int]]
    ) -> None:
        """New rows ``first_row, first_row + 1, …`` (their type codes and figures, as
        :func:`figure_of` gives) and audit entries ``(time, action code)``, in log order;
        arrays and counters written column at a time."""
        last = first_row + len(figures)
        if last > len(self.figures):
            capacity = len(self.figures)
            while capacity < last:
                capacity *= 2
            grown = np.full(capacity, np.nan, dtype="f8")
            grown[: len(self.figures)] = self.figures
            self.figures = grown
        if len(figures) > FEW_ROWS:
            values = np.array(figures, dtype="f8")
            self.figures[first_row:last] = values
            self.by_type += np.bincount(types, minlength=len(TYPES))
            for i in np.flatnonzero(~np.isnan(values)).tolist():
                # One by one, in order: the same float sums as adding them as they came.
                self.figure_sum[types[i]] += figures[i]
                self.figure_count[types[i]] += 1
        else:
            for row, (code, figure) in enumerate(zip(types, figures, strict=True), first_row):
                self.figures[row] = figure
                self.by_type[code] += 1
                if not math.isnan(figure):
                    self.figure_sum[code] += figure
                    self.figure_count[code] += 1
        if audit:
            size = self.audit_size + len(audit)
            while size > len(self.audit_times):
                self.audit_times = _double(self.audit_times)
                self.audit_codes = _double(self.audit_codes)
            if len(audit) <= FEW_ROWS:
                for i, (at, code) in enumerate(audit, self.audit_size):
                    self.audit_times[i] = at
                    self.audit_codes[i] = code
                    self.by_action[code] += 1
                self.audit_size = size
                return
            times, codes = zip(*audit, strict=True)
            self.audit_times[self.audit_size : size] = times
            self.audit_codes[self.audit_size : size] = codes
            self.audit_size = size
            self.by_action += np.bincount(codes, minlength=len(ACTIONS))

    def restore(self, figures: Array, audit_times: Array, audit_codes: Array, types: Array) -> None:
        """Arrays from a checkpoint (``types``: the table's type column); counters rebuilt."""
        rows, size = len(figures), len(audit_times)
        self.figures = np.full(max(1024, 2 * rows), np.nan, dtype="f8")
        self.figures[:rows] = figures
        self.audit_times = np.zeros(max(1024, 2 * size), dtype="i8")
        self.audit_times[:size] = audit_times
        self.audit_codes = np.zeros(max(1024, 2 * size), dtype="i1")
        self.audit_codes[:size] = audit_codes
        self.audit_size = size
        self.by_type = np.bincount(types, minlength=len(TYPES)).astype("i8")
        self.by_action = np.bincount(audit_codes, minlength=len(ACTIONS)).astype("i8")
        self.figure_sum, self.figure_count = _figure_totals(figures, types)

    # --- reads ------------------------------------------------------------------------------

    def snapshot(self, table: RecordTable, at: int, state: State, *, live: bool) -> dict[str, Any]:
        """The 14 reference keys at moment ``at`` (microseconds), over the ``state.size``
        records that existed then. ``live``: the counters are current (``state`` is now)."""
        size = state.size
        types = table.content["type"][:size]
        if live:
            by_type, by_action = self.by_type, self.by_action
            figure_sum, figure_count = self.figure_sum, self.figure_count
        else:
            entries = int(np.searchsorted(self.audit_times[: self.audit_size], at, side="right"))
            by_type = np.bincount(types, minlength=len(TYPES))
            by_action = np.bincount(self.audit_codes[:entries], minlength=len(ACTIONS))
            figure_sum, figure_count = _figure_totals(self.figures[:size], types)
        rows = np.arange(size)
        salience = table.salience(rows, at, state)
        buckets = np.bincount(
            np.searchsorted(np.array([0.2, 0.4, 0.6, 0.8]), salience, side="right"), minlength=5
        )
        created = table.content["created_at"][:size]
        audit_total = int(by_action.sum())
        return {
            "collected_at": rfc3339(from_micros(at)),
            "total_records": size,
            "records_by_type": {
                TYPES[code].value: int(count) for code, count in enumerate(by_type) if count
            },
            "avg_salience": float(salience.mean()) if size else 0.0,
            "avg_confidence": (
                float(table.content["confidence"][:size].astype("f8").mean()) if size else 0.0
            ),
            "salience_distribution": {
                name: int(count) for name, count in zip(BUCKETS, buckets, strict=True)
            },
            "active_records": int(np.count_nonzero(salience > 0)),
            "pinned_records": int(np.count_nonzero(state.columns["pinned"][:size])),
            "total_audit_entries": audit_total,
            "memory_growth_rate": _ratio(int(np.count_nonzero(created > at - DAY_US)), size),
            "retrieval_usefulness": _ratio(int(by_action[_REINFORCE]), audit_total),
            "competence_success_rate": _ratio(
                float(figure_sum[_COMPETENCE]), int(figure_count[_COMPETENCE])
            ),
            "plan_reuse_frequency": _ratio(float(figure_sum[_PLAN]), int(figure_count[_PLAN])),
            "revision_rate": _ratio(int(by_action[_REVISIONS].sum()), audit_total),
        }


def figure_of(record: MemoryRecord) -> float:
    """A record's row figure (NaN when it has none)."""
    payload = record.payload
    if isinstance(payload, CompetencePayload) and payload.performance is not None:
        return float(payload.performance.success_rate)
    if isinstance(payload, PlanGraphPayload) and payload.metrics is not None:
        return float(payload.metrics.execution_count)
    return math.nan


def _figure_totals(figures: Array, types: Array) -> tuple[Array, Array]:
    known = ~np.isnan(figures)
    sums = np.bincount(types[known], weights=figures[known], minlength=len(TYPES))
    counts = np.bincount(types[known], minlength=len(TYPES)).astype("i8")
    return sums.astype("f8"), counts


def _ratio(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def _double(column: Array) -> Array:
    grown = np.zeros(len(column) * 2, dtype=column.dtype)
    grown[: len(column)] = column
    return grown

"""Which records the log's latest events touched: what a follower of the log re-reads.

An adapter that keeps its own index of the engine's records (which record holds each key
now) stays current by applying only what was written after the position it has seen:
the records those events touched, each once, in the order of its last event, with whether
it is active now (neither retracted nor taken out of use). The cost is that of the new
events, not of the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from membrane_es.projections.read_model import ReadModel


@dataclass(frozen=True, slots=True)
class RecordChange:
    """A record the events after a position touched; ``active``: an active read finds it
    now (not retracted, superseded, merged, nor penalised out of use)."""

    record_id: str
    active: bool


@dataclass(frozen=True, slots=True)
class RecordChanges:
    """The records touched after ``after`` up to ``position`` (the views' position when
    asked), each once, ordered by its last event there."""

    after: int
    position: int
    records: list[RecordChange]


def record_changes(
    views: ReadModel, after: int, keys: Iterable[UUID | str], now_us: int
) -> RecordChanges:
    """The changes made by the events whose aggregate ids are ``keys`` (the log after
    ``after`` up to the views' position, in log order); the caller holds ``views.lock``."""
    table = views.table
    rows: dict[int, None] = {}
    for key in keys:
        row = table.row_of_key.get(key if isinstance(key, UUID) else UUID(key))
        if row is not None:
            rows.pop(row, None)  # a later event moves the record to the end
            rows[row] = None
    ids = table.ids
    changes = [RecordChange(ids[row], not table.out_of_use(row, now_us)) for row in rows]
    return RecordChanges(after, views.position, changes)

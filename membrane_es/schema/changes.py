"""The change feed's vocabulary: one :class:`Change` per event of the log, in log order.

A change names its log position (the event's notification id: it never changes once given),
when the store learned of it (``log_time``, the ``as_of`` axis), when what the record tells
of happened (``event_time``, its ``created_at``), the record and the operation (the event
class's name in snake case, so every kind of event has one), who did it and why, what it
changed field by field, and the record as it stood right after it — as the reader's trust
admits: ``redacted`` changes carry the record's structure only (no fields, actor or
rationale), and a record whose content was erased carries none of it, at any position.
"""

from __future__ import annotations

import msgspec

from membrane_es.schema.records import MemoryRecord
from membrane_es.schema.timestamps import Timestamp


class FieldChange(msgspec.Struct, kw_only=True, frozen=True, gc=False):
    """One field's change: ``before`` None when it was added, ``after`` None when removed
    (values as display text; floats to three decimals)."""

    path: str
    kind: str  # "added", "removed" or "changed"
    before: str | None = None
    after: str | None = None


class Change(msgspec.Struct, kw_only=True, frozen=True):
    """One event of the log as a reader may see it."""

    position: int
    log_time: Timestamp
    event_time: Timestamp | None
    record_id: str
    version: int
    type: str
    scope: str
    sensitivity: str
    operation: str
    action: str
    actor: str
    rationale: str
    redacted: bool
    erased: bool
    fields: list[FieldChange]
    record: MemoryRecord


class ChangePage(msgspec.Struct, kw_only=True, frozen=True):
    """A bounded page of the feed. ``next_after``: the position to ask for the next page
    after (past the events this reader may not see, too); ``head``: the log's last position
    when the page was read (``next_after == head``: caught up)."""

    changes: list[Change]
    next_after: int
    head: int

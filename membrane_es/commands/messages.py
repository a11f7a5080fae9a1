"""One message per write use case: plain data, imperative names, no behaviour.

Records may be given as :class:`~membrane_es.schema.MemoryRecord` or as a dict in the
reference JSON or SDK form; handlers validate and copy them before anything is written.
"""

from __future__ import annotations

from typing import Any

import msgspec

from membrane_es.schema.records import MemoryRecord

RecordInput = MemoryRecord | dict[str, Any]


class Command(msgspec.Struct, kw_only=True, frozen=True):
    """Marker base: every command names who acts and why."""

    actor: str
    rationale: str


class CreateRecord(Command, frozen=True, kw_only=True):
    """Store a record as given (the reference's direct create)."""

    record: RecordInput
    actor: str = "system"
    rationale: str = "Initial creation"
    # The record's own vector, if the caller has one (checked against the store's dimensions).
    embedding: list[float] | None = None


class Supersede(Command, frozen=True, kw_only=True):
    old_id: str
    new_record: RecordInput


class Fork(Command, frozen=True, kw_only=True):
    source_id: str
    forked_record: RecordInput


class Merge(Command, frozen=True, kw_only=True):
    record_ids: list[str]
    merged_record: RecordInput


class Retract(Command, frozen=True, kw_only=True):
    record_id: str


class Contest(Command, frozen=True, kw_only=True):
    record_id: str
    contesting_ref: str = ""


class Reinforce(Command, frozen=True, kw_only=True):
    record_id: str


class Penalize(Command, frozen=True, kw_only=True):
    record_id: str
    amount: float


class AddRelation(Command, frozen=True, kw_only=True):
    """Add an outgoing relation; with ``inverse`` also the paired edge on the target."""

    source_id: str
    predicate: str
    target_id: str
    weight: float = 1.0
    inverse: str = ""


class RecordOutcome(Command, frozen=True, kw_only=True):
    """Attach an outcome (success, failure, partial) to an episodic record."""

    record_id: str
    status: str


class Pin(Command, frozen=True, kw_only=True):
    record_id: str


class Unpin(Command, frozen=True, kw_only=True):
    record_id: str

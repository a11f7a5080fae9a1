"""Single-record reads from the event store: by id (now or as of a moment) and history.

These are the reads that need the events themselves: a record's full audit trail, and its
exact state at any past moment (replaying its events up to then, decay evaluated then).
By-id reads never redact: a record the caller may not read in full is denied.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

import msgspec

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.errors import AccessDeniedError, NotFoundError
from membrane_es.queries.trust import allows
from membrane_es.schema.records import MemoryRecord, TrustContext, copy_record
from membrane_es.schema.timestamps import Timestamp
from membrane_es.schema.validation import check_id, check_moment, check_trust


class EventReader(Protocol):
    def load(self, record_id: str) -> RecordAggregate: ...

    def load_many(self, record_ids: Sequence[str]) -> list[RecordAggregate]: ...

    def load_as_of(self, record_id: str, moment: datetime) -> RecordAggregate: ...

    def record_events(self, record_id: str) -> list[Any]: ...

    def load_at_position(
        self, record_id: str, position: int
    ) -> tuple[RecordAggregate, datetime]: ...


class HistoryEntry(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """One event in a record's life: what happened, when, by whom, and why."""

    version: int
    timestamp: Timestamp
    event: str
    action: str
    actor: str
    rationale: str = ""


def retrieve_by_id(
    reader: EventReader,
    record_id: str,
    trust: TrustContext | None,
    *,
    now: datetime,
    as_of: datetime | None = None,
) -> MemoryRecord:
    """The record in full, now or as it stood at ``as_of``; denied rather than redacted."""
    trust = check_trust(trust)
    check_id("id", record_id)
    if as_of is None:
        aggregate, at = reader.load(record_id), now
    else:
        at = check_moment("as_of", as_of)
        aggregate = reader.load_as_of(record_id, at)
    record = aggregate.view(at)
    if not allows(trust, record):
        raise AccessDeniedError(record_id)
    # A private copy: the caller may mutate it without touching cached state.
    return copy_record(record)


def retrieve_at_position(
    reader: EventReader, record_id: str, trust: TrustContext | None, position: int
) -> MemoryRecord:
    """The record in full as it stood right after log position ``position`` (decay evaluated
    at that event's time); denied rather than redacted."""
    trust = check_trust(trust)
    check_id("id", record_id)
    if position < 1:
        raise NotFoundError(record_id)
    aggregate, at = reader.load_at_position(record_id, position)
    record = aggregate.view(at)
    if not allows(trust, record):
        raise AccessDeniedError(record_id)
    return copy_record(record)


def history(
    reader: EventReader, record_id: str, trust: TrustContext | None, *, now: datetime
) -> list[HistoryEntry]:
    """Every event of a record the caller may read in full, oldest first."""
    trust = check_trust(trust)
    check_id("id", record_id)
    events = reader.record_events(record_id)
    current = reader.load(record_id).view(now)
    if not allows(trust, current):
        raise AccessDeniedError(record_id)
    entries = []
    for event in events:
        entries.append(
            HistoryEntry(
                version=event.originator_version,
                timestamp=event.timestamp,
                event=type(event).__name__,
                action=event.action,
                actor=event.actor,
                rationale=event.audit_rationale(),
            )
        )
    return entries

"""The entries API's writes (seed 003): each reads the entries view, checks the writer's
key, then changes records through the record handlers, all in one unit of work (see
:mod:`membrane_es.schema.entries` for how an entry maps onto records).

Creating an entry creates a semantic record; revising one supersedes its record;
invalidating one retracts it; deleting one retracts it marked ``deleted`` (or, erasing,
forgets every revision); relating two relates their latest records.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from membrane_es.commands.erasure import forget
from membrane_es.commands.handlers import add_relation, create_record, retract, supersede
from membrane_es.commands.messages import (
    AddRelation,
    CreateEntry,
    CreateRecord,
    DeleteEntry,
    Forget,
    InvalidateEntry,
    RelateEntries,
    Retract,
    ReviseEntry,
    Supersede,
)
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.errors import (
    CeilingError,
    DuplicateRelationError,
    EntryNotFoundError,
    ForgottenError,
    ValidationError,
)
from membrane_es.schema.entries import (
    ARTIFACT_REF,
    Entry,
    NewEntry,
    conversation_scope,
    epoch,
)
from membrane_es.schema.enums import MemoryType, ProvenanceKind
from membrane_es.schema.payloads import SemanticPayload, Validity
from membrane_es.schema.records import (
    MemoryRecord,
    Provenance,
    ProvenanceSource,
    TrustContext,
)

_MILLISECONDS_FROM = 10**12  # a created_at above this is in milliseconds (as Arbiter reads it)


class Writer(Protocol):
    """The key asking for a write (:class:`membrane_es.access.ceiling.Caller`): what it
    may write."""

    @property
    def unrestricted(self) -> bool: ...

    def may_write(self, sensitivity: str, scope: str) -> bool: ...


def create_entry(cmd: CreateEntry, uow: UnitOfWork) -> str:
    """The new entry's record id. The entries it supersedes must be active and the writer's
    to change; each is retracted and related to by ``supersedes``."""
    superseded = list(dict.fromkeys(cmd.supersedes))
    olds = [
        _current_record(uow, entry_id, cmd.trust, field="supersedes_ids") for entry_id in superseded
    ]
    for entry_id in superseded:
        _check_writer(uow, entry_id, cmd.writer, field="supersedes_ids")
    created = create_record(
        # an entry is created as given: the entries API has its own supersession
        CreateRecord(record=cmd.record, actor=cmd.actor, rationale=cmd.rationale, resolve=False),
        uow,
    )
    for old in olds:
        retract(
            Retract(
                record_id=old, actor=cmd.actor, rationale=f"superseded by entry record {created.id}"
            ),
            uow,
        )
        add_relation(
            AddRelation(
                source_id=created.id,
                predicate="supersedes",
                target_id=old,
                actor=cmd.actor,
                rationale="",
            ),
            uow,
        )
    return created.id


def revise_entry(cmd: ReviseEntry, uow: UnitOfWork) -> str:
    """The record id of the entry's new revision. A patch that would leave the entry as it
    reads now is refused (:class:`ValidationError` on ``body``): it would only add noise."""
    record_id = _current_record(uow, cmd.entry_id, cmd.trust)
    _check_writer(uow, cmd.entry_id, cmd.writer)
    current = uow.entries.entry(cmd.entry_id, cmd.trust, cmd.tenant)
    if current is None:
        raise EntryNotFoundError(cmd.entry_id)
    old = uow.get(record_id).state.content
    patch = cmd.patch
    revised = NewEntry(
        type=_pick(patch.type, current.type),
        title=_pick(patch.title, current.title),
        content=_pick(patch.content, current.content),
        source=_pick(patch.source, current.source),
        tags=_pick(patch.tags, current.tags),
        artifact_id=_pick(patch.artifact_id, current.artifact_id),
        conversation_id=current.conversation_id,
    )
    if _unchanged(revised, current):
        raise ValidationError("body", "no field to change: the patch equals the entry")
    record = msgspec.structs.replace(
        entry_record(revised), sensitivity=old.sensitivity, scope=old.scope
    )
    new = supersede(
        Supersede(old_id=record_id, new_record=record, actor=cmd.actor, rationale=cmd.rationale),
        uow,
    )
    return new.id


def invalidate_entry(cmd: InvalidateEntry, uow: UnitOfWork) -> None:
    """Retract the entry's active record; its validity ends at ``valid_until`` if given
    (not before the entry's ``valid_from``)."""
    found = uow.entries.current_revision(cmd.entry_id, cmd.trust)
    if found is None:
        raise EntryNotFoundError(cmd.entry_id)
    record_id, valid_from = found
    _check_writer(uow, cmd.entry_id, cmd.writer)
    until = cmd.valid_until
    if until is not None and epoch(until) < valid_from:
        raise ValidationError("when", f"before the entry's valid_from ({valid_from})")
    retract(
        Retract(record_id=record_id, actor=cmd.actor, rationale=cmd.rationale, valid_until=until),
        uow,
    )


def delete_entry(cmd: DeleteEntry, uow: UnitOfWork) -> None:
    """Retract the entry's latest record marked ``deleted``; with ``erase``, forget every
    revision instead (the writer's key must reach every one)."""
    found = uow.entries.latest_revision(cmd.entry_id, cmd.trust)
    if found is None:
        raise EntryNotFoundError(cmd.entry_id)
    revisions = uow.entries.revision_records(cmd.entry_id)
    _check_writer(uow, cmd.entry_id, cmd.writer, every_revision=cmd.erase)
    if not cmd.erase:
        retract(
            Retract(record_id=found, actor=cmd.actor, rationale=cmd.rationale, deleted=True), uow
        )
        return
    for record_id in revisions:
        try:
            forget(Forget(record_id=record_id, actor=cmd.actor, rationale=cmd.rationale), uow)
        except ForgottenError:
            pass  # taken with an earlier revision's erasure


def relate_entries(cmd: RelateEntries, uow: UnitOfWork) -> None:
    """Relate the two entries' latest records; both must be the writer's to change (the edge
    changes what both read as), and the edge must be new."""
    source = uow.entries.latest_revision(cmd.source_id, cmd.trust)
    target = uow.entries.latest_revision(cmd.target_id, cmd.trust)
    if source is None:
        raise ValidationError("source_id", f"entry {cmd.source_id} not found")
    if target is None:
        raise ValidationError("target_id", f"entry {cmd.target_id} not found")
    _check_writer(uow, cmd.source_id, cmd.writer, field="source_id")
    _check_writer(uow, cmd.target_id, cmd.writer, field="target_id")
    existing = uow.entries.relation_id(cmd.source_id, cmd.target_id, cmd.relation, cmd.trust)
    if existing is not None:
        raise DuplicateRelationError(existing)
    add_relation(
        AddRelation(
            source_id=source,
            predicate=cmd.relation,
            target_id=target,
            actor=cmd.actor,
            rationale=cmd.rationale,
        ),
        uow,
    )


ENTRY_HANDLERS: dict[type[Any], Callable[[Any, UnitOfWork], Any]] = {
    CreateEntry: create_entry,
    ReviseEntry: revise_entry,
    InvalidateEntry: invalidate_entry,
    DeleteEntry: delete_entry,
    RelateEntries: relate_entries,
}


def _current_record(
    uow: UnitOfWork, entry_id: int, trust: TrustContext | None, field: str = ""
) -> str:
    found = uow.entries.current_revision(entry_id, trust)
    if found is None:
        if field:
            raise ValidationError(field, f"entry {entry_id} not found or not active")
        raise EntryNotFoundError(entry_id)
    return found[0]


def _check_writer(
    uow: UnitOfWork,
    entry_id: int,
    writer: Writer | None,
    *,
    field: str = "",
    every_revision: bool = False,
) -> None:
    """Refuse a write to an entry (one the caller can see) that ``writer``'s key may not
    write: its latest revision, or with ``every_revision`` any of them."""
    if writer is None or writer.unrestricted:
        return
    reach = uow.entries.revision_reach(entry_id, every=every_revision)
    if not all(writer.may_write(sensitivity, scope) for sensitivity, scope in reach):
        raise CeilingError(
            field or "entry", f"entry {entry_id} is outside the scopes this key may write"
        )


def _unchanged(revised: NewEntry, current: Entry) -> bool:
    """Whether a revision would read exactly as the entry does now (tags as stored: once
    each, in order)."""
    return (
        revised.type == current.type
        and revised.title == current.title
        and revised.content == current.content
        and revised.source == current.source
        and list(dict.fromkeys(revised.tags)) == current.tags
        and revised.artifact_id == current.artifact_id
    )


def _pick(value: Any, default: Any) -> Any:
    return default if value is msgspec.UNSET else value


def entry_time(value: int) -> datetime:
    """An entry's ``created_at`` override (seconds, or milliseconds above 10¹²)."""
    seconds = value / 1000 if value > _MILLISECONDS_FROM else value
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise ValidationError("created_at", f"{value} is not a moment") from None


def entry_record(entry: NewEntry) -> MemoryRecord:
    """The semantic record an entry is stored as (see :mod:`membrane_es.schema.entries`)."""
    validity = Validity()
    if entry.created_at is not None:
        validity = Validity(mode="timeboxed", start=entry_time(entry.created_at))
    sources = [ProvenanceSource(kind=ProvenanceKind.EVENT, ref="memory-entries")]
    if entry.artifact_id:
        sources.append(
            ProvenanceSource(kind=ProvenanceKind.ARTIFACT, ref=f"{ARTIFACT_REF}{entry.artifact_id}")
        )
    return MemoryRecord(
        type=MemoryType.SEMANTIC,
        scope=conversation_scope(entry.conversation_id),
        tags=list(dict.fromkeys(entry.tags)),  # a record's tags are distinct
        payload=SemanticPayload(
            subject=entry.title, predicate=entry.type, object=entry.content, validity=validity
        ),
        provenance=Provenance(sources=sources, created_by=entry.source),
    )

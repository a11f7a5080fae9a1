"""One handler per command: validate, load, call the aggregates, save them all at once.

Every handler validates its whole input before it loads or writes anything, so bad input
raises :class:`~membrane_es.errors.ValidationError` and leaves the log untouched; and every
operation that touches several records saves them in a single atomic write.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from membrane_es.aggregates.identity import new_record_id
from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.commands.capture import capture_memory
from membrane_es.commands.consolidation import consolidate
from membrane_es.commands.erasure import forget
from membrane_es.commands.ingest import (
    ingest_event,
    ingest_observation,
    ingest_outcome,
    ingest_tool_output,
    ingest_working_state,
)
from membrane_es.commands.messages import (
    AddRelation,
    CaptureMemory,
    Command,
    Consolidate,
    Contest,
    CreateRecord,
    Forget,
    Fork,
    IngestEvent,
    IngestObservation,
    IngestOutcome,
    IngestToolOutput,
    IngestWorkingState,
    Merge,
    Penalize,
    Pin,
    RecordOutcome,
    Reinforce,
    Retract,
    Supersede,
    Unpin,
)
from membrane_es.commands.resolution import (
    OUTDATED,
    REINFORCED,
    answer,
    corroborate,
    decide,
    resolving,
    settle,
    with_supersedes,
    write_source,
)
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.errors import AlreadyExistsError, NotFoundError, ValidationError
from membrane_es.schema.enums import GraphPredicate, MemoryType, OutcomeStatus, ProvenanceKind
from membrane_es.schema.payloads import RevisionState, SemanticPayload
from membrane_es.schema.records import MemoryRecord, ProvenanceSource, Relation, copy_record
from membrane_es.schema.validation import (
    VectorInput,
    check_amount,
    check_flag,
    check_id,
    check_ids,
    check_moment,
    check_text,
    check_unit_interval,
    coerce_record,
    require_evidence,
)

replace = msgspec.structs.replace


# --- record creation ------------------------------------------------------------------------


def create_record(cmd: CreateRecord, uow: UnitOfWork) -> MemoryRecord:
    """Store a record as given; ids, times and relation stamps are filled in when absent.

    Resolved on write unless the call or the store says not (:mod:`.resolution`): a record
    matching an active one reinforces it, a changed single-valued fact supersedes the old."""
    _check_reason(cmd)
    embed = check_flag("embed", cmd.embed)
    if not embed and cmd.embedding is not None:
        raise ValidationError("embedding", "a record stored without a vector takes none")
    record = coerce_record(cmd.record, "record")
    generated = not record.id
    resolve = resolving(uow, cmd.resolve, caller_id=not generated)
    record = replace(record, id=record.id or new_record_id())
    _check_relation_targets(record, "record", uow)
    _check_new_id(record.id, uow, generated=generated)
    at = uow.now()
    record = _stamped(record, at, keep_created=True)
    decision = decide(uow, record) if resolve else None
    if decision is not None and decision.outcome == REINFORCED:
        source = write_source(record, cmd.actor, at)
        matched = corroborate(uow, decision, source, cmd.actor)
        uow.save(matched)
        return answer(uow, matched, decision)
    if decision is not None:
        record = with_supersedes(record, decision, at)
    aggregate = RecordAggregate.create(
        record,
        actor=cmd.actor,
        rationale=cmd.rationale,
        at=at,
        embedding=uow.embed(record, cmd.embedding) if embed else None,
    )
    touched = settle(uow, decision, aggregate, cmd.actor) if decision is not None else []
    uow.save(aggregate, *touched)
    # as of its creation, unless resolution changed it since (stored already superseded)
    changed = decision is not None and decision.outcome == OUTDATED
    return answer(uow, aggregate, decision, None if changed else at)


def supersede(cmd: Supersede, uow: UnitOfWork) -> MemoryRecord:
    """Replace a record by a new one; the old is retracted and linked by ``supersedes``."""
    check_id("old_id", cmd.old_id)
    _check_reason(cmd)
    new = coerce_record(cmd.new_record, "new_record")
    old = uow.get(cmd.old_id)
    new = _revision_record(new, [old], "new_record", uow, widen=cmd.widen)

    old.supersede(new.id, actor=cmd.actor, rationale=cmd.rationale, at=uow.now())
    at = uow.now()
    new = _with_source(new, ref=cmd.old_id, actor=cmd.actor, at=at)
    payload = new.payload
    if isinstance(payload, SemanticPayload):
        revision = payload.revision or RevisionState()
        revision = replace(revision, supersedes=cmd.old_id, status="active")
        new = replace(new, payload=replace(payload, revision=revision))
    new = _with_relation(new, GraphPredicate.SUPERSEDES, cmd.old_id, at)
    rationale = f"supersedes {cmd.old_id}: {cmd.rationale}"
    return _create_revision(new, rationale, cmd, at, uow, [old], embedding=cmd.embedding)


def fork(cmd: Fork, uow: UnitOfWork) -> MemoryRecord:
    """Derive a conditional variant; the source stays active."""
    check_id("source_id", cmd.source_id)
    _check_reason(cmd)
    new = coerce_record(cmd.forked_record, "forked_record")
    source = uow.get(cmd.source_id)
    new = _revision_record(new, [source], "forked_record", uow, replaces=False, widen=cmd.widen)

    source.fork(new.id, actor=cmd.actor, rationale=cmd.rationale, at=uow.now())
    at = uow.now()
    new = _with_relation(new, GraphPredicate.DERIVED_FROM, cmd.source_id, at)
    rationale = f"forked from {cmd.source_id}: {cmd.rationale}"
    return _create_revision(new, rationale, cmd, at, uow, [source])


def merge(cmd: Merge, uow: UnitOfWork) -> MemoryRecord:
    """Combine sources into one record; every source is retracted, all in one write."""
    ids = check_ids("ids", cmd.record_ids)
    _check_reason(cmd)
    new = coerce_record(cmd.merged_record, "merged_record")
    unique_ids = list(dict.fromkeys(ids))
    sources = [uow.get(record_id) for record_id in unique_ids]
    new = _revision_record(new, sources, "merged_record", uow, widen=cmd.widen)

    for source in sources:
        source.merge_into(new.id, actor=cmd.actor, rationale=cmd.rationale, at=uow.now())
    at = uow.now()
    for record_id in unique_ids:
        new = _with_relation(new, GraphPredicate.DERIVED_FROM, record_id, at)
    rationale = f"merged from [{' '.join(ids)}]: {cmd.rationale}"
    return _create_revision(new, rationale, cmd, at, uow, sources)


def _revision_record(
    new: MemoryRecord,
    sources: list[RecordAggregate],
    field: str,
    uow: UnitOfWork,
    *,
    replaces: bool = True,
    widen: bool = False,
) -> MemoryRecord:
    """Check a revision may go ahead (in the reference's order) and give the new record an id
    (and, unless ``widen``, a reach within its sources': :func:`_within_reach`).

    ``replaces``: the sources are retracted in favour of the new record (supersede, merge),
    which may happen to a record only once.
    """
    for source in sources:
        if replaces:
            source.check_replaceable()
        else:
            source.check_revisable()
    require_evidence(new, field)
    if not check_flag("widen", widen):
        new = _within_reach(new, [s.state.content for s in sources], field)
    generated = not new.id
    new = replace(new, id=new.id or new_record_id())
    _check_relation_targets(new, field, uow)
    _check_new_id(new.id, uow, generated=generated)
    return new


def _within_reach(new: MemoryRecord, sources: list[MemoryRecord], field: str) -> MemoryRecord:
    """A revision is never readable by a caller who could not read what it revises: it takes
    the sources' scope when it names none (a merge: their common scope), and at least the
    highest of their sensitivities. A scope of its own other than theirs, or a merge of
    sources in different scopes, is refused: widening is the caller's explicit choice
    (``widen``)."""
    scopes = sorted({source.scope for source in sources if source.scope})
    scope = new.scope
    if len(scopes) > 1:
        raise ValidationError(
            f"{field}.scope",
            f"the sources are in different scopes ({', '.join(scopes)}): no one scope keeps "
            "the merged record from callers who could not read one of them; pass widen=true "
            "to choose its scope anyway",
        )
    if scopes and scope != scopes[0]:
        if scope:
            raise ValidationError(
                f"{field}.scope",
                f"{scope!r} would make a revision of a record in {scopes[0]!r} readable by "
                "callers who could not read it; give no scope (it takes the record's) or "
                "pass widen=true",
            )
        scope = scopes[0]
    highest = max((source.sensitivity for source in sources), key=lambda s: s.level)
    sensitivity = max(new.sensitivity, highest, key=lambda s: s.level)
    return replace(new, scope=scope, sensitivity=sensitivity)


def _create_revision(
    new: MemoryRecord,
    rationale: str,
    cmd: Command,
    at: datetime,
    uow: UnitOfWork,
    sources: list[RecordAggregate],
    *,
    embedding: VectorInput | None = None,
) -> MemoryRecord:
    """Create the revision's new record and save it with its sources in one write
    (``embedding``: the caller's vector for it, else the embedder's)."""
    created = RecordAggregate.create(
        _stamped(new, at),
        actor=cmd.actor,
        rationale=rationale,
        at=at,
        embedding=uow.embed(new, embedding),
    )
    uow.save(*sources, created)
    return copy_record(created.view(at))


# --- single-record revisions ----------------------------------------------------------------


def _change_one(
    cmd: Retract | Reinforce | Penalize | Pin | Unpin,
    uow: UnitOfWork,
    change: Callable[[RecordAggregate, datetime], None],
) -> None:
    """The shape of every single-record change: check, load, change at the next time, save."""
    check_id("id", cmd.record_id)
    _check_reason(cmd)
    record = uow.get(cmd.record_id)
    change(record, uow.now())
    uow.save(record)


def retract(cmd: Retract, uow: UnitOfWork) -> None:
    until = None if cmd.valid_until is None else check_moment("valid_until", cmd.valid_until)
    deleted = check_flag("deleted", cmd.deleted)
    _change_one(
        cmd,
        uow,
        lambda r, at: r.retract(
            actor=cmd.actor, rationale=cmd.rationale, at=at, valid_until=until, deleted=deleted
        ),
    )


def contest(cmd: Contest, uow: UnitOfWork) -> None:
    """Mark a record contested; a non-empty ``contesting_ref`` must name an existing record."""
    check_id("id", cmd.record_id)
    check_text("contesting_ref", cmd.contesting_ref)
    _check_reason(cmd)
    record = uow.get(cmd.record_id)
    record.check_revisable()
    if cmd.contesting_ref and not uow.exists(cmd.contesting_ref):
        raise NotFoundError(cmd.contesting_ref)
    record.contest(cmd.contesting_ref, actor=cmd.actor, rationale=cmd.rationale, at=uow.now())
    uow.save(record)


def reinforce(cmd: Reinforce, uow: UnitOfWork) -> None:
    _change_one(
        cmd, uow, lambda r, at: r.reinforce(actor=cmd.actor, rationale=cmd.rationale, at=at)
    )


def penalize(cmd: Penalize, uow: UnitOfWork) -> None:
    amount = check_amount("amount", cmd.amount)  # a float: any int the caller gave is stored
    _change_one(
        cmd,
        uow,
        lambda r, at: r.penalize(amount, actor=cmd.actor, rationale=cmd.rationale, at=at),
    )


def add_relation(cmd: AddRelation, uow: UnitOfWork) -> None:
    """Add ``source -predicate-> target`` (and ``target -inverse-> source``) atomically."""
    check_id("source_id", cmd.source_id)
    check_id("target_id", cmd.target_id)
    predicate = check_text("predicate", cmd.predicate, required=True).strip().lower()
    inverse = check_text("inverse", cmd.inverse).strip().lower()
    weight = check_unit_interval("weight", cmd.weight) or 1.0
    _check_reason(cmd)
    source = uow.get(cmd.source_id)
    if cmd.target_id == cmd.source_id:
        raise ValidationError("target_id", "a record cannot relate to itself")
    target = uow.get(cmd.target_id)
    at = uow.now()
    source.add_relation(
        Relation(predicate=predicate, target_id=cmd.target_id, weight=weight, created_at=at),
        actor=cmd.actor,
        rationale=cmd.rationale,
        at=at,
    )
    if not inverse:
        uow.save(source)
        return
    at = uow.now()
    target.add_relation(
        Relation(predicate=inverse, target_id=cmd.source_id, weight=weight, created_at=at),
        actor=cmd.actor,
        rationale=cmd.rationale,
        at=at,
    )
    uow.save(source, target)


def record_outcome(cmd: RecordOutcome, uow: UnitOfWork) -> None:
    """Attach an outcome to an episodic record (evidence, so not a revision)."""
    check_id("target_record_id", cmd.record_id)
    statuses = [s.value for s in OutcomeStatus]
    if cmd.status not in statuses:
        raise ValidationError("outcome_status", f"invalid outcome status {cmd.status!r}")
    _check_reason(cmd)
    record = uow.get(cmd.record_id)
    if record.memory_type is not MemoryType.EPISODIC:
        raise ValidationError("target_record_id", f"target record {cmd.record_id} is not episodic")
    record.record_outcome(cmd.status, actor=cmd.actor, rationale=cmd.rationale, at=uow.now())
    uow.save(record)


def pin(cmd: Pin, uow: UnitOfWork) -> None:
    _change_one(cmd, uow, lambda r, at: r.pin(actor=cmd.actor, rationale=cmd.rationale, at=at))


def unpin(cmd: Unpin, uow: UnitOfWork) -> None:
    _change_one(cmd, uow, lambda r, at: r.unpin(actor=cmd.actor, rationale=cmd.rationale, at=at))


# --- helpers --------------------------------------------------------------------------------


def _check_reason(cmd: Command) -> None:
    check_text("actor", cmd.actor)
    check_text("rationale", cmd.rationale)


def _check_new_id(record_id: str, uow: UnitOfWork, *, generated: bool) -> None:
    """Refuse an id the caller gave that a record already has. An id made here (a UUIDv4:
    122 random bits) is not looked up: it names no record written before, and the log
    refuses a second creation under one id whatever the reason. Looking it up would read a
    page of the log's index, at random, for every record created."""
    if not generated and uow.exists(record_id):
        raise AlreadyExistsError(record_id)


def _check_relation_targets(record: MemoryRecord, field: str, uow: UnitOfWork) -> None:
    """Relations point at existing records (the reference store's foreign key)."""
    for i, relation in enumerate(record.relations):
        if relation.target_id != record.id and not uow.exists(relation.target_id):
            raise ValidationError(
                f"{field}.relations[{i}].target_id",
                f"target record {relation.target_id} does not exist",
            )


def _stamped(record: MemoryRecord, at: datetime, *, keep_created: bool = False) -> MemoryRecord:
    """Fill in the times the engine owns: created/updated, decay clock, relation stamps.

    Revisions overwrite created_at/updated_at (as the reference does); a direct create keeps
    times the caller supplied, so history imported from elsewhere keeps its dates.
    """
    created = (record.created_at or at) if keep_created else at
    updated = (record.updated_at or created) if keep_created else at
    lifecycle = record.lifecycle
    if lifecycle.last_reinforced_at is None:
        lifecycle = replace(lifecycle, last_reinforced_at=created)
    relations = [
        replace(r, weight=r.weight or 1.0, created_at=r.created_at or at) for r in record.relations
    ]
    return replace(
        record, created_at=created, updated_at=updated, lifecycle=lifecycle, relations=relations
    )


def _with_relation(
    record: MemoryRecord, predicate: GraphPredicate, target_id: str, at: datetime
) -> MemoryRecord:
    relation = Relation(predicate=predicate.value, target_id=target_id, weight=1.0, created_at=at)
    kept = [
        r
        for r in record.relations
        if not (r.predicate == relation.predicate and r.target_id == target_id)
    ]
    return replace(record, relations=[*kept, relation])


def _with_source(record: MemoryRecord, *, ref: str, actor: str, at: datetime) -> MemoryRecord:
    source = ProvenanceSource(kind=ProvenanceKind.EVENT, ref=ref, created_by=actor, timestamp=at)
    provenance = replace(record.provenance, sources=[*record.provenance.sources, source])
    return replace(record, provenance=provenance)


# The registry: each command type maps to exactly one handler.
RECORD_HANDLERS: dict[type[Command], Callable[[Any, UnitOfWork], Any]] = {
    CreateRecord: create_record,
    Supersede: supersede,
    Fork: fork,
    Merge: merge,
    Retract: retract,
    Forget: forget,
    Contest: contest,
    Reinforce: reinforce,
    Penalize: penalize,
    AddRelation: add_relation,
    RecordOutcome: record_outcome,
    Pin: pin,
    Unpin: unpin,
    CaptureMemory: capture_memory,
    IngestEvent: ingest_event,
    IngestToolOutput: ingest_tool_output,
    IngestObservation: ingest_observation,
    IngestOutcome: ingest_outcome,
    IngestWorkingState: ingest_working_state,
    Consolidate: consolidate,
}

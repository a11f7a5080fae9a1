"""The ingest operations of the older API (spec §2.1–2.3; history §2.1).

Each turns one observation of the agent's world into a record through the reference's fixed
pipeline: a *candidate* of some kind is classified into a memory type, checked by the policy
(whose errors read ``ingestion policy: …``), given that kind's confidence and half-life, and
built into a record whose provenance names the source. The builders (:mod:`.builders`) and
input checks (:mod:`.inputs`) are shared with capture (:mod:`.capture`).

Defaults (``DefaultPolicyDefaults``): sensitivity ``low`` unless the caller (or the engine's
configured default, applied by the facade) gives one; salience 1.0; ``auto_prune``; the
engine's long-lived half-life by memory type
(:data:`membrane_es.timekeeping.decay.ENGINE_HALF_LIFE`:
episodic a day, working 7 days, every other type a year). The record's ``created_at`` is the
request timestamp — when it happened (event time; default now) — and it fades from then; the
log keeps when it was written.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import msgspec

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.commands.builders import (
    EVENT,
    INGESTION_ACTOR,
    OBSERVATION,
    TOOL_OUTPUT,
    WORKING_STATE,
    build_record,
    create_ingested,
    event_record,
    tool_output_record,
    working_record,
)
from membrane_es.commands.inputs import (
    check_tag_list,
    check_timestamp,
    json_value,
    plain_text,
    policy_error,
    request_time,
)
from membrane_es.commands.messages import (
    IngestEvent,
    IngestObservation,
    IngestOutcome,
    IngestToolOutput,
    IngestWorkingState,
)
from membrane_es.commands.resolution import (
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
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import (
    GraphPredicate,
    InterpretationStatus,
    MemoryType,
    OutcomeStatus,
    TaskState,
)
from membrane_es.schema.payloads import (
    Constraint,
    EntityPayload,
    ProvenanceRef,
    SemanticPayload,
    Validity,
)
from membrane_es.schema.records import (
    Interpretation,
    MemoryRecord,
    Mention,
    Relation,
    copy_record,
)
from membrane_es.schema.validation import check_sensitivity

_TASK_STATES = ", ".join(s.value for s in TaskState)


# --- handlers ---------------------------------------------------------------------------------


_Ingest = IngestEvent | IngestToolOutput | IngestObservation | IngestWorkingState


def _check_common(cmd: _Ingest) -> tuple[str, list[str], str, str]:
    """source, tags, scope, sensitivity, checked (the boundary's limits)."""
    source = plain_text("source", cmd.source)
    tags = check_tag_list("tags", cmd.tags)
    scope = plain_text("scope", cmd.scope)
    sensitivity = check_sensitivity("sensitivity", cmd.sensitivity)
    return source, tags, scope, sensitivity


def ingest_event(cmd: IngestEvent, uow: UnitOfWork) -> MemoryRecord:
    source, tags, scope, sensitivity = _check_common(cmd)
    event_kind = plain_text("event_kind", cmd.event_kind)
    ref = plain_text("ref", cmd.ref)
    summary = plain_text("summary", cmd.summary)
    timestamp = request_time(cmd.timestamp, uow)
    at = uow.now()
    record = event_record(
        source=source,
        event_kind=event_kind,
        ref=ref,
        summary=summary,
        timestamp=timestamp,
        at=at,
        tags=tags,
        scope=scope,
        sensitivity=sensitivity,
    )
    return _save_new(record, EVENT, source, uow)


def ingest_tool_output(cmd: IngestToolOutput, uow: UnitOfWork) -> MemoryRecord:
    source, tags, scope, sensitivity = _check_common(cmd)
    tool_name = plain_text("tool_name", cmd.tool_name)
    if not isinstance(cmd.args, Mapping):
        raise ValidationError("args", "args must be an object")
    args = json_value("args", dict(cmd.args))
    result = json_value("result", cmd.result)
    depends_on = [plain_text(f"depends_on[{i}]", d) for i, d in enumerate(cmd.depends_on)]
    timestamp = request_time(cmd.timestamp, uow)
    at = uow.now()
    record = tool_output_record(
        source=source,
        tool_name=tool_name,
        args=args,
        result=result,
        depends_on=depends_on,
        timestamp=timestamp,
        at=at,
        tags=tags,
        scope=scope,
        sensitivity=sensitivity,
    )
    return _save_new(record, TOOL_OUTPUT, source, uow)


def ingest_observation(cmd: IngestObservation, uow: UnitOfWork) -> MemoryRecord:
    """A semantic fact; a subject (or string object) naming a known entity is replaced by the
    entity's id and tied to it both ways, all in one write (spec §2.3, A6)."""
    source, tags, scope, sensitivity = _check_common(cmd)
    subject = plain_text("subject", cmd.subject)
    predicate = plain_text("predicate", cmd.predicate)
    obj = json_value("object", cmd.object)
    timestamp = request_time(cmd.timestamp, uow)
    if not source:
        raise policy_error("source", "candidate source is required")
    if not subject:
        raise policy_error("subject", "subject is required for observation candidates")
    if not predicate:
        raise policy_error("predicate", "predicate is required for observation candidates")

    subject_entity = _entity_named(subject, scope, uow)
    object_entity = _entity_named(obj, scope, uow)
    at = uow.now()  # after loading: every event here is later than what it builds on
    touched: list[RecordAggregate] = []
    relations: list[Relation] = []
    # The words the caller used for each entity it named: the fact is searched by them, not
    # by the entity's id (as capture keeps them).
    mentions: list[Mention] = []
    if subject_entity is not None:
        mentions.append(_mention(subject, subject_entity))
        subject = subject_entity.record_id
        touched.append(subject_entity)
        relations.append(_relation(GraphPredicate.SUBJECT_ENTITY, subject, at))
    if object_entity is not None:
        mentions.append(_mention(obj, object_entity))
        obj = object_entity.record_id
        if object_entity is not subject_entity:
            touched.append(object_entity)
        relations.append(_relation(GraphPredicate.OBJECT_ENTITY, obj, at))

    payload = SemanticPayload(
        subject=subject,
        predicate=predicate,
        object=obj,
        validity=Validity(mode="global"),
        evidence=[ProvenanceRef(source_type="observation", source_id=source, timestamp=timestamp)],
        revision_policy="replace",
    )
    record = build_record(
        OBSERVATION,
        payload,
        source=source,
        timestamp=timestamp,
        at=at,
        ref=source,
        tags=tags,
        scope=scope,
        sensitivity=sensitivity,
    )
    record = msgspec.structs.replace(
        record,
        relations=relations,
        interpretation=Interpretation(
            status=InterpretationStatus.RESOLVED.value,
            proposed_type=MemoryType.SEMANTIC.value,
            mentions=mentions,
        )
        if mentions
        else None,
    )
    decision = decide(uow, record) if resolving(uow, cmd.resolve) else None
    if decision is not None and decision.outcome == REINFORCED:
        matched = corroborate(uow, decision, write_source(record, source, at), source)
        uow.save(matched)
        return answer(uow, matched, decision)
    if decision is not None:
        record = with_supersedes(record, decision, at)
    created = create_ingested(record, OBSERVATION, source, uow)
    touched.extend(settle(uow, decision, created, source) if decision is not None else [])
    inverses = {
        GraphPredicate.SUBJECT_ENTITY.value: GraphPredicate.FACT_SUBJECT_OF,
        GraphPredicate.OBJECT_ENTITY.value: GraphPredicate.FACT_OBJECT_OF,
    }
    for relation in relations:
        entity = next(a for a in touched if a.record_id == relation.target_id)
        stamp = uow.now()
        entity.add_relation(
            _relation(inverses[relation.predicate], record.id, at),
            actor=INGESTION_ACTOR,
            rationale=f"Ingested {OBSERVATION} from {source}",
            at=stamp,
        )
    uow.save(created, *touched)
    return answer(uow, created, decision)


def ingest_outcome(cmd: IngestOutcome, uow: UnitOfWork) -> MemoryRecord:
    """Record an episode's outcome on its episodic record (provenance and audit by source)."""
    source = plain_text("source", cmd.source)
    target_id = plain_text("target_record_id", cmd.target_record_id)
    status = plain_text("outcome_status", cmd.outcome_status)
    check_timestamp(cmd.timestamp)  # checked; the outcome is dated by its event
    if not source:
        raise policy_error("source", "candidate source is required")
    if not target_id:
        raise policy_error(
            "target_record_id", "target record ID is required for outcome candidates"
        )
    if not status:
        raise policy_error("outcome_status", "outcome status is required for outcome candidates")
    if status not in OutcomeStatus.__members__.values():
        raise policy_error("outcome_status", f'invalid outcome status "{status}"')
    record = uow.get(target_id)
    if record.memory_type is not MemoryType.EPISODIC:
        raise ValidationError(
            "target_record_id", f"ingestion: target record {target_id} is not episodic"
        )
    record.record_outcome(status, actor=source, rationale="", at=uow.now())
    uow.save(record)
    return copy_record(record.view(uow.now()))


def ingest_working_state(cmd: IngestWorkingState, uow: UnitOfWork) -> MemoryRecord:
    source, tags, scope, sensitivity = _check_common(cmd)
    thread_id = plain_text("thread_id", cmd.thread_id)
    state = plain_text("state", cmd.state)
    if state and state not in TaskState.__members__.values():
        raise ValidationError("state", f"state must be one of: {_TASK_STATES}")
    context_summary = plain_text("context_summary", cmd.context_summary)
    next_actions = [plain_text(f"next_actions[{i}]", a) for i, a in enumerate(cmd.next_actions)]
    open_questions = [
        plain_text(f"open_questions[{i}]", q) for i, q in enumerate(cmd.open_questions)
    ]
    constraints = _constraints(cmd.active_constraints)
    timestamp = request_time(cmd.timestamp, uow)
    at = uow.now()
    record = working_record(
        source=source,
        thread_id=thread_id,
        state=state,
        next_actions=next_actions,
        open_questions=open_questions,
        context_summary=context_summary,
        active_constraints=constraints,
        timestamp=timestamp,
        at=at,
        tags=tags,
        scope=scope,
        sensitivity=sensitivity,
    )
    return _save_new(record, WORKING_STATE, source, uow)


# --- helpers ----------------------------------------------------------------------------------


def _save_new(record: MemoryRecord, kind: str, source: str, uow: UnitOfWork) -> MemoryRecord:
    created = create_ingested(record, kind, source, uow)
    uow.save(created)
    return copy_record(created.view(uow.now()))


def _constraints(values: list[Any]) -> list[Constraint]:
    if isinstance(values, str | bytes) or not isinstance(values, list | tuple):
        raise ValidationError("active_constraints", "active_constraints must be a list")
    plain = [msgspec.to_builtins(v) if isinstance(v, Constraint) else v for v in values]
    data = json_value("active_constraints", plain)
    try:
        return msgspec.convert(data, list[Constraint], strict=False)
    except msgspec.ValidationError as exc:
        raise ValidationError("active_constraints", str(exc)) from None


def _entity_named(term: Any, scope: str, uow: UnitOfWork) -> RecordAggregate | None:
    """The entity ``FindEntitiesByTerm(term, scope, 1)`` finds, as an aggregate to relate."""
    if not isinstance(term, str):
        return None
    found = uow.find_entities(term, scope, 1)
    if not found or not isinstance(found[0].payload, EntityPayload):
        return None
    return uow.get(found[0].id)


def _mention(words: str, entity: RecordAggregate) -> Mention:
    payload = entity.state.content.payload
    kind = payload.primary_type if isinstance(payload, EntityPayload) else ""
    return Mention(
        surface=words, entity_kind=kind, canonical_entity_id=entity.record_id, confidence=1.0
    )


def _relation(predicate: GraphPredicate, target_id: str, at: datetime) -> Relation:
    return Relation(predicate=predicate.value, target_id=target_id, weight=1.0, created_at=at)

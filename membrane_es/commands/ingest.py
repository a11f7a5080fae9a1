"""The ingest operations of the older API (spec §2.1–2.3; history §2.1).

Each turns one observation of the agent's world into a record through the reference's fixed
pipeline: a *candidate* of some kind is classified into a memory type, checked by the policy
(whose errors read ``ingestion policy: …``), given that kind's confidence and half-life, and
built into a record whose provenance names the source. Capture (:mod:`.capture`) builds its
primary record with the same builders.

Defaults (``DefaultPolicyDefaults``): sensitivity ``low`` unless the caller (or the engine's
configured default, applied by the facade) gives one; salience 1.0; ``auto_prune``; half-life
by memory type: episodic 1 h, working 1 day, every other type 30 days. The record's
``created_at`` is the moment it is written; the request timestamp dates its provenance and its
timeline entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import msgspec

from membrane_es.aggregates.identity import new_record_id
from membrane_es.aggregates.memory_record import MemoryRecord
from membrane_es.commands.messages import (
    IngestEvent,
    IngestObservation,
    IngestOutcome,
    IngestToolOutput,
    IngestWorkingState,
)
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import (
    DeletionPolicy,
    GraphPredicate,
    MemoryType,
    OutcomeStatus,
    ProvenanceKind,
    Sensitivity,
    TaskState,
)
from membrane_es.schema.payloads import (
    Constraint,
    EntityPayload,
    EnvironmentSnapshot,
    EpisodicPayload,
    Payload,
    ProvenanceRef,
    SemanticPayload,
    TimelineEvent,
    ToolNode,
    Validity,
    WorkingPayload,
)
from membrane_es.schema.records import (
    DecayProfile,
    Lifecycle,
    Provenance,
    ProvenanceSource,
    Relation,
    copy_record,
)
from membrane_es.schema.records import MemoryRecord as RecordData
from membrane_es.schema.timestamps import Timestamp, utc
from membrane_es.schema.validation import (
    MAX_PAYLOAD_BYTES,
    check_tags,
    check_text,
    validate_record,
)

INGESTION_ACTOR = "ingestion-service"
DEFAULT_SENSITIVITY = Sensitivity.LOW.value
INITIAL_SALIENCE = 1.0

# Candidate kinds (the classifier's input) and what the policy gives each.
EVENT, TOOL_OUTPUT, OBSERVATION, OUTCOME, WORKING_STATE = (
    "event",
    "tool_output",
    "observation",
    "outcome",
    "working_state",
)
MEMORY_TYPE_OF_KIND: dict[str, MemoryType] = {
    EVENT: MemoryType.EPISODIC,
    TOOL_OUTPUT: MemoryType.EPISODIC,
    OBSERVATION: MemoryType.SEMANTIC,
    OUTCOME: MemoryType.EPISODIC,
    WORKING_STATE: MemoryType.WORKING,
}
CONFIDENCE_OF_KIND: dict[str, float] = {
    EVENT: 0.8,
    TOOL_OUTPUT: 0.9,
    OBSERVATION: 0.7,
    OUTCOME: 0.85,
    WORKING_STATE: 1.0,
}
UNKNOWN_KIND_CONFIDENCE = 0.5
HALF_LIFE_OF_TYPE: dict[MemoryType, int] = {
    MemoryType.EPISODIC: 3_600,
    MemoryType.WORKING: 86_400,
    MemoryType.SEMANTIC: 2_592_000,
}
OTHER_HALF_LIFE = HALF_LIFE_OF_TYPE[MemoryType.SEMANTIC]
PROVENANCE_KIND_OF_KIND: dict[str, ProvenanceKind] = {
    EVENT: ProvenanceKind.EVENT,
    TOOL_OUTPUT: ProvenanceKind.TOOL_CALL,
    OBSERVATION: ProvenanceKind.OBSERVATION,
    OUTCOME: ProvenanceKind.OUTCOME,
    WORKING_STATE: ProvenanceKind.EVENT,
}

_SENSITIVITIES = ", ".join(s.value for s in Sensitivity)
_TASK_STATES = ", ".join(s.value for s in TaskState)


# --- input checks shared with capture ---------------------------------------------------------


def policy_error(field: str, reason: str) -> ValidationError:
    """The policy engine's rejection (the reference's ``ingestion policy: <reason>``)."""
    return ValidationError(field, f"ingestion policy: {reason}")


def plain_text(field: str, value: Any) -> str:
    """A string input (a ``str`` enum member becomes its plain value), at most 100,000 bytes."""
    if isinstance(value, str):
        value = str.__str__(value)
    return check_text(field, value)


def check_sensitivity(field: str, value: Any) -> str:
    """Empty, or one of the five sensitivity levels."""
    text = plain_text(field, value)
    if text and text not in Sensitivity.__members__.values():
        raise ValidationError(field, f"{field} must be one of: {_SENSITIVITIES}")
    return text


def check_tag_list(field: str, tags: Iterable[str] | None) -> list[str]:
    return [str.__str__(t) if isinstance(t, str) else t for t in check_tags(field, tags or [])]


def json_value(field: str, value: Any) -> Any:
    """``value`` as plain JSON data (dicts keep their key order), at most 10 MiB encoded."""
    try:
        raw = msgspec.json.encode(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(field, f"{field} must be JSON-encodable: {exc}") from None
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise ValidationError(
            field, f"{field} exceeds maximum payload size of {MAX_PAYLOAD_BYTES} bytes"
        )
    return msgspec.json.decode(raw)


def request_time(value: datetime | str | None, uow: UnitOfWork) -> datetime:
    """The request's timestamp: a timezone-aware datetime or an RFC 3339 string; none: now."""
    given = check_timestamp(value)
    return uow.now() if given is None else given


def check_timestamp(value: datetime | str | None) -> datetime | None:
    """A request timestamp as a UTC datetime (None or "" stay None: "now")."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        try:
            return utc(value)
        except ValueError as exc:
            raise ValidationError("timestamp", f"invalid timestamp: {exc}") from None
    if isinstance(value, str):
        try:
            return utc(msgspec.convert(value, Timestamp))
        except msgspec.ValidationError as exc:
            raise ValidationError("timestamp", f"invalid timestamp: {exc}") from None
    raise ValidationError(
        "timestamp", "invalid timestamp: must be a datetime or an RFC 3339 string"
    )


def resolve_sensitivity(given: str) -> str:
    return given or DEFAULT_SENSITIVITY


# --- the record builder (``buildRecord``) -----------------------------------------------------


def build_record(
    kind: str,
    payload: Payload,
    *,
    source: str,
    timestamp: datetime,
    at: datetime,
    ref: str,
    tags: list[str],
    scope: str,
    sensitivity: str,
) -> RecordData:
    """A new record for a candidate of ``kind``: classified, given the policy's confidence,
    salience and lifecycle, and a provenance source ``{kind, ref, source, timestamp}``."""
    memory_type = MEMORY_TYPE_OF_KIND.get(kind, MemoryType.EPISODIC)
    half_life = HALF_LIFE_OF_TYPE.get(memory_type, OTHER_HALF_LIFE)
    return RecordData(
        id=new_record_id(),
        type=memory_type,
        sensitivity=Sensitivity(resolve_sensitivity(sensitivity)),
        confidence=CONFIDENCE_OF_KIND.get(kind, UNKNOWN_KIND_CONFIDENCE),
        salience=INITIAL_SALIENCE,
        scope=scope,
        tags=list(tags),
        created_at=at,
        updated_at=at,
        lifecycle=Lifecycle(
            decay=DecayProfile(half_life_seconds=half_life),
            last_reinforced_at=at,
            deletion_policy=DeletionPolicy.AUTO_PRUNE,
        ),
        provenance=Provenance(
            sources=[
                ProvenanceSource(
                    kind=PROVENANCE_KIND_OF_KIND.get(kind, ProvenanceKind.EVENT),
                    ref=ref,
                    created_by=source,
                    timestamp=timestamp,
                )
            ],
            created_by=INGESTION_ACTOR,
        ),
        payload=payload,
    )


def create_ingested(record: RecordData, kind: str, source: str, uow: UnitOfWork) -> MemoryRecord:
    """The aggregate of a built record, audited as the ingestion service's creation."""
    validate_record(record)
    return MemoryRecord.create(
        record,
        actor=INGESTION_ACTOR,
        rationale=f"Ingested {kind} from {source}",
        at=record.created_at or uow.now(),
        embedding=uow.embed(record),
    )


def event_record(
    *,
    source: str,
    event_kind: str,
    ref: str,
    summary: str,
    timestamp: datetime,
    at: datetime,
    tags: list[str],
    scope: str,
    sensitivity: str,
    environment_context: dict[str, Any] | None = None,
) -> RecordData:
    """``IngestEvent``: an episodic record with one timeline entry."""
    if not source:
        raise policy_error("source", "candidate source is required")
    if not event_kind:
        raise policy_error("event_kind", "event kind is required for event candidates")
    if not ref:
        raise policy_error("ref", "event ref is required for event candidates")
    payload = EpisodicPayload(
        timeline=[TimelineEvent(t=timestamp, event_kind=event_kind, ref=ref, summary=summary)],
        environment=_environment(environment_context),
    )
    return build_record(
        EVENT,
        payload,
        source=source,
        timestamp=timestamp,
        at=at,
        ref=ref,
        tags=tags,
        scope=scope,
        sensitivity=sensitivity,
    )


def tool_output_record(
    *,
    source: str,
    tool_name: str,
    args: dict[str, Any],
    result: Any,
    depends_on: list[str],
    timestamp: datetime,
    at: datetime,
    tags: list[str],
    scope: str,
    sensitivity: str,
    environment_context: dict[str, Any] | None = None,
) -> RecordData:
    """``IngestToolOutput``: an episodic record with one tool node and its timeline entry."""
    if not source:
        raise policy_error("source", "candidate source is required")
    if not tool_name:
        raise policy_error("tool_name", "tool name is required for tool output candidates")
    node_id = new_record_id()
    payload = EpisodicPayload(
        timeline=[
            TimelineEvent(
                t=timestamp, event_kind="tool_call", ref=node_id, summary=f"tool_call: {tool_name}"
            )
        ],
        tool_graph=[
            ToolNode(
                id=node_id,
                tool=tool_name,
                args=args,
                result=result,
                timestamp=timestamp,
                depends_on=depends_on,
            )
        ],
        environment=_environment(environment_context),
    )
    return build_record(
        TOOL_OUTPUT,
        payload,
        source=source,
        timestamp=timestamp,
        at=at,
        ref=node_id,
        tags=tags,
        scope=scope,
        sensitivity=sensitivity,
    )


def working_record(
    *,
    source: str,
    thread_id: str,
    state: str,
    next_actions: list[str],
    open_questions: list[str],
    context_summary: str,
    active_constraints: list[Constraint],
    timestamp: datetime,
    at: datetime,
    tags: list[str],
    scope: str,
    sensitivity: str,
) -> RecordData:
    """``IngestWorkingState``: a working record, the payload as given."""
    if not source:
        raise policy_error("source", "candidate source is required")
    if not thread_id:
        raise policy_error("thread_id", "thread ID is required for working state candidates")
    if not state:
        raise policy_error("state", "task state is required for working state candidates")
    payload = WorkingPayload(
        thread_id=thread_id,
        state=state,
        active_constraints=active_constraints,
        next_actions=next_actions,
        open_questions=open_questions,
        context_summary=context_summary,
    )
    return build_record(
        WORKING_STATE,
        payload,
        source=source,
        timestamp=timestamp,
        at=at,
        ref=thread_id,
        tags=tags,
        scope=scope,
        sensitivity=sensitivity,
    )


def _environment(context: dict[str, Any] | None) -> EnvironmentSnapshot | None:
    return None if context is None else EnvironmentSnapshot(context=context)


# --- handlers ---------------------------------------------------------------------------------


_Ingest = IngestEvent | IngestToolOutput | IngestObservation | IngestWorkingState


def _check_common(cmd: _Ingest) -> tuple[str, list[str], str, str]:
    """source, tags, scope, sensitivity, checked (the boundary's limits)."""
    source = plain_text("source", cmd.source)
    tags = check_tag_list("tags", cmd.tags)
    scope = plain_text("scope", cmd.scope)
    sensitivity = check_sensitivity("sensitivity", cmd.sensitivity)
    return source, tags, scope, sensitivity


def ingest_event(cmd: IngestEvent, uow: UnitOfWork) -> RecordData:
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


def ingest_tool_output(cmd: IngestToolOutput, uow: UnitOfWork) -> RecordData:
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


def ingest_observation(cmd: IngestObservation, uow: UnitOfWork) -> RecordData:
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
    touched: list[MemoryRecord] = []
    relations: list[Relation] = []
    if subject_entity is not None:
        subject = subject_entity.record_id
        touched.append(subject_entity)
        relations.append(_relation(GraphPredicate.SUBJECT_ENTITY, subject, at))
    if object_entity is not None:
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
    record = msgspec.structs.replace(record, relations=relations)
    created = create_ingested(record, OBSERVATION, source, uow)
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
    return copy_record(created.view(uow.now()))


def ingest_outcome(cmd: IngestOutcome, uow: UnitOfWork) -> RecordData:
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


def ingest_working_state(cmd: IngestWorkingState, uow: UnitOfWork) -> RecordData:
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


def _save_new(record: RecordData, kind: str, source: str, uow: UnitOfWork) -> RecordData:
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


def _entity_named(term: Any, scope: str, uow: UnitOfWork) -> MemoryRecord | None:
    """The entity ``FindEntitiesByTerm(term, scope, 1)`` finds, as an aggregate to relate."""
    if not isinstance(term, str):
        return None
    found = uow.find_entities(term, scope, 1)
    if not found or not isinstance(found[0].payload, EntityPayload):
        return None
    return uow.get(found[0].id)


def _relation(predicate: GraphPredicate, target_id: str, at: datetime) -> Relation:
    return Relation(predicate=predicate.value, target_id=target_id, weight=1.0, created_at=at)

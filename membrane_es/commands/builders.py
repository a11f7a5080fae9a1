"""The reference's record builder (``buildRecord``) and the candidate records built with it,
shared by the ingest operations (:mod:`.ingest`) and capture (:mod:`.capture`).

A candidate of some kind is classified into a memory type, checked by the policy (whose
errors read ``ingestion policy: …``), given that kind's confidence and half-life, and built
into a record whose provenance names the source.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from membrane_es.aggregates.identity import new_record_id
from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.commands.inputs import (
    policy_error,
    resolve_sensitivity,
)
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.schema.enums import (
    DeletionPolicy,
    MemoryType,
    ProvenanceKind,
    Sensitivity,
)
from membrane_es.schema.payloads import (
    Constraint,
    EnvironmentSnapshot,
    EpisodicPayload,
    Payload,
    TimelineEvent,
    ToolNode,
    WorkingPayload,
)
from membrane_es.schema.records import (
    Lifecycle,
    MemoryRecord,
    Provenance,
    ProvenanceSource,
)
from membrane_es.schema.validation import (
    validate_record,
)
from membrane_es.timekeeping.decay import engine_profile

INGESTION_ACTOR = "ingestion-service"
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
PROVENANCE_KIND_OF_KIND: dict[str, ProvenanceKind] = {
    EVENT: ProvenanceKind.EVENT,
    TOOL_OUTPUT: ProvenanceKind.TOOL_CALL,
    OBSERVATION: ProvenanceKind.OBSERVATION,
    OUTCOME: ProvenanceKind.OUTCOME,
    WORKING_STATE: ProvenanceKind.EVENT,
}


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
) -> MemoryRecord:
    """A new record for a candidate of ``kind``: classified, given the policy's confidence,
    salience and lifecycle, and a provenance source ``{kind, ref, source, timestamp}``."""
    memory_type = MEMORY_TYPE_OF_KIND.get(kind, MemoryType.EPISODIC)
    return MemoryRecord(
        id=new_record_id(),
        type=memory_type,
        sensitivity=Sensitivity(resolve_sensitivity(sensitivity)),
        confidence=CONFIDENCE_OF_KIND.get(kind, UNKNOWN_KIND_CONFIDENCE),
        salience=INITIAL_SALIENCE,
        scope=scope,
        tags=list(tags),
        created_at=timestamp,  # event time; the log keeps when it was written
        updated_at=at,
        lifecycle=Lifecycle(
            decay=engine_profile(memory_type),
            last_reinforced_at=min(timestamp, at),  # it fades from when it happened
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


def create_ingested(
    record: MemoryRecord, kind: str, source: str, uow: UnitOfWork
) -> RecordAggregate:
    """The aggregate of a built record, audited as the ingestion service's creation."""
    validate_record(record)
    return RecordAggregate.create(
        record,
        actor=INGESTION_ACTOR,
        rationale=f"Ingested {kind} from {source}",
        at=record.updated_at or uow.now(),
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
) -> MemoryRecord:
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
) -> MemoryRecord:
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
) -> MemoryRecord:
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

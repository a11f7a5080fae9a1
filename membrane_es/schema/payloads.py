"""The six typed payloads, one per memory type, each tagged by its ``kind`` string.

They form one tagged union (:data:`Payload`): msgspec decodes the right variant from the
``kind`` field in a single pass, exactly like the reference JSON form where the payload
object carries its own ``kind``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from membrane_es.schema.enums import MemoryType
from membrane_es.schema.timestamps import Timestamp


class _Part(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """Base of every nested payload part: keyword-only, defaults omitted from JSON."""


# --- episodic -----------------------------------------------------------------------------


class TimelineEvent(_Part):
    t: Timestamp | None = None
    event_kind: str = ""
    ref: str = ""
    summary: str = ""


class ToolNode(_Part):
    id: str = ""
    tool: str = ""
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    result: Any = None
    timestamp: Timestamp | None = None
    depends_on: list[str] = msgspec.field(default_factory=list)


class EnvironmentSnapshot(_Part):
    os: str = ""
    os_version: str = ""
    tool_versions: dict[str, str] = msgspec.field(default_factory=dict)
    working_directory: str = ""
    context: dict[str, Any] = msgspec.field(default_factory=dict)


class _PayloadBase(
    msgspec.Struct,
    kw_only=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
    tag_field="kind",
):
    """Base of the payload variants; the ``kind`` tag names the memory type."""

    @property
    def memory_type(self) -> MemoryType:
        return MemoryType(str(self.__struct_config__.tag))


class EpisodicPayload(_PayloadBase, tag="episodic"):
    timeline: list[TimelineEvent] = msgspec.field(default_factory=list)
    tool_graph: list[ToolNode] = msgspec.field(default_factory=list)
    environment: EnvironmentSnapshot | None = None
    outcome: str = ""
    artifacts: list[str] = msgspec.field(default_factory=list)
    tool_graph_ref: str = ""


# --- working ------------------------------------------------------------------------------


class Constraint(_Part):
    type: str = ""
    key: str = ""
    value: Any = None
    required: bool = False


class WorkingPayload(_PayloadBase, tag="working"):
    thread_id: str = ""
    state: str = ""
    active_constraints: list[Constraint] = msgspec.field(default_factory=list)
    next_actions: list[str] = msgspec.field(default_factory=list)
    open_questions: list[str] = msgspec.field(default_factory=list)
    context_summary: str = ""


# --- semantic -----------------------------------------------------------------------------


class Validity(_Part):
    mode: str = ""
    conditions: dict[str, Any] = msgspec.field(default_factory=dict)
    start: Timestamp | None = None
    end: Timestamp | None = None


class ProvenanceRef(_Part):
    source_type: str = ""
    source_id: str = ""
    timestamp: Timestamp | None = None


class RevisionState(_Part):
    supersedes: str = ""
    superseded_by: str = ""
    status: str = ""


class SemanticPayload(_PayloadBase, tag="semantic"):
    subject: str = ""
    predicate: str = ""
    object: Any = None
    validity: Validity = msgspec.field(default_factory=Validity)
    evidence: list[ProvenanceRef] = msgspec.field(default_factory=list)
    revision_policy: str = ""
    revision: RevisionState | None = None


# --- competence ---------------------------------------------------------------------------


class Trigger(_Part):
    signal: str = ""
    conditions: dict[str, Any] = msgspec.field(default_factory=dict)


class RecipeStep(_Part):
    step: str = ""
    tool: str = ""
    args_schema: dict[str, Any] = msgspec.field(default_factory=dict)
    validation: str = ""


class PerformanceStats(_Part):
    success_count: int = 0
    failure_count: int = 0
    success_rate: float = 0.0
    avg_latency_ms: float = 0.0
    last_used_at: Timestamp | None = None


class CompetencePayload(_PayloadBase, tag="competence"):
    skill_name: str = ""
    triggers: list[Trigger] = msgspec.field(default_factory=list)
    recipe: list[RecipeStep] = msgspec.field(default_factory=list)
    required_tools: list[str] = msgspec.field(default_factory=list)
    failure_modes: list[str] = msgspec.field(default_factory=list)
    fallbacks: list[str] = msgspec.field(default_factory=list)
    performance: PerformanceStats | None = None
    version: str = ""


# --- plan graph ---------------------------------------------------------------------------


class PlanNode(_Part):
    id: str = ""
    op: str = ""
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    guards: dict[str, Any] = msgspec.field(default_factory=dict)


class PlanEdge(_Part):
    from_: str = msgspec.field(default="", name="from")
    to: str = ""
    kind: str = ""


class PlanMetrics(_Part):
    avg_latency_ms: float = 0.0
    failure_rate: float = 0.0
    execution_count: int = 0
    last_executed_at: Timestamp | None = None


class PlanGraphPayload(_PayloadBase, tag="plan_graph"):
    plan_id: str = ""
    version: str = ""
    intent: str = ""
    constraints: dict[str, Any] = msgspec.field(default_factory=dict)
    inputs_schema: dict[str, Any] = msgspec.field(default_factory=dict)
    outputs_schema: dict[str, Any] = msgspec.field(default_factory=dict)
    nodes: list[PlanNode] = msgspec.field(default_factory=list)
    edges: list[PlanEdge] = msgspec.field(default_factory=list)
    metrics: PlanMetrics | None = None


# --- entity -------------------------------------------------------------------------------


class EntityAlias(_Part):
    value: str = ""
    kind: str = ""
    locale: str = ""


class EntityIdentifier(_Part):
    namespace: str = ""
    value: str = ""


class EntityPayload(_PayloadBase, tag="entity"):
    canonical_name: str = ""
    primary_type: str = ""
    types: list[str] = msgspec.field(default_factory=list)
    aliases: list[EntityAlias] = msgspec.field(default_factory=list)
    identifiers: list[EntityIdentifier] = msgspec.field(default_factory=list)
    summary: str = ""


Payload = (
    EpisodicPayload
    | WorkingPayload
    | SemanticPayload
    | CompetencePayload
    | PlanGraphPayload
    | EntityPayload
)

PAYLOAD_TYPES: dict[MemoryType, type[_PayloadBase]] = {
    MemoryType.EPISODIC: EpisodicPayload,
    MemoryType.WORKING: WorkingPayload,
    MemoryType.SEMANTIC: SemanticPayload,
    MemoryType.COMPETENCE: CompetencePayload,
    MemoryType.PLAN_GRAPH: PlanGraphPayload,
    MemoryType.ENTITY: EntityPayload,
}

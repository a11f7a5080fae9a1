"""Consolidation stages 4 and 5 (spec §5.5): competence from repeated successful tool use,
plan graphs from multi-step episodes. Both link what they derive to its source episodes with
``derived_from`` and to the tools it uses (``uses``/``used_by``), and neither repeats what an
earlier run did."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from membrane_es.aggregates.identity import new_record_id
from membrane_es.commands.derivation import (
    CONSOLIDATED_TAG,
    DERIVED_FROM,
    entity_id,
    new_derived,
    reinforce_from,
    write_derived,
)
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.schema.enums import (
    EdgeKind,
    GraphPredicate,
    MemoryType,
    OutcomeStatus,
    ProvenanceKind,
    Sensitivity,
)
from membrane_es.schema.payloads import (
    CompetencePayload,
    EpisodicPayload,
    PerformanceStats,
    PlanEdge,
    PlanGraphPayload,
    PlanMetrics,
    PlanNode,
    RecipeStep,
    ToolNode,
    Trigger,
)
from membrane_es.schema.records import MemoryRecord, Provenance, ProvenanceSource

COMPETENCE_ACTOR = "consolidation/competence"
PLAN_ACTOR = "consolidation/plangraph"
MIN_EPISODES_FOR_SKILL = 2
MIN_TOOL_NODES_FOR_PLAN = 3
SKILL_CONFIDENCE = 0.8
PLAN_CONFIDENCE = 0.7
MIXED_SCOPE = "consolidated:mixed-scope"
UNKNOWN_INTENT = "unknown"
ENTITY_PARAM_KEYS = ("tool", "command", "repo", "repository", "file", "service", "package")
SENSITIVITY_ORDER: tuple[Sensitivity, ...] = tuple(Sensitivity)  # public … hyper
USES = GraphPredicate.USES.value


# --- 4. competence ------------------------------------------------------------------------


def extract_competence(uow: UnitOfWork, now: datetime) -> tuple[int, int]:
    """(skills created, skills reinforced)."""
    skills = skill_index(uow)
    created = reinforced = 0
    for signature, group in sorted(tool_groups(uow).items()):
        if len(group) < MIN_EPISODES_FOR_SKILL:
            continue
        name = f"skill:{signature}"
        if name in skills:
            rationale = f"Reinforced: {len(group)} episodes match pattern"
            sources = [episode.id for episode in group]
            actor = COMPETENCE_ACTOR
            if reinforce_from(uow, skills[name], sources, actor=actor, rationale=rationale):
                reinforced += 1
            continue
        skills[name] = create_skill(uow, now, signature, group).id
        created += 1
    return created, reinforced


def skill_index(uow: UnitOfWork) -> dict[str, str]:
    """Active competence records by skill name (the newest wins)."""
    return {
        record.payload.skill_name: record.id
        for record in uow.records_of_type(MemoryType.COMPETENCE)
        if isinstance(record.payload, CompetencePayload)
    }


def tool_groups(uow: UnitOfWork) -> dict[str, list[MemoryRecord]]:
    """Successful episodes with tools, by signature (their tool names sorted, joined by +)."""
    groups: dict[str, list[MemoryRecord]] = {}
    for episode in uow.records_of_type(MemoryType.EPISODIC):
        payload = episode.payload
        if not isinstance(payload, EpisodicPayload) or payload.outcome != OutcomeStatus.SUCCESS:
            continue
        names = tool_names(payload.tool_graph)
        if names:
            groups.setdefault("+".join(sorted(names)), []).append(episode)
    return groups


def tool_names(nodes: Iterable[ToolNode]) -> list[str]:
    """The nodes' tool names, trimmed, blanks dropped, order and repeats kept."""
    return [node.tool.strip() for node in nodes if node.tool.strip()]


def create_skill(
    uow: UnitOfWork, now: datetime, signature: str, group: list[MemoryRecord]
) -> MemoryRecord:
    first = group[0].payload
    tools = tool_names(first.tool_graph) if isinstance(first, EpisodicPayload) else []
    payload = CompetencePayload(
        skill_name=f"skill:{signature}",
        triggers=[Trigger(signal=signature)],
        recipe=[RecipeStep(step=f"Step {i}: invoke {t}", tool=t) for i, t in enumerate(tools, 1)],
        required_tools=tools,
        performance=PerformanceStats(success_count=len(group), success_rate=1.0, last_used_at=now),
        version="1",
    )
    sensitivity = max_sensitivity(e.sensitivity for e in group)
    scope, policy = scope_policy(e.scope for e in group)
    sources = [
        ProvenanceSource(
            kind=ProvenanceKind.OUTCOME, ref=e.id, created_by=COMPETENCE_ACTOR, timestamp=now
        )
        for e in group
    ]
    record = new_derived(
        MemoryType.COMPETENCE,
        payload,
        sensitivity=sensitivity,
        scope=scope,
        confidence=SKILL_CONFIDENCE,
        tags=[CONSOLIDATED_TAG, "auto-competence"],
        provenance=Provenance(sources=sources, created_by=COMPETENCE_ACTOR),
    )
    rationale = (
        f"Extracted from {len(group)} episodic records with pattern {signature}; "
        f"policy: sensitivity=max({sensitivity.value}), scope={policy}"
    )
    links = [(USES, found) for found in _entities(uow, tools, scope)]
    return write_derived(
        uow,
        record,
        sources=[e.id for e in group],
        links=links,
        actor=COMPETENCE_ACTOR,
        rationale=rationale,
    )


def max_sensitivity(values: Iterable[Sensitivity | str]) -> Sensitivity:
    """The highest of the sources' levels; ``low`` when none is valid."""
    valid = [Sensitivity(v) for v in values if v in SENSITIVITY_ORDER]
    return max(valid, key=SENSITIVITY_ORDER.index) if valid else Sensitivity.LOW


def scope_policy(scopes: Iterable[str]) -> tuple[str, str]:
    """(scope, how it was chosen): the common scope, else the mixed-scope marker."""
    unique = sorted(set(scopes))
    if len(unique) == 1:
        return unique[0], f"preserved({unique[0] or 'unscoped'})"
    names = ", ".join(scope or "unscoped" for scope in unique)
    return MIXED_SCOPE, f"{MIXED_SCOPE} from {names}"


# --- 5. plan graphs -------------------------------------------------------------------------


def extract_plan_graphs(uow: UnitOfWork, now: datetime) -> int:
    """How many plan graphs were created."""
    count = 0
    for episode in uow.records_of_type(MemoryType.EPISODIC):
        payload = episode.payload
        if not isinstance(payload, EpisodicPayload):
            continue
        if len(payload.tool_graph) < MIN_TOOL_NODES_FOR_PLAN or has_plan(uow, episode.id):
            continue
        create_plan(uow, now, episode, payload)
        count += 1
    return count


def has_plan(uow: UnitOfWork, episode_id: str) -> bool:
    """Whether a plan graph is already derived from this episode."""
    return any(
        uow.get(record_id).memory_type is MemoryType.PLAN_GRAPH
        for record_id in uow.referrers(episode_id, DERIVED_FROM)
    )


def create_plan(
    uow: UnitOfWork, now: datetime, episode: MemoryRecord, episodic: EpisodicPayload
) -> MemoryRecord:
    nodes = episodic.tool_graph
    payload = PlanGraphPayload(
        plan_id=new_record_id(),
        version="1",
        intent=infer_intent(episodic),
        nodes=[PlanNode(id=n.id, op=n.tool, params=dict(n.args)) for n in nodes],
        edges=[
            PlanEdge(from_=d, to=n.id, kind=EdgeKind.CONTROL.value)
            for n in nodes
            for d in n.depends_on
        ],
        metrics=PlanMetrics(execution_count=1, last_executed_at=now),
    )
    source = ProvenanceSource(
        kind=ProvenanceKind.TOOL_CALL, ref=episode.id, created_by=PLAN_ACTOR, timestamp=now
    )
    record = new_derived(
        MemoryType.PLAN_GRAPH,
        payload,
        sensitivity=episode.sensitivity,
        scope=episode.scope,
        confidence=PLAN_CONFIDENCE,
        tags=[CONSOLIDATED_TAG, "auto-plangraph"],
        provenance=Provenance(sources=[source], created_by=PLAN_ACTOR),
    )
    rationale = f"Extracted plan graph from episodic record {episode.id} ({len(nodes)} nodes)"
    links = [(USES, found) for found in _entities(uow, plan_terms(nodes), episode.scope)]
    return write_derived(
        uow, record, sources=[episode.id], links=links, actor=PLAN_ACTOR, rationale=rationale
    )


def infer_intent(payload: EpisodicPayload) -> str:
    """The first non-blank event kind, else ``unknown``."""
    for event in payload.timeline:
        if event.event_kind.strip():
            return event.event_kind
    return UNKNOWN_INTENT


def plan_terms(nodes: Iterable[ToolNode]) -> list[str]:
    """What a plan may name as entities: each node's op, then its string params under the
    tool-like keys, in that order."""
    terms: list[str] = []
    for node in nodes:
        terms.append(node.tool)
        terms += [v for k in ENTITY_PARAM_KEYS if isinstance(v := node.args.get(k), str)]
    return terms


def _entities(uow: UnitOfWork, terms: Iterable[str], scope: str) -> list[str]:
    """The ids of the entities the terms name (each once, in order)."""
    found = (entity_id(uow, term, scope) for term in terms if term.strip())
    return list(dict.fromkeys(f for f in found if f))

"""Consolidation (spec §5.5): episodes become compressed, and facts, skills and plans derive
from them. Unlike the reference, a run never repeats what an earlier run did.

The stages, in the reference's order (a failure stops the run; earlier writes stay):

1. episodic compression — an episode older than 24 h, not pinned, above 0.05, loses half its
   salience (floor 0.05) once: a penalty by ``consolidation/episodic``, whose audit entry
   marks the episode as compressed;
2. structural semantic — each timeline event (with a summary) of a successful episode is the
   fact ``<event_kind> observed_in <summary>``: created, or, when a fact with that subject and
   predicate exists, reinforced — once per (episode, fact), recorded by the fact's
   ``derived_from`` relation to the episode;
3. semantic extraction — with an :class:`~membrane_es.commands.extractor.Extractor`, each
   episode not yet extracted is read for triples: exact existing facts are reinforced (once
   per episode), new ones created;
4. competence — successful episodes grouped by tool signature (≥ 2) make a skill, or reinforce
   the existing one for the episodes it is not yet derived from;
5. plan graphs — an episode with ≥ 3 tool nodes that no plan is derived from yields one.

Every derived record is one atomic write with its relations (see :mod:`.derivation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from membrane_es.aggregates.memory_record import COMPRESSION_ACTOR
from membrane_es.commands.capture import text_of
from membrane_es.commands.derivation import (
    DERIVED_FROM,
    consolidated_tags,
    entity_id,
    new_derived,
    reinforce_from,
    write_derived,
)
from membrane_es.commands.extractor import Extractor, Triple, clean_triples
from membrane_es.commands.messages import Consolidate
from membrane_es.commands.procedures import extract_competence, extract_plan_graphs
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import GraphPredicate, MemoryType, OutcomeStatus, ProvenanceKind
from membrane_es.schema.payloads import EpisodicPayload, ProvenanceRef, SemanticPayload, Validity
from membrane_es.schema.records import MemoryRecord, Provenance, ProvenanceSource
from membrane_es.schema.results import ConsolidationResult
from membrane_es.schema.timestamps import utc

COMPRESSION_AGE = timedelta(hours=24)
COMPRESSION_FACTOR = 0.5
COMPRESSION_FLOOR = 0.05
COMPRESSION_RATIONALE = "Episodic compression: record exceeded age threshold"
SEMANTIC_ACTOR = "consolidation/semantic"
EXTRACTOR_ACTOR = "consolidation/semantic_extractor"
OBSERVED_IN = "observed_in"

FactKey = tuple[str, str]


@dataclass
class Run:
    """One consolidation run: the moment ages are measured at, the hook, the counters."""

    now: datetime
    extractor: Extractor | None = None
    result: ConsolidationResult = field(default_factory=ConsolidationResult)


def consolidate(cmd: Consolidate, uow: UnitOfWork) -> ConsolidationResult:
    """Run every stage once (the command handler)."""
    run = Run(now=_check_now(cmd.now) or uow.now(), extractor=cmd.extractor)
    stages: list[Callable[[UnitOfWork, Run], None]] = [
        compress_episodes,
        extract_structural_semantic,
        extract_with_extractor,
        _competence,
        _plan_graphs,
    ]
    for stage in stages:
        stage(uow, run)
    return run.result


def _check_now(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValidationError("now", "now must be a timezone-aware datetime")
    try:
        return utc(value)
    except ValueError as exc:
        raise ValidationError("now", f"invalid now: {exc}") from None


# --- 1. episodic compression --------------------------------------------------------------


def compress_episodes(uow: UnitOfWork, run: Run) -> None:
    for episode in uow.records_of_type(MemoryType.EPISODIC):
        if compressible(episode, run.now) and compress(uow, episode.id):
            run.result.episodic_compressed += 1


def compressible(episode: MemoryRecord, now: datetime) -> bool:
    """Unpinned, at least 24 h old, above the compression floor."""
    created = episode.created_at
    return (
        not episode.lifecycle.pinned
        and created is not None
        and now - created >= COMPRESSION_AGE
        and episode.salience > COMPRESSION_FLOOR
    )


def compress(uow: UnitOfWork, record_id: str) -> bool:
    """Halve the salience (floor 0.05) unless an earlier run did; True when it did now."""
    aggregate = uow.get(record_id)
    if aggregate.compressed:
        return False
    at = uow.now()
    current = aggregate.salience(at)
    target = max(current * COMPRESSION_FACTOR, COMPRESSION_FLOOR)
    aggregate.penalize(
        max(current - target, 0.0), actor=COMPRESSION_ACTOR, rationale=COMPRESSION_RATIONALE, at=at
    )
    uow.save(aggregate)
    return True


# --- 2. structural semantic ---------------------------------------------------------------


def extract_structural_semantic(uow: UnitOfWork, run: Run) -> None:
    index = fact_index(uow)
    for episode in successful_episodes(uow):
        for event in _timeline(episode):
            if event.summary:
                _consolidate_event(uow, run, index, episode, event.event_kind, event.summary)


def _consolidate_event(
    uow: UnitOfWork,
    run: Run,
    index: dict[FactKey, str],
    episode: MemoryRecord,
    kind: str,
    summary: str,
) -> None:
    canonical = entity_id(uow, kind, episode.scope)
    fact_id = index.get((kind, OBSERVED_IN)) or index.get((canonical, OBSERVED_IN))
    if fact_id:
        rationale = f"Reinforced from episodic record {episode.id}"
        if reinforce_from(uow, fact_id, [episode.id], actor=SEMANTIC_ACTOR, rationale=rationale):
            run.result.duplicates_resolved += 1
        return
    rationale = f"Extracted from episodic record {episode.id}"
    fact = create_fact(uow, run, episode, (kind, OBSERVED_IN, summary), SEMANTIC_ACTOR, rationale)
    index[(kind, OBSERVED_IN)] = fact.id
    run.result.semantic_extracted += 1


def fact_index(uow: UnitOfWork) -> dict[FactKey, str]:
    """Active semantic records by (subject, predicate); the newest wins."""
    index: dict[FactKey, str] = {}
    for record in uow.records_of_type(MemoryType.SEMANTIC):
        payload = record.payload
        if isinstance(payload, SemanticPayload):
            index[(payload.subject, payload.predicate)] = record.id
    return index


def successful_episodes(uow: UnitOfWork) -> list[MemoryRecord]:
    return [
        episode
        for episode in uow.records_of_type(MemoryType.EPISODIC)
        if isinstance(episode.payload, EpisodicPayload)
        and episode.payload.outcome == OutcomeStatus.SUCCESS.value
    ]


def create_fact(
    uow: UnitOfWork,
    run: Run,
    episode: MemoryRecord,
    triple: tuple[str, str, Any],
    actor: str,
    rationale: str,
) -> MemoryRecord:
    """A semantic record from an episode; a subject or object naming an entity in the
    episode's scope is replaced by the entity's id and linked to it."""
    subject, predicate, obj = triple
    subject_entity = entity_id(uow, subject, episode.scope)
    object_entity = entity_id(uow, obj, episode.scope) if isinstance(obj, str) else ""
    payload = SemanticPayload(
        subject=subject_entity or subject,
        predicate=predicate,
        object=object_entity or obj,
        validity=Validity(mode="global"),
        evidence=[ProvenanceRef(source_type="episodic", source_id=episode.id, timestamp=run.now)],
        revision_policy="replace",
    )
    source = ProvenanceSource(
        kind=ProvenanceKind.OBSERVATION, ref=episode.id, created_by=actor, timestamp=run.now
    )
    record = new_derived(
        MemoryType.SEMANTIC,
        payload,
        sensitivity=episode.sensitivity,
        scope=episode.scope,
        confidence=episode.confidence,
        tags=consolidated_tags(episode.tags),
        provenance=Provenance(sources=[source], created_by=actor),
    )
    links = [
        (str(predicate_name), entity)
        for predicate_name, entity in (
            (GraphPredicate.SUBJECT_ENTITY, subject_entity),
            (GraphPredicate.OBJECT_ENTITY, object_entity),
        )
        if entity
    ]
    return write_derived(
        uow, record, sources=[episode.id], links=links, actor=actor, rationale=rationale
    )


# --- 3. semantic extraction (the extractor hook) -----------------------------------------

ExactKey = tuple[str, str, str]


def extract_with_extractor(uow: UnitOfWork, run: Run) -> None:
    extractor = run.extractor
    if extractor is None:
        return
    index = exact_fact_index(uow)
    for episode in uow.records_of_type(MemoryType.EPISODIC):
        content = episodic_content(episode)
        if not content or already_extracted(uow, episode.id):
            continue
        try:
            triples = clean_triples(extractor.extract(content))
        except Exception:  # an extractor failure skips the episode, as the reference's LLM
            run.result.extraction_skipped += 1
            continue
        for triple in triples:
            _extracted_triple(uow, run, index, episode, triple)


def _extracted_triple(
    uow: UnitOfWork, run: Run, index: dict[ExactKey, str], episode: MemoryRecord, triple: Triple
) -> None:
    key = (triple.subject, triple.predicate, triple.object)
    canonical = (
        entity_id(uow, triple.subject, episode.scope) or triple.subject,
        triple.predicate,
        entity_id(uow, triple.object, episode.scope) or triple.object,
    )
    fact_id = index.get(key) or index.get(canonical)
    if fact_id:
        rationale = f"Reinforced exact semantic fact extracted from episodic record {episode.id}"
        if reinforce_from(uow, fact_id, [episode.id], actor=EXTRACTOR_ACTOR, rationale=rationale):
            run.result.duplicates_resolved += 1
        return
    rationale = f"Extracted semantic fact from episodic record {episode.id}"
    fact = create_fact(uow, run, episode, key, EXTRACTOR_ACTOR, rationale)
    index[key] = index[canonical] = fact.id
    run.result.semantic_triples_extracted += 1


def exact_fact_index(uow: UnitOfWork) -> dict[ExactKey, str]:
    """Active semantic records with a text object by (subject, predicate, object)."""
    index: dict[ExactKey, str] = {}
    for record in uow.records_of_type(MemoryType.SEMANTIC):
        payload = record.payload
        if isinstance(payload, SemanticPayload) and isinstance(payload.object, str):
            index.setdefault((payload.subject, payload.predicate, payload.object), record.id)
    return index


def already_extracted(uow: UnitOfWork, episode_id: str) -> bool:
    """Whether the extractor created or reinforced a fact from this episode in an earlier
    run (the fact is derived from it and its audit log says so)."""
    for record_id in uow.referrers(episode_id, DERIVED_FROM):
        audit = uow.get(record_id).state.audit
        if any(e.actor == EXTRACTOR_ACTOR and e.rationale.endswith(episode_id) for e in audit):
            return True
    return False


def episodic_content(record: MemoryRecord) -> str:
    """The text an extractor reads (``formatEpisodicContent``): ``<kind>: <summary>`` per
    timeline event with a summary, ``tool <tool>[ -> <result>]`` per tool node,
    ``outcome: <outcome>``; "" for a record that is not episodic."""
    payload = record.payload
    if not isinstance(payload, EpisodicPayload):
        return ""
    lines = [f"{e.event_kind}: {e.summary}" for e in payload.timeline if e.summary.strip()]
    for node in payload.tool_graph:
        result = text_of(node.result).strip()
        lines.append(f"tool {node.tool}" + (f" -> {result}" if result else ""))
    if payload.outcome:
        lines.append(f"outcome: {payload.outcome}")
    return "\n".join(lines).strip()


# --- 4 and 5 (see :mod:`.procedures`) ------------------------------------------------------


def _competence(uow: UnitOfWork, run: Run) -> None:
    created, reinforced = extract_competence(uow, run.now)
    run.result.competence_extracted += created
    run.result.duplicates_resolved += reinforced


def _plan_graphs(uow: UnitOfWork, run: Run) -> None:
    run.result.plan_graphs_extracted += extract_plan_graphs(uow, run.now)


def _timeline(episode: MemoryRecord) -> list[Any]:
    payload = episode.payload
    return list(payload.timeline) if isinstance(payload, EpisodicPayload) else []

"""Capture step 4 (spec §2.4): the pool of candidate records and how they are scored."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from membrane_es.commands.capture.common import (
    _created_seconds,
    _first_non_blank,
    _norm,
    text_of,
)
from membrane_es.commands.messages import CaptureMemory
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.schema.enums import (
    MemoryType,
)
from membrane_es.schema.payloads import (
    CompetencePayload,
    EntityPayload,
    EpisodicPayload,
    PlanGraphPayload,
    SemanticPayload,
    WorkingPayload,
)
from membrane_es.schema.records import (
    Interpretation,
    MemoryRecord,
)

POOL_LIST_LIMIT = 80  # records read per List call
POOL_SIZE = 20  # candidates kept after scoring

SCOPE_BONUS = 100.0
ENTITY_BONUS = 15.0
TYPE_BONUS = 10.0
TAG_BONUS = 8.0
TERM_BONUS = 25.0

SUBJECT_KEYS = ("subject", "project", "tool_name", "file")


# --- step 4: the candidate pool --------------------------------------------------------------


def candidate_pool(
    request: CaptureMemory, interpretation: Interpretation, uow: UnitOfWork
) -> list[MemoryRecord]:
    """The 20 records most likely to be what the capture names (spec §2.4 step 4)."""
    scope = request.scope
    listed = uow.candidate_pool(scope or None, POOL_LIST_LIMIT)
    if scope:
        listed += uow.candidate_pool(None, POOL_LIST_LIMIT)
    unique: dict[str, MemoryRecord] = {}
    for record in listed:
        unique.setdefault(record.id, record)
    terms = query_terms(request, interpretation)
    now = uow.now()
    scored = [(score_candidate(r, request, interpretation, terms, now), r) for r in unique.values()]
    scored.sort(key=lambda item: (-item[0], -_created_seconds(item[1]), item[1].id))
    return [record for _, record in scored[:POOL_SIZE]]


def query_terms(request: CaptureMemory, interpretation: Interpretation) -> list[str]:
    """What the capture is about, normalised and unique: tags, the context's active entities,
    the content's subject, labels, mention surfaces and aliases, reference refs."""
    values: list[str] = list(request.tags)
    context, content = request.context, request.content
    if isinstance(context, dict) and isinstance(context.get("active_entities"), list):
        values += [v for v in context["active_entities"] if isinstance(v, str)]
    if isinstance(content, dict):
        values.append(_first_non_blank(*(text_of(content.get(k)) for k in SUBJECT_KEYS)))
    values += interpretation.topical_labels
    for mention in interpretation.mentions:
        values += [mention.surface, *mention.aliases]
    values += [reference.ref for reference in interpretation.reference_candidates]
    return list(dict.fromkeys(term for term in map(_norm, values) if term))


def score_candidate(
    record: MemoryRecord,
    request: CaptureMemory,
    interpretation: Interpretation,
    terms: Sequence[str],
    now: datetime,
) -> float:
    score = 0.0
    if request.scope and record.scope == request.scope:
        score += SCOPE_BONUS
    if record.type is MemoryType.ENTITY:
        score += ENTITY_BONUS
    if interpretation.proposed_type and interpretation.proposed_type == record.type.value:
        score += TYPE_BONUS
    record_tags = {tag.lower() for tag in record.tags}
    score += TAG_BONUS * sum(1 for tag in request.tags if tag.lower() in record_tags)
    searchable = record_search_terms(record)
    score += TERM_BONUS * sum(1 for term in terms if term_matches(searchable, term))
    if record.created_at is not None:
        age_hours = max(0.0, (now - record.created_at).total_seconds() / 3600)
        score += 1 / (1 + age_hours / 24)
    return score


def term_matches(searchable: Iterable[str], term: str) -> bool:
    """A record term equals the query term, contains it, or is one of its words."""
    words = term.split()
    return any(value == term or term in value or value in words for value in searchable)


def record_search_terms(record: MemoryRecord) -> list[str]:
    """The normalised strings a candidate is matched by."""
    values: list[str] = [record.id, record.scope, *record.tags]
    interpretation = record.interpretation
    if interpretation is not None:
        values += [interpretation.summary, *interpretation.topical_labels]
        for mention in interpretation.mentions:
            values += [mention.surface, *mention.aliases]
    payload = record.payload
    if isinstance(payload, EntityPayload):
        values += [payload.canonical_name, payload.primary_type, *payload.types]
        values += [alias.value for alias in payload.aliases]
        values.append(payload.summary)
    elif isinstance(payload, SemanticPayload):
        values += [payload.subject, payload.predicate, text_of(payload.object)]
    elif isinstance(payload, EpisodicPayload):
        for event in payload.timeline:
            values += [event.ref, event.event_kind, event.summary]
    elif isinstance(payload, WorkingPayload):
        values += [payload.thread_id, payload.context_summary]
        values += [*payload.next_actions, *payload.open_questions]
    elif isinstance(payload, CompetencePayload):
        values += [payload.skill_name, *payload.required_tools]
    elif isinstance(payload, PlanGraphPayload):
        values += [payload.plan_id, payload.intent]
    return [term for term in map(_norm, values) if term]

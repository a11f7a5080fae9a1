"""Capture step 12 (spec §2.4): the semantic record derived from ``subject``/``predicate``/
``object`` content, linked to the primary and to the entities it names."""

from __future__ import annotations

from typing import Any

from membrane_es.commands.capture.common import (
    _clamp01,
    _fitting_tags,
    _norm,
    looks_like_entity_id,
    replace,
    text_of,
)
from membrane_es.commands.capture.resolution import (
    _Capture,
)
from membrane_es.commands.resolution import REINFORCED, decide, resolving
from membrane_es.embedding.record_text import object_text
from membrane_es.schema.enums import (
    GraphPredicate,
    InterpretationStatus,
    MemoryType,
    SourceKind,
)
from membrane_es.schema.payloads import (
    EntityPayload,
    ProvenanceRef,
    SemanticPayload,
    Validity,
)
from membrane_es.schema.records import (
    Interpretation,
    Mention,
)

DERIVED_EXTRACTION_CONFIDENCE = 0.7  # a derived fact's confidence floor when none was given
DERIVED_MIN_SALIENCE = 0.9
DERIVE_THRESHOLD = 0.5  # extraction confidence that derives a fact from any source kind


# --- step 12: the derived semantic record ---------------------------------------------


def derive_semantic(capture: _Capture) -> None:
    request, interpretation = capture.request, capture.interpretation
    fact = semantic_fact(request.content)
    if fact is None:
        return
    if (
        request.source_kind != SourceKind.OBSERVATION
        and interpretation.proposed_type != MemoryType.SEMANTIC
        and not interpretation.extraction_confidence >= DERIVE_THRESHOLD
    ):
        return
    subject_text, predicate, obj = fact
    subject = canonical_id(capture, subject_text) or subject_text
    if isinstance(obj, str):
        obj = canonical_id(capture, obj) or obj
    offered = interpretation.extraction_confidence
    extraction = offered if offered > 0 else DERIVED_EXTRACTION_CONFIDENCE
    mentions = [
        Mention(
            surface=text,
            entity_kind=mention_kind(capture, value),
            canonical_entity_id=value,
            confidence=1.0,
        )
        for text, value in ((subject_text, subject), (fact[2], obj))
        if isinstance(value, str) and looks_like_entity_id(value)
    ]
    payload = SemanticPayload(
        subject=subject,
        predicate=predicate,
        object=obj,
        validity=Validity(mode="global"),
        evidence=[
            ProvenanceRef(
                source_type=capture.primary.type.value,
                source_id=capture.primary.id,
                timestamp=capture.ts,
            )
        ],
    )
    semantic = capture.derived_record(
        MemoryType.SEMANTIC,
        payload,
        confidence=_clamp01(max(capture.primary.confidence, extraction)),
        salience=max(capture.primary.salience, DERIVED_MIN_SALIENCE),
    )
    capture.semantic = replace(
        semantic,
        tags=_fitting_tags([*request.tags, *interpretation.topical_labels]),
        interpretation=Interpretation(
            status=InterpretationStatus.RESOLVED.value,
            # the fact in the content's words (the payload's subject holds the entity's id)
            summary=" ".join((subject_text, predicate, object_text(fact[2]))).strip(),
            proposed_type=MemoryType.SEMANTIC.value,
            topical_labels=list(interpretation.topical_labels),
            mentions=mentions,
            extraction_confidence=_clamp01(extraction),
        ),
    )
    if resolving(capture.uow, request.resolve):
        names = {
            entity.id: entity.payload.canonical_name
            for entity in capture.entities
            if isinstance(entity.payload, EntityPayload)
        }
        capture.decision = decision = decide(capture.uow, capture.semantic, names)
        if decision.match is not None and decision.outcome == REINFORCED:
            # Already known: the capture is linked to the fact it restates, which it
            # corroborates when written; nothing new is derived.
            capture.semantic = None
            capture.link(
                capture.primary.id, GraphPredicate.DERIVED_SEMANTIC, decision.match.record_id, 1.0
            )
            return
    capture.link(capture.primary.id, GraphPredicate.DERIVED_SEMANTIC, semantic.id, 1.0)
    for value, predicate_name in (
        (subject, GraphPredicate.SUBJECT_ENTITY),
        (obj, GraphPredicate.OBJECT_ENTITY),
    ):
        if isinstance(value, str) and looks_like_entity_id(value):
            entity = capture.lookup(value)
            if entity is not None and entity.type is MemoryType.ENTITY:
                capture.link(semantic.id, predicate_name, entity.id, 1.0)


def canonical_id(capture: _Capture, text: str) -> str:
    """The canonical entity id of the mention whose surface or alias ``text`` is."""
    wanted = _norm(text)
    for mention in capture.interpretation.mentions:
        names = {_norm(mention.surface), *map(_norm, mention.aliases)}
        if mention.canonical_entity_id and wanted in names:
            return mention.canonical_entity_id
    return ""


def mention_kind(capture: _Capture, entity_id: str) -> str:
    for mention in capture.interpretation.mentions:
        if mention.canonical_entity_id == entity_id:
            return mention.entity_kind
    return ""


def semantic_fact(content: Any) -> tuple[str, str, Any] | None:
    """(subject, predicate, object) of content (or its non-empty ``fact`` object) that has a
    non-blank subject and predicate and an ``object`` key; None otherwise."""
    if not isinstance(content, dict):
        return None
    nested = content.get("fact")
    fact = nested if isinstance(nested, dict) and nested else content
    subject = text_of(fact.get("subject")).strip()
    predicate = text_of(fact.get("predicate")).strip()
    if not subject or not predicate or "object" not in fact:
        return None
    return subject, predicate, fact["object"]

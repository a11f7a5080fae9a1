"""Capture steps 2, 3 and 5 (spec §2.4): the fallback interpretation built from the
content's keys, and the interpreter's answers merged over it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from membrane_es.commands.capture.common import (
    _first_non_blank,
    _norm,
    text_of,
    unique_labels,
)
from membrane_es.commands.interpreter import InterpretationLike
from membrane_es.commands.messages import CaptureMemory
from membrane_es.embedding.record_text import go_json
from membrane_es.schema.enums import (
    InterpretationStatus,
    MemoryType,
    SourceKind,
)
from membrane_es.schema.records import (
    Interpretation,
    Mention,
    ReferenceCandidate,
)

FALLBACK_EXTRACTION_CONFIDENCE = 0.25
FALLBACK_CANDIDATE_CONFIDENCE = 0.5

MENTION_KEYS = frozenset({"subject", "tool_name", "project", "file"})
ENTITY_TYPE_OF_KIND = {
    "person": "Person",
    "tool": "Tool",
    "project": "Project",
    "file": "File",
    "concept": "Concept",
}


# --- step 2: the fallback interpretation -------------------------------------------------------


def fallback_interpretation(request: CaptureMemory) -> Interpretation:
    """What the content's own keys say, before any interpreter."""
    content, context = request.content, request.context
    return Interpretation(
        status=InterpretationStatus.TENTATIVE.value,
        summary=_first_non_blank(request.summary, request.reason_to_remember, summarize(content)),
        proposed_type=request.proposed_type or infer_proposed_type(request.source_kind),
        topical_labels=unique_labels(request.tags),
        mentions=fallback_mentions(content),
        reference_candidates=[*fallback_references(content), *fallback_references(context)],
        extraction_confidence=FALLBACK_EXTRACTION_CONFIDENCE,
    )


def summarize(content: Any) -> str:
    """A string as it is; anything else as Go's compact JSON ("" if it cannot be encoded)."""
    if isinstance(content, str):
        return content
    try:
        return go_json(content)
    except ValueError:
        return ""


def infer_proposed_type(source_kind: str) -> str:
    if source_kind == SourceKind.WORKING_STATE:
        return MemoryType.WORKING.value
    if source_kind == SourceKind.OBSERVATION:
        return MemoryType.SEMANTIC.value
    return MemoryType.EPISODIC.value


def infer_entity_kind(key: str) -> str:
    """The kind of entity a content key names (``tool_name`` → tool, ``file_path`` → file,
    ``user`` → person). A key that says nothing of its kind — ``subject`` names a dog, a
    service or a person alike — makes a concept: capture types an entity by what it knows,
    not as a person by default (Membrane's interpretation types a subject as a person)."""
    key = key.lower()
    if "tool" in key:
        return "tool"
    if "project" in key:
        return "project"
    if "file" in key or "path" in key:
        return "file"
    if any(word in key for word in ("person", "user", "agent")):
        return "person"
    return "concept"


def entity_type_of_kind(kind: str) -> str:
    return ENTITY_TYPE_OF_KIND.get(kind.strip().lower(), "Other")


def fallback_mentions(content: Any) -> list[Mention]:
    """One mention per top-level key naming an entity (``*entity*``, ``subject``,
    ``tool_name``, ``project``, ``file``), in key order, unique by surface."""
    if not isinstance(content, dict):
        return []
    mentions: list[Mention] = []
    seen: set[str] = set()
    for key, value in content.items():
        if "entity" not in key and key not in MENTION_KEYS:
            continue
        surface = text_of(value).strip()
        if not surface or _norm(surface) in seen:
            continue
        seen.add(_norm(surface))
        mentions.append(
            Mention(
                surface=surface,
                entity_kind=infer_entity_kind(key),
                confidence=FALLBACK_CANDIDATE_CONFIDENCE,
            )
        )
    return mentions


def fallback_references(value: Any) -> list[ReferenceCandidate]:
    """One reference per top-level key that names a record (``*ref*``, ``*record_id*``,
    ``id``), in key order."""
    if not isinstance(value, dict):
        return []
    references = []
    for key, item in value.items():
        if "ref" not in key and "record_id" not in key and key != "id":
            continue
        ref = text_of(item).strip()
        if ref:
            references.append(ReferenceCandidate(ref=ref, confidence=FALLBACK_CANDIDATE_CONFIDENCE))
    return references


# --- steps 3 and 5: the interpreter --------------------------------------------------------------


def merge_interpretation(base: Interpretation, offered: Interpretation | None) -> Interpretation:
    """``offered`` over ``base``: non-empty fields win, labels are unioned, non-empty lists
    replace, a positive extraction confidence wins (at most 1)."""
    if offered is None:
        return base
    return Interpretation(
        status=offered.status if offered.status.strip() else base.status,
        summary=offered.summary if offered.summary.strip() else base.summary,
        proposed_type=(
            offered.proposed_type if offered.proposed_type.strip() else base.proposed_type
        ),
        topical_labels=unique_labels([*base.topical_labels, *offered.topical_labels]),
        mentions=offered.mentions or base.mentions,
        relation_candidates=offered.relation_candidates or base.relation_candidates,
        reference_candidates=offered.reference_candidates or base.reference_candidates,
        extraction_confidence=(
            min(1.0, offered.extraction_confidence)
            if offered.extraction_confidence > 0
            else base.extraction_confidence
        ),
    )


def _ask(method: Callable[..., InterpretationLike], *args: Any) -> Interpretation | None:
    """Call the interpreter; a failure, or an answer of the wrong shape, counts as no answer."""
    try:
        answer = method(*args)
        if answer is None:
            return None
        if isinstance(answer, Interpretation):
            return _copy(answer)
        return msgspec.convert(answer, Interpretation, strict=False)
    except Exception:  # the reference ignores interpreter errors (spec §2.4 step 3)
        return None


def _copy(interpretation: Interpretation) -> Interpretation:
    return msgspec.convert(msgspec.to_builtins(interpretation), Interpretation)


def _unresolved(interpretation: Interpretation) -> bool:
    return (
        any(m.surface.strip() and not m.canonical_entity_id for m in interpretation.mentions)
        or any(r.ref.strip() and not r.resolved for r in interpretation.reference_candidates)
        or any(c.predicate.strip() and not c.resolved for c in interpretation.relation_candidates)
    )

"""Small helpers every capture step shares: text forms, labels, inverse predicates."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import msgspec

from membrane_es.commands.messages import CaptureMemory
from membrane_es.embedding.record_text import go_sprint
from membrane_es.schema.payloads import (
    EntityPayload,
)
from membrane_es.schema.records import MemoryRecord
from membrane_es.schema.validation import MAX_TAG_BYTES, MAX_TAGS

replace = msgspec.structs.replace

INVERSE_PREDICATES: dict[str, str] = {
    "mentions_entity": "mentioned_in",
    "mentioned_in": "mentions_entity",
    "references_record": "referenced_by",
    "referenced_by": "references_record",
    "derived_semantic": "derived_from",
    "derived_from": "derived_semantic",
    "subject_entity": "fact_subject_of",
    "fact_subject_of": "subject_entity",
    "object_entity": "fact_object_of",
    "fact_object_of": "object_entity",
    "uses": "used_by",
    "used_by": "uses",
    "depends_on": "dependency_of",
    "dependency_of": "depends_on",
    "caused_by": "causes",
    "causes": "caused_by",
    "supports": "supported_by",
    "supported_by": "supports",
    "contradicts": "contradicted_by",
    "contradicted_by": "contradicts",
}


def _timestamp(request: CaptureMemory) -> datetime:
    assert isinstance(request.timestamp, datetime)  # _validated made it one
    return request.timestamp


def looks_like_entity_id(value: str) -> bool:
    return value.startswith("entity-") or value.count("-") >= 4


def inverse_predicate(predicate: str) -> str:
    """The predicate of the edge back (spec §1.6); ``inverse_of_<p>`` for any other."""
    normalised = predicate.strip().lower()
    return INVERSE_PREDICATES.get(normalised, f"inverse_of_{normalised}")


def text_of(value: Any) -> str:
    """A JSON value's string form: a string as is, nothing as "", anything else as Go prints
    it (``fmt.Sprint``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return go_sprint(value)


def unique_labels(values: Iterable[str]) -> list[str]:
    """Trimmed, blanks dropped, unique ignoring case (the first spelling kept)."""
    return _unique_ignoring_case(v.strip() for v in values if isinstance(v, str) and v.strip())


def _unique_ignoring_case(values: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    unique = []
    for value in values:
        key = value.lower()
        if key not in seen:
            seen.add(key)
            unique.append(value)
    return unique


def _fitting_tags(values: Iterable[str]) -> list[str]:
    """Tags for a derived record: unique ignoring case, within the record limits."""
    fitting = [t for t in unique_labels(values) if len(t.encode()) <= MAX_TAG_BYTES]
    return fitting[:MAX_TAGS]


def _first_non_blank(*values: str) -> str:
    for value in values:
        if value.strip():
            return value.strip()
    return ""


def _string_field(fields: dict[str, Any], key: str) -> str:
    value = fields.get(key)
    return value if isinstance(value, str) else ""


def _norm(value: str) -> str:
    return value.strip().lower()


def _entity_terms(payload: EntityPayload) -> set[str]:
    terms = {_norm(payload.canonical_name), *(_norm(a.value) for a in payload.aliases)}
    terms.discard("")
    return terms


def _clamp01(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


def _created_seconds(record: MemoryRecord) -> float:
    return record.created_at.timestamp() if record.created_at is not None else -math.inf

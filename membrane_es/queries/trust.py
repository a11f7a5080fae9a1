"""Trust rules, applied on every read path.

* at or below ``max_sensitivity``: the full record;
* exactly one level above: a redacted copy (ids, type, sensitivity, scores, tags, scope,
  timestamps; no payload, provenance, relations, interpretation or audit) — on list and graph
  reads only; by-id reads deny instead;
* two or more levels above: omitted;
* a non-empty ``scopes`` list admits scoped records only in those scopes; unscoped records
  are visible to every caller the sensitivity rule admits.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.schema.enums import DecayCurve, DeletionPolicy, Sensitivity
from membrane_es.schema.records import (
    DecayProfile,
    Lifecycle,
    MemoryRecord,
    Provenance,
    TrustContext,
)

Array = npt.NDArray[Any]


class Visibility(Enum):
    """How much of a record a caller may see."""

    FULL = "full"
    REDACTED = "redacted"
    NONE = "none"


def _level(value: str) -> int:
    try:
        return Sensitivity(value).level
    except ValueError:
        return -1


def scope_allows(trust: TrustContext, scope: str) -> bool:
    return not trust.scopes or not scope or scope in trust.scopes


def record_visibility(trust: TrustContext, sensitivity: str, scope: str) -> Visibility:
    """How much of a record with this sensitivity and scope the caller may see."""
    record_level = _level(sensitivity)
    max_level = _level(trust.max_sensitivity)
    if record_level < 0 or max_level < 0 or not scope_allows(trust, scope):
        return Visibility.NONE
    if record_level <= max_level:
        return Visibility.FULL
    if record_level == max_level + 1:
        return Visibility.REDACTED
    return Visibility.NONE


def visibility_columns(
    trust: TrustContext, levels: Array, scopes: Array, scope_ids: Mapping[str, int]
) -> tuple[Array, Array]:
    """:func:`record_visibility` over columns at once: (full, redacted) masks for records with these
    sensitivity ``levels`` and ``scopes`` (ids in ``scope_ids``, where id 0 is unscoped)."""
    max_level = _level(trust.max_sensitivity)
    if max_level < 0:
        nothing = np.zeros(len(levels), dtype=bool)
        return nothing, nothing.copy()
    if trust.scopes:
        allowed = [0, *(scope_ids[s] for s in trust.scopes if s in scope_ids)]
        in_scope = np.isin(scopes, np.asarray(allowed, dtype=scopes.dtype))
    else:
        in_scope = np.ones(len(levels), dtype=bool)
    valid = levels >= 0
    return (
        in_scope & valid & (levels <= max_level),
        in_scope & valid & (levels == max_level + 1),
    )


def allows(trust: TrustContext, record: MemoryRecord) -> bool:
    """The caller may read this record in full."""
    return record_visibility(trust, record.sensitivity, record.scope) is Visibility.FULL


def redact(record: MemoryRecord) -> MemoryRecord:
    """The metadata-only copy shown one level above the caller's trust."""
    return MemoryRecord(
        id=record.id,
        type=record.type,
        sensitivity=record.sensitivity,
        confidence=record.confidence,
        salience=record.salience,
        scope=record.scope,
        tags=list(record.tags),
        created_at=record.created_at,
        updated_at=record.updated_at,
        lifecycle=Lifecycle(
            decay=DecayProfile(
                curve=DecayCurve.EXPONENTIAL,
                half_life_seconds=0,
                min_salience=0.0,
                max_age_seconds=0,
                reinforcement_gain=0.0,
            ),
            last_reinforced_at=None,
            pinned=False,
            deletion_policy=DeletionPolicy.AUTO_PRUNE,
        ),
        provenance=Provenance(),
        relations=[],
        payload=None,
        interpretation=None,
        audit_log=[],
    )


def visible(trust: TrustContext, record: MemoryRecord) -> MemoryRecord | None:
    """What a list or graph read returns for this record: itself, a redacted copy, or nothing."""
    level = record_visibility(trust, record.sensitivity, record.scope)
    if level is Visibility.FULL:
        return record
    if level is Visibility.REDACTED:
        return redact(record)
    return None

"""The memory record and its parts: lifecycle, provenance, relations, audit, interpretation.

Field names, nesting and JSON keys follow the reference JSON form. Every Struct omits
fields at their default from its encoded form, except fields the reference always writes:
those use a factory default, which msgspec always encodes.
"""

from __future__ import annotations

from typing import Any

import msgspec

from membrane_es.errors import ValidationError
from membrane_es.schema.enums import (
    AuditAction,
    DecayCurve,
    DeletionPolicy,
    MemoryType,
    ProvenanceKind,
    Sensitivity,
)
from membrane_es.schema.payloads import Payload
from membrane_es.schema.timestamps import Timestamp

DEFAULT_HALF_LIFE_SECONDS = 86_400
DEFAULT_REINFORCEMENT_GAIN = 0.1


class _Part(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """Base of every record part: keyword-only, defaults omitted from JSON."""


def _always(value: Any) -> Any:
    """A default that msgspec still encodes (it only omits plain and empty-container defaults).

    Only for immutable values: the factory returns the same object every time.
    """
    return msgspec.field(default_factory=lambda: value)


class DecayProfile(_Part):
    curve: DecayCurve = _always(DecayCurve.EXPONENTIAL)
    half_life_seconds: int = _always(DEFAULT_HALF_LIFE_SECONDS)
    min_salience: float = 0.0
    max_age_seconds: int = 0
    reinforcement_gain: float = _always(DEFAULT_REINFORCEMENT_GAIN)


class Lifecycle(_Part):
    decay: DecayProfile = msgspec.field(default_factory=DecayProfile)
    last_reinforced_at: Timestamp | None = None
    pinned: bool = False
    deletion_policy: DeletionPolicy = _always(DeletionPolicy.AUTO_PRUNE)


class ProvenanceSource(_Part):
    kind: ProvenanceKind = _always(ProvenanceKind.EVENT)
    ref: str = ""
    hash: str = ""
    created_by: str = ""
    timestamp: Timestamp | None = None


class Provenance(_Part):
    sources: list[ProvenanceSource] = msgspec.field(default_factory=list)
    created_by: str = ""


class Relation(_Part):
    predicate: str
    target_id: str
    weight: float = 1.0
    created_at: Timestamp | None = None


class GraphEdge(_Part):
    source_id: str
    predicate: str
    target_id: str
    weight: float = 1.0
    created_at: Timestamp | None = None


class AuditEntry(_Part):
    action: AuditAction
    actor: str
    timestamp: Timestamp
    rationale: str = ""


class Mention(_Part):
    surface: str = ""
    entity_kind: str = ""
    canonical_entity_id: str = ""
    confidence: float = 0.0
    aliases: list[str] = msgspec.field(default_factory=list)


class RelationCandidate(_Part):
    predicate: str = ""
    target_record_id: str = ""
    target_entity_id: str = ""
    confidence: float = 0.0
    resolved: bool = False


class ReferenceCandidate(_Part):
    ref: str = ""
    target_record_id: str = ""
    target_entity_id: str = ""
    confidence: float = 0.0
    resolved: bool = False


class Interpretation(_Part):
    status: str = ""
    summary: str = ""
    proposed_type: str = ""
    topical_labels: list[str] = msgspec.field(default_factory=list)
    mentions: list[Mention] = msgspec.field(default_factory=list)
    relation_candidates: list[RelationCandidate] = msgspec.field(default_factory=list)
    reference_candidates: list[ReferenceCandidate] = msgspec.field(default_factory=list)
    extraction_confidence: float = 0.0


class Resolution(_Part):
    """What resolution on write did with a record a caller wrote (see
    :mod:`membrane_es.commands.resolution`). Only on the record a write returns: never
    stored, absent when resolution was off.

    ``outcome``: ``created`` (nothing it matched or replaced), ``reinforced`` (it matched an
    active record, which is returned, gaining the write's source, instead of a duplicate),
    ``superseded`` (it replaced ``records``, earlier values of a single-valued predicate), or
    ``kept_alongside`` (``records`` hold other values of its subject and predicate, kept
    because the predicate is many-valued or not known to be single-valued).
    """

    outcome: str
    rationale: str = ""
    records: list[str] = msgspec.field(default_factory=list)


class MemoryRecord(_Part, kw_only=True):
    """One typed memory: what the agent stores, revises and retrieves.

    ``salience`` is the value at the moment the record was read (decay is evaluated at read
    time, never written back); ``audit_log`` is derived from the record's events.
    """

    id: str = _always("")
    type: MemoryType
    sensitivity: Sensitivity = _always(Sensitivity.LOW)
    confidence: float = _always(1.0)
    salience: float = _always(1.0)
    scope: str = ""
    tags: list[str] = msgspec.field(default_factory=list)
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    lifecycle: Lifecycle = msgspec.field(default_factory=Lifecycle)
    provenance: Provenance = msgspec.field(default_factory=Provenance)
    relations: list[Relation] = msgspec.field(default_factory=list)
    payload: Payload | None = None
    interpretation: Interpretation | None = None
    audit_log: list[AuditEntry] = msgspec.field(default_factory=lambda: [])
    # What resolution on write did with it: on a write's answer only, never stored.
    resolution: Resolution | None = None


class Embedding(_Part):
    """A record's vector as its ``Created`` event holds it: float32, little-endian bytes (the
    log keeps them at half precision, :mod:`membrane_es.embedding.vectors`).

    A text longer than the model reads also keeps ``passages``: the vectors of its further
    passages (:mod:`membrane_es.embedding.passages`), one after another, in the same form.
    Once the record is forgotten its vectors are gone: ``vector`` and ``passages`` are empty
    and ``dimensions`` says how many zeros stand in the vector's place (the row keeps its
    position in the views)."""

    model: str
    vector: bytes
    dimensions: int = 0
    passages: bytes = b""


class TrustContext(_Part):
    """Who is asking: the highest sensitivity it may read in full, and its allowed scopes.

    An empty ``scopes`` list applies no scope filter; unscoped records are visible to all.
    """

    max_sensitivity: Sensitivity = _always(Sensitivity.LOW)
    authenticated: bool = False
    actor_id: str = ""
    scopes: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        # Made in code, a Struct's fields are not checked: a string where the list of scopes
        # belongs would match nothing, silently (each letter a scope).
        scopes = self.scopes
        if isinstance(scopes, str | bytes) or not isinstance(scopes, list | tuple):
            raise ValidationError(
                "trust.scopes", f"must be a list of scopes, not {type(scopes).__name__}"
            )
        for i, scope in enumerate(scopes):
            if not isinstance(scope, str):
                raise ValidationError(
                    f"trust.scopes[{i}]", f"must be a scope (text), not {type(scope).__name__}"
                )
        if isinstance(scopes, tuple):
            self.scopes = list(scopes)


_copy_encoder = msgspec.msgpack.Encoder()
_copy_decoder = msgspec.msgpack.Decoder(MemoryRecord)


def copy_record(record: MemoryRecord) -> MemoryRecord:
    """A deep, independent copy (records handed to callers never share state with the engine)."""
    return _copy_decoder.decode(_copy_encoder.encode(record))

"""Capture steps 9–11 (spec §2.4): mentions, references and relation candidates resolved
against the candidates and the store, worked out in memory on a :class:`_Capture`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from membrane_es.aggregates.identity import new_record_id
from membrane_es.commands.capture.common import (
    _clamp01,
    _entity_terms,
    _norm,
    _timestamp,
    _unique_ignoring_case,
    inverse_predicate,
)
from membrane_es.commands.capture.interpretation import (
    entity_type_of_kind,
)
from membrane_es.commands.messages import CaptureMemory
from membrane_es.commands.resolution import Decision
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.errors import NotFoundError
from membrane_es.schema.enums import (
    DeletionPolicy,
    GraphPredicate,
    MemoryType,
    Sensitivity,
)
from membrane_es.schema.payloads import (
    EntityAlias,
    EntityIdentifier,
    EntityPayload,
    EpisodicPayload,
)
from membrane_es.schema.records import (
    GraphEdge,
    Interpretation,
    Lifecycle,
    MemoryRecord,
    Mention,
    Provenance,
    ReferenceCandidate,
    Relation,
    RelationCandidate,
)
from membrane_es.timekeeping.decay import engine_profile

ENTITY_NAMESPACE = "membrane"
DEFAULT_ENTITY_NAME = "entity"


@dataclass
class _Capture:
    """One capture worked out in memory, then written at once."""

    request: CaptureMemory
    interpretation: Interpretation
    list_pool: Callable[[], list[MemoryRecord]]  # step 4, run when a step first needs it
    primary: MemoryRecord
    kind: str
    uow: UnitOfWork
    entities: list[MemoryRecord] = field(default_factory=list)  # created here
    semantic: MemoryRecord | None = None
    # What resolution on write decided for the derived fact (None: not resolved)
    decision: Decision | None = None
    # outgoing relations of the records this capture creates, and of existing ones it touches
    relations: dict[str, list[Relation]] = field(default_factory=dict)
    edges: list[GraphEdge] = field(default_factory=list)
    _looked_up: dict[str, MemoryRecord | None] = field(default_factory=dict)

    @property
    def ts(self) -> datetime:
        return _timestamp(self.request)

    @cached_property
    def pool(self) -> list[MemoryRecord]:
        """The candidate pool (step 4): listed once, when first needed. A capture that names
        nothing to resolve (most conversation turns) never pays for it; nothing is written
        before the capture's one write, so it lists the same records whenever it runs."""
        return self.list_pool()

    @property
    def candidates(self) -> list[MemoryRecord]:
        """The pool, then the primary, then the entities created so far."""
        return [*self.pool, self.primary, *self.entities]

    # --- lookups ---------------------------------------------------------------------------

    def lookup(self, record_id: str) -> MemoryRecord | None:
        """A record by id: among the candidates, else from the store; None if there is none."""
        if not record_id:
            return None
        for record in self.candidates:
            if record.id == record_id:
                return record
        if record_id not in self._looked_up:
            try:
                found: MemoryRecord | None = self.uow.get(record_id).view(self.uow.now())
            except NotFoundError:
                found = None
            self._looked_up[record_id] = found
        return self._looked_up[record_id]

    # --- step 9: mentions -------------------------------------------------------------------

    def resolve_mention(self, mention: Mention) -> None:
        entity = self.find_entity(mention) or self.create_entity(mention)
        self.link(self.primary.id, GraphPredicate.MENTIONS_ENTITY, entity.id, 1.0)
        mention.canonical_entity_id = entity.id
        if not mention.confidence > 0:
            mention.confidence = 1.0

    def find_entity(self, mention: Mention) -> MemoryRecord | None:
        if mention.canonical_entity_id:
            named = self.lookup(mention.canonical_entity_id)
            if named is not None and named.type is MemoryType.ENTITY:
                return named
        terms = list(dict.fromkeys(_norm(t) for t in (mention.surface, *mention.aliases)))
        terms = [term for term in terms if term]
        for term in terms:
            for found in self.uow.find_entities(term, self.request.scope, 1):
                if found.type is MemoryType.ENTITY:
                    return found
        for record in self.candidates:
            payload = record.payload
            if isinstance(payload, EntityPayload) and _entity_terms(payload) & set(terms):
                return record
        return None

    def create_entity(self, mention: Mention) -> MemoryRecord:
        canonical = mention.surface.strip() or DEFAULT_ENTITY_NAME
        primary_type = entity_type_of_kind(mention.entity_kind)
        aliases = _unique_ignoring_case(
            a for a in (canonical, *(alias.strip() for alias in mention.aliases)) if a
        )
        payload = EntityPayload(
            canonical_name=canonical,
            primary_type=primary_type,
            types=[primary_type],
            aliases=[EntityAlias(value=alias) for alias in aliases],
            identifiers=[EntityIdentifier(namespace=ENTITY_NAMESPACE, value=new_record_id())],
            summary=canonical,
        )
        entity = self.derived_record(MemoryType.ENTITY, payload, confidence=1.0, salience=1.0)
        self.entities.append(entity)
        return entity

    # --- step 10: references -------------------------------------------------------------------

    def resolve_reference(self, reference: ReferenceCandidate) -> None:
        target = (
            self.lookup(reference.target_record_id)
            or self.lookup(reference.target_entity_id)
            or self.scan_for_ref(reference.ref)
        )
        if target is None:
            reference.resolved = False
            reference.target_record_id = reference.target_entity_id = ""
            return
        reference.resolved = True
        if target.id == self.primary.id:
            reference.target_record_id = target.id
            return
        if target.type is MemoryType.ENTITY:
            reference.target_entity_id = target.id
        else:
            reference.target_record_id = target.id
        if not reference.confidence > 0:
            reference.confidence = 1.0
        self.link(self.primary.id, GraphPredicate.REFERENCES_RECORD, target.id, 1.0)

    def scan_for_ref(self, ref: str) -> MemoryRecord | None:
        """The first candidate whose id is ``ref`` or whose timeline has an event with it."""
        wanted = _norm(ref)
        if not wanted:
            return None
        for record in self.candidates:
            if _norm(record.id) == wanted:
                return record
            payload = record.payload
            if isinstance(payload, EpisodicPayload) and any(
                _norm(event.ref) == wanted for event in payload.timeline
            ):
                return record
        return None

    # --- step 11: relation candidates -------------------------------------------------------

    def resolve_relation(self, candidate: RelationCandidate) -> None:
        target = self.lookup(candidate.target_record_id) or self.lookup(candidate.target_entity_id)
        if target is None or target.id == self.primary.id:
            candidate.resolved = False
            candidate.target_record_id = candidate.target_entity_id = ""
            return
        predicate = candidate.predicate.strip().lower()
        if not predicate:
            candidate.resolved = False
            return
        if target.type is MemoryType.ENTITY:
            candidate.target_entity_id = target.id
        else:
            candidate.target_record_id = target.id
        candidate.resolved = True
        confidence = candidate.confidence if candidate.confidence > 0 else 1.0
        candidate.confidence = _clamp01(confidence)
        self.link(self.primary.id, predicate, target.id, candidate.confidence or 1.0)

    # --- building -------------------------------------------------------------------------

    def derived_record(
        self, memory_type: MemoryType, payload: Any, *, confidence: float, salience: float
    ) -> MemoryRecord:
        """A record as the reference's ``NewMemoryRecord`` makes it, dated by the capture."""
        request = self.request
        return MemoryRecord(
            id=new_record_id(),
            type=memory_type,
            sensitivity=Sensitivity(request.sensitivity),
            confidence=confidence,
            salience=salience,
            scope=request.scope,
            created_at=self.ts,
            updated_at=self.ts,
            lifecycle=Lifecycle(
                decay=engine_profile(memory_type),
                deletion_policy=DeletionPolicy.AUTO_PRUNE,
            ),
            provenance=Provenance(created_by=request.source),
            payload=payload,
        )

    def link(self, source_id: str, predicate: str, target_id: str, weight: float) -> None:
        """Write ``source -predicate-> target`` and its inverse back (once each)."""
        predicate = str(predicate)
        for edge_source, edge_predicate, edge_target in (
            (source_id, predicate, target_id),
            (target_id, inverse_predicate(predicate), source_id),
        ):
            outgoing = self.relations.setdefault(edge_source, [])
            if any(r.predicate == edge_predicate and r.target_id == edge_target for r in outgoing):
                continue
            relation = Relation(
                predicate=edge_predicate, target_id=edge_target, weight=weight, created_at=self.ts
            )
            outgoing.append(relation)
            self.edges.append(
                GraphEdge(
                    source_id=edge_source,
                    predicate=edge_predicate,
                    target_id=edge_target,
                    weight=weight,
                    created_at=self.ts,
                )
            )

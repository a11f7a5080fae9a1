"""Choosing the roots of a graph retrieval (spec §3.5 steps 2–4).

* **Entity roots**: entities whose canonical name or an alias *is* the whole descriptor
  (trimmed, lower-cased) join the ranked candidates, when entities are among the requested
  types. They pass the same filters as every candidate.
* **Rerank** (when the descriptor is not blank): candidate ``i`` of ``n`` scores
  ``(n − i) + root_boost``, so rank order decides unless a record is tied to what the
  descriptor names: an entity named by it, a record mentioning it, a record related to an
  entity named by it (more for the predicates that mean "is about"). Ties keep rank order.

Matching is the reference's ``lexicalMatch``: both sides trimmed and lower-cased, neither
empty, and one equal to or a substring of the other. A redacted record carries no payload,
interpretation or relations, so its boost is 0; a related entity counts only if the caller
may read it in full.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from membrane_es.projections.records import TYPE_CODE
from membrane_es.queries.candidates import Candidates, Filters, admit, visibility
from membrane_es.queries.ranking import order
from membrane_es.queries.snapshot import Snapshot
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.payloads import EntityPayload
from membrane_es.schema.records import MemoryRecord, TrustContext

CANONICAL_BOOST = 100  # an entity whose canonical name matches
ALIAS_BOOST = 75  # ... one of whose aliases matches
TYPE_BOOST = 15  # ... one of whose types matches
MENTION_SURFACE_BOOST = 30  # a record that mentions the descriptor (first such mention)
MENTION_ALIAS_BOOST = 20  # ... a mention with a matching alias (each, until a surface match)
RELATED_CANONICAL_BOOST = 60  # a relation to an entity whose canonical name matches
RELATED_ALIAS_BOOST = 45  # ... one of whose aliases matches
PREDICATE_BOOSTS = {
    "mentions_entity": 20,
    "mentioned_in": 20,
    "subject_entity": 25,
    "fact_subject_of": 25,
    "object_entity": 25,
    "fact_object_of": 25,
    "supports": 10,
    "supported_by": 10,
    "depends_on": 10,
    "dependency_of": 10,
}

EntityNames = tuple[str, tuple[str, ...]]  # (canonical name, aliases), normalised


def lexical_match(value: str, query: str) -> bool:
    value, query = value.strip().lower(), query.strip().lower()
    return bool(value and query) and (value == query or query in value or value in query)


def relation_boost(predicate: str, base: int) -> int:
    return base + PREDICATE_BOOSTS.get(predicate.strip().lower(), 0)


def entity_types(payload: EntityPayload) -> list[str]:
    """The primary type then the others, trimmed, blanks dropped, case-insensitively unique."""
    seen: set[str] = set()
    types = []
    for value in (payload.primary_type, *payload.types):
        value = value.strip()
        if value and value.lower() not in seen:
            seen.add(value.lower())
            types.append(value)
    return types


def root_boost(
    record: MemoryRecord, query: str, related: Callable[[str], EntityNames | None]
) -> int:
    """How strongly a candidate is tied to what the descriptor names (``related`` gives the
    names of an entity the caller may read in full, by id; None otherwise)."""
    boost = 0
    payload = record.payload
    if isinstance(payload, EntityPayload):
        if lexical_match(payload.canonical_name, query):
            boost += CANONICAL_BOOST
        if any(lexical_match(alias.value, query) for alias in payload.aliases):
            boost += ALIAS_BOOST
        if any(lexical_match(kind, query) for kind in entity_types(payload)):
            boost += TYPE_BOOST
    if record.interpretation is not None:
        for mention in record.interpretation.mentions:
            if lexical_match(mention.surface, query):
                boost += MENTION_SURFACE_BOOST
                break
            if any(lexical_match(alias, query) for alias in mention.aliases):
                boost += MENTION_ALIAS_BOOST
    for relation in record.relations:
        names = related(relation.target_id)
        if names is None:
            continue
        canonical, aliases = names
        if lexical_match(canonical, query):
            boost += relation_boost(relation.predicate, RELATED_CANONICAL_BOOST)
        if any(lexical_match(alias, query) for alias in aliases):
            boost += relation_boost(relation.predicate, RELATED_ALIAS_BOOST)
    return boost


def rerank(boosts: Sequence[int]) -> list[int]:
    """Positions of candidates (given in rank order) by ``(n − i) + boost``; stable."""
    count = len(boosts)
    return sorted(range(count), key=lambda i: -((count - i) + boosts[i]))


def entity_roots(
    snapshot: Snapshot, descriptor: str, trust: TrustContext, filters: Filters, limit: int
) -> Candidates:
    """Entities named exactly by the descriptor that pass the filters; the ``limit`` most
    salient (ties: newer, then id)."""
    rows = [r for r in snapshot.views.entities.rows_named(descriptor) if r < snapshot.size]
    entity_only = Filters(
        types=frozenset({MemoryType.ENTITY}),
        min_salience=filters.min_salience,
        include_retracted=filters.include_retracted,
        valid_at=filters.valid_at,
    )
    found = admit(snapshot, np.asarray(rows, dtype=np.int64), trust, entity_only)
    table = snapshot.table

    def id_of(i: int) -> str:
        return table.ids[int(found.rows[i])]

    created = table.content["created_at"][found.rows]
    return found.take(order(found.salience, found.salience, created, id_of, limit))


def related_entities(
    snapshot: Snapshot, trust: TrustContext
) -> Callable[[str], EntityNames | None]:
    """Names of the entity a relation points at, if it existed then and the caller may read
    it in full (looked up once per id)."""
    cache: dict[str, EntityNames | None] = {}
    table, names = snapshot.table, snapshot.views.entities.names

    def lookup(record_id: str) -> EntityNames | None:
        if record_id in cache:
            return cache[record_id]
        found: EntityNames | None = None
        row = snapshot.row(record_id) if record_id else None
        if row is not None and table.content["type"][row] == TYPE_CODE[MemoryType.ENTITY]:
            full, _ = visibility(snapshot, np.array([row]), trust)
            if full[0]:
                found = names.get(row)
        cache[record_id] = found
        return found

    return lookup

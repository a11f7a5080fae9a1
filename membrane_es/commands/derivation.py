"""Shared steps of consolidation: building derived records and writing them with their links.

Every derived record points at the episodes it came from with ``derived_from`` (forward only,
spec §1.6), and at the entities it names (with the inverse edge on the entity); the record,
its relations and the entities' inverse edges are one atomic write. Reinforcing an existing
record from an episode adds the ``derived_from`` relation to that episode in the same write,
so the store itself records which (record, episode) pairs are done: a later run skips them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from membrane_es.aggregates.identity import new_record_id
from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.commands.capture import inverse_predicate
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.schema.enums import DeletionPolicy, GraphPredicate, MemoryType, Sensitivity
from membrane_es.schema.records import (
    Lifecycle,
    MemoryRecord,
    Provenance,
    Relation,
    copy_record,
)
from membrane_es.schema.validation import validate_record
from membrane_es.timekeeping.decay import engine_profile

replace = msgspec.structs.replace

DERIVED_FROM = GraphPredicate.DERIVED_FROM.value
CONSOLIDATED_TAG = "consolidated"


def new_derived(
    memory_type: MemoryType,
    payload: Any,
    *,
    sensitivity: Sensitivity,
    scope: str,
    confidence: float,
    tags: list[str],
    provenance: Provenance,
) -> MemoryRecord:
    """A record as the reference's ``NewMemoryRecord`` makes it (salience 1, auto-prune),
    with the engine's long-lived half-life for its type; times are stamped when it is written."""
    return MemoryRecord(
        id=new_record_id(),
        type=memory_type,
        sensitivity=sensitivity,
        confidence=confidence,
        salience=1.0,
        scope=scope,
        tags=tags,
        lifecycle=Lifecycle(
            decay=engine_profile(memory_type),
            deletion_policy=DeletionPolicy.AUTO_PRUNE,
        ),
        provenance=provenance,
        payload=payload,
    )


def write_derived(
    uow: UnitOfWork,
    record: MemoryRecord,
    *,
    sources: Sequence[str],
    links: Sequence[tuple[str, str]],
    actor: str,
    rationale: str,
) -> MemoryRecord:
    """Create ``record`` with ``derived_from`` → each source and ``predicate`` → each linked
    entity, and each entity's inverse edge back, in one write; returns the record as stored."""
    at = uow.now()
    relations = [_relation(DERIVED_FROM, source, at) for source in dict.fromkeys(sources)]
    relations += [_relation(predicate, target, at) for predicate, target in dict.fromkeys(links)]
    record = replace(
        record,
        created_at=at,
        updated_at=at,
        lifecycle=replace(record.lifecycle, last_reinforced_at=at),
        relations=relations,
    )
    validate_record(record)
    created = RecordAggregate.create(
        record, actor=actor, rationale=rationale, at=at, embedding=uow.embed(record)
    )
    touched: dict[str, RecordAggregate] = {}
    for predicate, target in dict.fromkeys(links):
        entity = touched.get(target) or uow.get(target)
        touched[target] = entity
        stamp = uow.now()
        entity.add_relation(
            _relation(inverse_predicate(predicate), record.id, stamp),
            actor=actor,
            rationale=rationale,
            at=stamp,
        )
    uow.save(created, *touched.values())
    return copy_record(created.view(uow.now()))


def reinforce_from(
    uow: UnitOfWork, record_id: str, episodes: Iterable[str], *, actor: str, rationale: str
) -> bool:
    """Reinforce an existing record for the episodes it is not yet derived from, and link it
    to them, in one write; False (nothing written) when it is derived from all of them."""
    aggregate = uow.get(record_id)
    linked = derived_sources(aggregate)
    new = [episode for episode in dict.fromkeys(episodes) if episode not in linked]
    if not new:
        return False
    aggregate.reinforce(actor=actor, rationale=rationale, at=uow.now())
    for episode in new:
        stamp = uow.now()
        aggregate.add_relation(
            _relation(DERIVED_FROM, episode, stamp), actor=actor, rationale=rationale, at=stamp
        )
    uow.save(aggregate)
    return True


def derived_sources(aggregate: RecordAggregate) -> set[str]:
    """The records this one has a ``derived_from`` relation to."""
    return {r.target_id for r in aggregate.state.relations if r.predicate == DERIVED_FROM}


def entity_id(uow: UnitOfWork, term: str, scope: str) -> str:
    """The id of the entity named exactly ``term`` in ``scope`` (or unscoped), or ""."""
    found = uow.find_entities(term, scope, 1)
    return found[0].id if found else ""


def consolidated_tags(source_tags: Iterable[str]) -> list[str]:
    """``consolidated`` first, then the source's tags except any spelling of it."""
    kept = [tag for tag in source_tags if tag.lower() != CONSOLIDATED_TAG]
    return [CONSOLIDATED_TAG, *kept]


def _relation(predicate: str, target_id: str, at: Any) -> Relation:
    return Relation(predicate=predicate, target_id=target_id, weight=1.0, created_at=at)

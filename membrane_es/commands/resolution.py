"""Resolution on write: a repeated fact is one record, a changed fact supersedes the old one.

Before a semantic, entity or competence record is created (by ``create_record``, an
``ingest_observation``, or the fact a capture derives), it is compared with the active
records of the same type, scope and sensitivity (:mod:`membrane_es.schema.fact_keys` says
what *matches*):

* it **matches** one: nothing new is stored; that record gains the write's source and is
  reinforced (a ``Corroborated`` event says so) and is returned, marked ``reinforced``;
* it is a **semantic fact with the subject and predicate** of active ones but another
  object: the store's predicate vocabulary (:mod:`membrane_es.schema.predicates`) decides —
  single-valued: the new record supersedes them, with a rationale (``superseded``); an
  earlier value written late (its event time before theirs) is stored already superseded by
  the newest (``outdated``); many-valued or unknown: both stay (``kept_alongside``). For an
  unknown predicate an interpreter with a ``reconcile`` method may decide instead;
* otherwise it is created (``created``).

Only records of the same sensitivity and scope are ever compared: a write never reinforces,
reveals or retracts a record its own readers could not read. Episodic, working and plan
records are never merged, nor is a record the caller gave an id of its own. A caller turns
it off per call (``resolve=False``) or per store (``EngineOptions.resolve_writes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import GraphPredicate, ProvenanceKind
from membrane_es.schema.fact_keys import RESOLVED_TYPES, normal_text, sameness_key, topic_key
from membrane_es.schema.payloads import RevisionState, SemanticPayload
from membrane_es.schema.predicates import MANY, SINGLE, UNKNOWN, PredicateVocabulary
from membrane_es.schema.records import (
    MemoryRecord,
    ProvenanceSource,
    Relation,
    Resolution,
    copy_record,
)

CREATED = "created"
REINFORCED = "reinforced"
SUPERSEDED = "superseded"
KEPT_ALONGSIDE = "kept_alongside"
OUTDATED = "outdated"
RESOLUTION_ACTOR = "resolution"


@dataclass(frozen=True)
class ResolutionSettings:
    """A store's resolution on write: whether it is on unless a call says, and its predicate
    vocabulary."""

    on: bool = True
    vocabulary: PredicateVocabulary = field(default_factory=PredicateVocabulary.builtin)


@dataclass
class Decision:
    """What to do with a record about to be created."""

    outcome: str
    rationale: str = ""
    match: RecordAggregate | None = None  # reinforced: the record it matched
    replaced: list[RecordAggregate] = field(default_factory=list)  # superseded by it
    others: list[str] = field(default_factory=list)  # kept alongside it
    newer: RecordAggregate | None = None  # outdated: the value that supersedes it at once

    def resolution(self) -> Resolution:
        records = (
            [self.match.record_id]
            if self.match is not None
            else [a.record_id for a in self.replaced] or list(self.others)
        )
        if self.newer is not None:
            records = [self.newer.record_id]
        return Resolution(outcome=self.outcome, rationale=self.rationale, records=records)


def resolving(uow: UnitOfWork, asked: bool | None, *, caller_id: bool = False) -> bool:
    """Whether this write is resolved: the call's choice, else the store's; never for a
    record whose id the caller chose (it asked for that record to exist)."""
    asked = check_resolve(asked)
    on = uow.resolution.on if asked is None else asked
    return on and not caller_id


def decide(
    uow: UnitOfWork, record: MemoryRecord, names: Mapping[str, str] | None = None
) -> Decision:
    """What creating ``record`` means for the active records (see the module); ``names``:
    the canonical names of entities the same write is about to create, by id."""
    if record.type not in RESOLVED_TYPES:
        return Decision(CREATED)
    known = dict(names or {})

    def name_of(value: str) -> str | None:
        return known.get(value) or uow.entity_name(value)

    same = sameness_key(record, name_of)
    if same is None:
        return Decision(CREATED)
    peers = [a for a in uow.facts_keyed(same, topic=False) if _peer(a, record)]
    if peers:
        match = peers[0]
        return Decision(REINFORCED, rationale=f"restated: matches {match.record_id}", match=match)
    topic = topic_key(record, name_of)
    if topic is None:
        return Decision(CREATED)
    others = [a for a in uow.facts_keyed(topic, topic=True) if _peer(a, record)]
    if not others:
        return Decision(CREATED)
    payload = record.payload
    assert isinstance(payload, SemanticPayload)
    kind = uow.resolution.vocabulary.kind(payload.predicate)
    reason = ""
    if kind == UNKNOWN:
        kind, others, reason, restated = _reconciled(uow, record, others)
        if restated is not None:
            return Decision(REINFORCED, rationale=reason or "restated", match=restated)
    if kind != SINGLE:
        why = reason or (
            f"{payload.predicate} is many-valued"
            if kind == MANY
            else f"{payload.predicate} is not known to be single-valued"
        )
        return Decision(KEPT_ALONGSIDE, rationale=why, others=[a.record_id for a in others])
    new_value = _value_text(payload.object, name_of)
    moment = _event_time_of(record)
    newer = [a for a in others if _event_time(a) > moment]
    if newer:
        latest = newer[-1]
        was = _value_text(_payload(latest).object, name_of)
        why = reason or (
            f"{payload.predicate} is single-valued: {new_value!r} is an earlier value than {was!r}"
        )
        return Decision(OUTDATED, rationale=why, newer=latest)
    old_values = ", ".join(repr(_value_text(_payload(a).object, name_of)) for a in others)
    why = reason or (f"{payload.predicate} is single-valued: {new_value!r} replaces {old_values}")
    return Decision(SUPERSEDED, rationale=why, replaced=others)


# --- carrying a decision out ---------------------------------------------------------------


def write_source(record: MemoryRecord, actor: str, at: datetime) -> ProvenanceSource:
    """The source a repeat adds to the record it matched: the new record's first, else the
    writer."""
    sources = record.provenance.sources
    if sources:
        return sources[0]
    return ProvenanceSource(kind=ProvenanceKind.EVENT, ref=actor, created_by=actor, timestamp=at)


def corroborate(
    uow: UnitOfWork, decision: Decision, source: ProvenanceSource, actor: str
) -> RecordAggregate:
    """The matched record gains ``source`` and is reinforced (saved by the caller)."""
    match = decision.match
    assert match is not None
    match.corroborate(
        source, actor=actor or RESOLUTION_ACTOR, rationale=decision.rationale, at=uow.now()
    )
    return match


def with_supersedes(record: MemoryRecord, decision: Decision, at: datetime) -> MemoryRecord:
    """The new record of a supersession, related to each record it replaces (and, for a
    fact, with its revision state naming the latest)."""
    if decision.outcome != SUPERSEDED or not decision.replaced:
        return record
    relations = list(record.relations)
    for old in decision.replaced:
        relations.append(
            Relation(
                predicate=GraphPredicate.SUPERSEDES.value,
                target_id=old.record_id,
                weight=1.0,
                created_at=at,
            )
        )
    payload = record.payload
    if isinstance(payload, SemanticPayload):
        revision = msgspec.structs.replace(
            payload.revision or RevisionState(),
            supersedes=decision.replaced[-1].record_id,
            status="active",
        )
        payload = msgspec.structs.replace(payload, revision=revision)
    return msgspec.structs.replace(record, relations=relations, payload=payload)


def settle(
    uow: UnitOfWork, decision: Decision, created: RecordAggregate, actor: str
) -> list[RecordAggregate]:
    """The changes a created record's decision makes to records (the caller saves them with
    it, in one write): the records it replaces superseded, or itself superseded at once by
    the newer value it came after."""
    actor = actor or RESOLUTION_ACTOR
    if decision.outcome == SUPERSEDED:
        for old in decision.replaced:
            old.supersede(
                created.record_id, actor=actor, rationale=decision.rationale, at=uow.now()
            )
        return list(decision.replaced)
    if decision.outcome == OUTDATED and decision.newer is not None:
        created.supersede(
            decision.newer.record_id, actor=actor, rationale=decision.rationale, at=uow.now()
        )
    return []


def marked(record: MemoryRecord, decision: Decision | None) -> MemoryRecord:
    """A write's answer, saying what resolution did (unmarked when it was off)."""
    if decision is None:
        return record
    return msgspec.structs.replace(record, resolution=decision.resolution())


def answer(
    uow: UnitOfWork,
    aggregate: RecordAggregate,
    decision: Decision | None,
    at: datetime | None = None,
) -> MemoryRecord:
    """The record a write returns, as of ``at`` (default: the next event time), marked."""
    return marked(copy_record(aggregate.view(at or uow.now())), decision)


# --- helpers ------------------------------------------------------------------------------


def _peer(aggregate: RecordAggregate, record: MemoryRecord) -> bool:
    """An active record the new one may be resolved against: same type, scope and
    sensitivity (a write never touches what its readers could not read)."""
    content = aggregate.state.content
    return (
        not aggregate.state.retracted
        and aggregate.record_id != record.id
        and content.type is record.type
        and content.scope == record.scope
        and content.sensitivity == record.sensitivity
    )


def _payload(aggregate: RecordAggregate) -> SemanticPayload:
    payload = aggregate.state.content.payload
    assert isinstance(payload, SemanticPayload)
    return payload


def _value_text(value: Any, name_of: Any) -> str:
    if isinstance(value, str):
        name = name_of(value)
        if name is not None:
            return str(name)
        return value
    return normal_text(value)


def _event_time_of(record: MemoryRecord) -> datetime | None:
    return record.created_at


def _event_time(aggregate: RecordAggregate) -> Any:
    return aggregate.state.content.created_at or aggregate.created_on


def _reconciled(
    uow: UnitOfWork, record: MemoryRecord, others: list[RecordAggregate]
) -> tuple[str, list[RecordAggregate], str, RecordAggregate | None]:
    """(kind, the records it concerns, rationale, a record it restates) as the interpreter's
    ``reconcile`` says, or ``unknown`` with every record when there is none or it has no
    opinion (whatever it raises is ignored, as a failing interpreter is)."""
    reconcile = getattr(uow.interpreter, "reconcile", None)
    if not callable(reconcile):
        return UNKNOWN, others, "", None
    try:
        answer = reconcile(copy_record(record), [copy_record(a.view(uow.now())) for a in others])
    except Exception:
        return UNKNOWN, others, "", None
    if not isinstance(answer, Mapping):
        return UNKNOWN, others, "", None
    action = answer.get("action")
    named = answer.get("records")
    chosen = others
    if isinstance(named, Sequence) and not isinstance(named, str) and named:
        by_id = {a.record_id: a for a in others}
        chosen = [by_id[i] for i in named if isinstance(i, str) and i in by_id] or others
    reason = answer.get("rationale")
    rationale = reason if isinstance(reason, str) else ""
    if action == "supersede":
        return SINGLE, chosen, rationale or "the interpreter found it replaces them", None
    if action == "reinforce":
        return UNKNOWN, chosen, rationale or "the interpreter found it restates it", chosen[0]
    if action == "keep":
        return MANY, chosen, rationale or "the interpreter found both hold", None
    return UNKNOWN, others, "", None


def check_resolve(value: object) -> bool | None:
    """A call's ``resolve``: True, False, or None (the store's choice)."""
    if value is None or isinstance(value, bool):
        return value
    raise ValidationError("resolve", f"must be true, false or absent, not {value!r}")

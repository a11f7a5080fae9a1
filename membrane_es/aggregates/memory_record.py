"""The ``RecordAggregate`` aggregate: one memory, rebuilt from its immutable events.

A record's *content* (type, payload, scope, sensitivity, tags, initial relations) is fixed by
its ``Created`` event. Every later event changes only a small *state*: the salience base and
the moment it was set, revision status, pinning, relations added, an attached outcome. The
audit log is derived from the events as they are applied; nothing stores it twice.

Every event carries ``actor`` and ``rationale``. Revisions (supersede, fork, merge, retract,
contest) refuse episodic records: raw experience is evidence and never rewritten.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec
from eventsourcing.domain import Aggregate
from eventsourcing.utils import get_topic

from membrane_es.errors import AlreadyReplacedError, EpisodicImmutableError, ForgottenError
from membrane_es.schema.entries import DELETE_RATIONALE
from membrane_es.schema.enums import (
    AuditAction,
    GraphPredicate,
    MemoryType,
    ProvenanceKind,
    RevisionStatus,
)
from membrane_es.schema.payloads import EpisodicPayload, Payload, RevisionState, SemanticPayload
from membrane_es.schema.records import (
    AuditEntry,
    Embedding,
    MemoryRecord,
    Provenance,
    ProvenanceSource,
    Relation,
)
from membrane_es.schema.timestamps import Timestamp
from membrane_es.timekeeping.decay import penalized, reinforced, salience_at

from .identity import record_key
from .sealing import structure_of

if TYPE_CHECKING:
    from uuid import UUID


# The audit actions by name: a lookup, where ``AuditAction(name)`` runs the enum's Python.
_AUDIT_ACTIONS: dict[str, AuditAction] = {a.value: a for a in AuditAction}

# Episodic compression (spec §5.5) is a penalty by this actor; its audit entry carries the
# rationale as given, without the ``penalty:`` prefix (spec §1.7).
COMPRESSION_ACTOR = "consolidation/episodic"


class RecordState(msgspec.Struct, kw_only=True, gc=False):
    """What an aggregate knows after applying its events (also its snapshot form)."""

    content: MemoryRecord
    salience_base: float
    salience_anchor: Timestamp
    last_reinforced_at: Timestamp
    updated_at: Timestamp
    pinned: bool = False
    retracted: bool = False
    status: str = ""
    superseded_by: str = ""
    merged_into: str = ""
    relations: list[Relation] = msgspec.field(default_factory=list)
    provenance_added: list[ProvenanceSource] = msgspec.field(default_factory=list)
    outcome: str = ""
    audit: list[AuditEntry] = msgspec.field(default_factory=list)
    forgotten: bool = False


# Stored events name their classes by topic. The aggregate was first called ``MemoryRecord``
# (a name the schema's record data also bears); explicit topics keep the names in every log
# and export as they were written.
AGGREGATE_TOPIC = "membrane_es.aggregates.memory_record:MemoryRecord"


def _topic(event: str) -> str:
    return f"{AGGREGATE_TOPIC}.{event}"


class RecordAggregate(Aggregate):
    """One memory record as an event-sourced aggregate (its content and state as data:
    :class:`~membrane_es.schema.records.MemoryRecord`). No snapshots: the application refuses
    them (a snapshot would hold content outside the sealed box erasure destroys)."""

    TOPIC = AGGREGATE_TOPIC

    if TYPE_CHECKING:  # assigned by Created.apply; not a constructor argument
        state: RecordState

    # --- events --------------------------------------------------------------------------

    class Created(Aggregate.Created):
        """The record came into being with this content."""

        TOPIC = _topic("Created")

        record: MemoryRecord
        actor: str
        rationale: str
        # The vector the record is searched by, when an embedder (or the caller) gave one.
        # Stored in the log so rebuilding the read side never re-runs a model.
        embedding: Embedding | None = None
        # In the log, the content above is sealed under a per-record key (see
        # :mod:`membrane_es.aggregates.sealing`): the key's id and the box. Empty until the
        # event is stored, and in events written before per-record keys.
        key_id: bytes = b""
        sealed: bytes = b""
        # The record's number in its store (see :mod:`membrane_es.stores.record_numbers`): written
        # when the event is saved; 0 in events written before records carried numbers.
        number: int = 0

        action: ClassVar[str] = "create"

        def audit_rationale(self) -> str:
            return self.rationale

        def apply(self, aggregate: Any) -> None:
            aggregate.state = creation_state(
                self.record, self.actor, self.rationale, self.timestamp
            )

    class Event(Aggregate.Event):
        """A change to an existing record, by someone, for a reason."""

        actor: str
        rationale: str

        # The audit action this event is filed under; events outside the reference's seven
        # actions (relations, pins) appear in history but not in the record's audit log.
        action: ClassVar[str] = ""
        TOPIC: ClassVar[str]  # see __init_subclass__

        def __init_subclass__(cls, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            if "TOPIC" not in cls.__dict__:  # each event class its own topic, by its name
                cls.TOPIC = _topic(cls.__name__)

        def audit_rationale(self) -> str:
            """The rationale as the audit log words it."""
            return self.rationale

        def audit(self, aggregate: RecordAggregate) -> None:
            action = _AUDIT_ACTIONS.get(self.action)
            if action is not None:
                aggregate.state.audit.append(
                    AuditEntry(
                        action=action,
                        actor=self.actor,
                        timestamp=self.timestamp,
                        rationale=self.audit_rationale(),
                    )
                )

        def retract(self, aggregate: RecordAggregate) -> None:
            state = aggregate.state
            state.salience_base = 0.0
            state.salience_anchor = self.timestamp
            state.retracted = True
            state.status = RevisionStatus.RETRACTED.value
            state.updated_at = self.timestamp

    class Superseded(Event):
        """A newer record replaced this one; this one is retracted."""

        action: ClassVar[str] = "revise"

        def audit_rationale(self) -> str:
            return f"superseded by {self.by_id}: {self.rationale}"

        by_id: str

        def apply(self, aggregate: RecordAggregate) -> None:
            self.retract(aggregate)
            aggregate.state.superseded_by = self.by_id
            self.audit(aggregate)

    class Forked(Event):
        """A conditional variant was derived from this record; this one stays active."""

        action: ClassVar[str] = "fork"

        def audit_rationale(self) -> str:
            return f"forked to {self.to_id}: {self.rationale}"

        to_id: str

        def apply(self, aggregate: RecordAggregate) -> None:
            self.audit(aggregate)

    class MergedInto(Event):
        """This record was merged into another and retracted."""

        action: ClassVar[str] = "merge"

        def audit_rationale(self) -> str:
            return f"merged into {self.into_id}: {self.rationale}"

        into_id: str

        def apply(self, aggregate: RecordAggregate) -> None:
            self.retract(aggregate)
            aggregate.state.merged_into = self.into_id
            self.audit(aggregate)

    class Retracted(Event):
        """The record was withdrawn (kept in the log; excluded from active reads).

        ``valid_until``: when what the record says stopped being true, if not the moment of
        the retraction (an invalidation replayed from elsewhere); None in events written
        before it existed, and when it is that moment. ``deleted``: the entries API's
        ``DELETE`` (the entry is hidden from every entries read, past ones included), not an
        invalidation."""

        action: ClassVar[str] = "delete"
        class_version: ClassVar[int] = 2

        valid_until: datetime | None = None
        deleted: bool = False

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """Before the field, a deletion was known by its rationale's text alone."""
            state["deleted"] = state.get("rationale") == DELETE_RATIONALE

        def apply(self, aggregate: RecordAggregate) -> None:
            self.retract(aggregate)
            self.audit(aggregate)

    class Contested(Event):
        """Conflicting evidence exists; salience is unchanged."""

        action: ClassVar[str] = "revise"

        contesting_ref: str

        def apply(self, aggregate: RecordAggregate) -> None:
            state = aggregate.state
            state.status = RevisionStatus.CONTESTED.value
            state.updated_at = self.timestamp
            if self.contesting_ref:
                _put_relation(
                    state.relations,
                    Relation(
                        predicate=GraphPredicate.CONTESTED_BY.value,
                        target_id=self.contesting_ref,
                        weight=1.0,
                        created_at=self.timestamp,
                    ),
                )
            self.audit(aggregate)

    class Reinforced(Event):
        """The record proved useful: salience raised to ``salience``, decay clock reset."""

        action: ClassVar[str] = "reinforce"

        salience: float

        def apply(self, aggregate: RecordAggregate) -> None:
            state = aggregate.state
            state.salience_base = self.salience
            state.salience_anchor = self.timestamp
            state.last_reinforced_at = self.timestamp
            state.updated_at = self.timestamp
            self.audit(aggregate)

    class Corroborated(Event):
        """The same content was written again (resolution on write found it): the record gains
        the new write's source, and its salience is reinforced as by :class:`Reinforced`."""

        action: ClassVar[str] = "reinforce"

        source: ProvenanceSource
        salience: float

        def apply(self, aggregate: RecordAggregate) -> None:
            state = aggregate.state
            state.provenance_added.append(self.source)
            state.salience_base = self.salience
            state.salience_anchor = self.timestamp
            state.last_reinforced_at = self.timestamp
            state.updated_at = self.timestamp
            self.audit(aggregate)

    class Penalized(Event):
        """The record misled: salience lowered by ``amount`` to ``salience`` (floored)."""

        action: ClassVar[str] = "decay"

        def audit_rationale(self) -> str:
            if self.actor == COMPRESSION_ACTOR:
                return self.rationale
            return f"penalty: {self.rationale}"

        amount: float
        salience: float

        def apply(self, aggregate: RecordAggregate) -> None:
            state = aggregate.state
            state.salience_base = self.salience
            state.salience_anchor = self.timestamp
            state.updated_at = self.timestamp
            self.audit(aggregate)

    class RelationAdded(Event):
        """An outgoing relation was added (or its weight updated)."""

        action: ClassVar[str] = "relate"

        relation: Relation

        def apply(self, aggregate: RecordAggregate) -> None:
            _put_relation(aggregate.state.relations, self.relation)

    class OutcomeRecorded(Event):
        """The outcome of the episode this record describes became known."""

        action: ClassVar[str] = "revise"

        def audit_rationale(self) -> str:
            return f"Outcome recorded: {self.status}"

        status: str

        def apply(self, aggregate: RecordAggregate) -> None:
            state = aggregate.state
            state.outcome = self.status
            state.updated_at = self.timestamp
            state.provenance_added.append(
                ProvenanceSource(
                    kind=ProvenanceKind.OUTCOME,
                    ref=f"outcome:{aggregate.record_id}:{self.status}",
                    created_by=self.actor,
                    timestamp=self.timestamp,
                )
            )
            self.audit(aggregate)

    class Pinned(Event):
        """The record stops decaying and is exempt from hiding and compression."""

        action: ClassVar[str] = "pin"

        def apply(self, aggregate: RecordAggregate) -> None:
            state = aggregate.state
            # Freeze salience at its value now; it stays there while pinned.
            state.salience_base = aggregate.salience(self.timestamp)
            state.salience_anchor = self.timestamp
            state.pinned = True
            state.updated_at = self.timestamp

    class Unpinned(Event):
        """The record decays and may be hidden again."""

        action: ClassVar[str] = "unpin"

        def apply(self, aggregate: RecordAggregate) -> None:
            state = aggregate.state
            # Decay resumes from the pinned value, starting now.
            state.salience_anchor = self.timestamp
            state.pinned = False
            state.updated_at = self.timestamp

    class Forgotten(Event):
        """The record's content was erased (its key destroyed); it reads redacted from now on,
        at every moment. ``cascade_of`` names the record whose erasure took this one with it
        (this one was derived from it alone); empty for the record asked for."""

        action: ClassVar[str] = "delete"

        cascade_of: str = ""

        def audit_rationale(self) -> str:
            if self.cascade_of:
                return f"forgotten with {self.cascade_of}: {self.rationale}"
            return f"forgotten: {self.rationale}"

        def apply(self, aggregate: RecordAggregate) -> None:
            self.retract(aggregate)
            redact_state(aggregate.state)
            self.audit(aggregate)

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        record: MemoryRecord,
        *,
        actor: str,
        rationale: str,
        at: datetime,
        embedding: Embedding | None = None,
    ) -> RecordAggregate:
        """A new record aggregate; ``record.id`` must already be set."""
        # The library makes event classes dataclasses when they are defined: a type checker
        # sees the base event's fields only.
        created_class: Any = cls.Created
        created = created_class(
            originator_topic=get_topic(cls),
            originator_id=record_key(record.id),
            originator_version=cls.INITIAL_VERSION,
            timestamp=at,
            record=record,
            actor=actor,
            rationale=rationale,
            embedding=embedding,
        )
        # What the library's aggregate construction does with its "created" event: the
        # event makes the aggregate, and is its first pending event.
        aggregate = created.mutate(None)
        assert isinstance(aggregate, RecordAggregate)
        aggregate.pending_events.append(created)
        return aggregate

    @classmethod
    def from_created(cls, created: Created) -> RecordAggregate:
        """The aggregate ``created.mutate(None)`` makes, made directly: the library's
        generic construction looks up the initialisers' parameters for every event, which
        a replay of many records' creations (the change feed's) pays once per record."""
        aggregate = cls.__new__(cls)
        aggregate.__base_init__(
            created.originator_id, created.originator_version, created.timestamp
        )
        created.apply(aggregate)
        return aggregate

    # --- reading --------------------------------------------------------------------------

    @property
    def record_id(self) -> str:
        return self.state.content.id

    @property
    def key(self) -> UUID:
        return self.id

    @property
    def memory_type(self) -> MemoryType:
        return self.state.content.type

    def salience(self, at: datetime) -> float:
        """Salience at moment ``at`` (decay is computed, never stored)."""
        return state_salience(self.state, self.created_on, at)

    def view(self, at: datetime) -> MemoryRecord:
        """The full record as a reader sees it at moment ``at``.

        The result shares nested payload objects with this aggregate: copy before mutating.
        """
        return view_state(self.state, self.created_on, at)

    def copy(self) -> RecordAggregate:
        """An independent copy for one command to change.

        Events only assign state fields and add to its lists, and never touch ``content``,
        so copying the lists is enough; this stays cheap however long the history.
        """
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        # The library's own initialiser of an aggregate's identity, version and times gives
        # the copy a pending-events list of its own (the update above shared this one's).
        clone.__base_init__(self.id, self.version, self.created_on)
        clone.modified_on = self.modified_on
        state = self.state
        clone.state = msgspec.structs.replace(
            state,
            relations=list(state.relations),
            provenance_added=list(state.provenance_added),
            audit=list(state.audit),
        )
        return clone

    @property
    def compressed(self) -> bool:
        """Whether episodic compression has already lowered this record."""
        return any(
            entry.actor == COMPRESSION_ACTOR and entry.action is AuditAction.DECAY
            for entry in self.state.audit
        )

    # --- commands -------------------------------------------------------------------------

    def trigger_event(self, event_class: Any, **kwargs: Any) -> None:
        """Nothing happens to a forgotten record any more: it has no content to revise."""
        if self.state.forgotten:
            raise ForgottenError(self.record_id)
        super().trigger_event(event_class, **kwargs)

    def forget(self, *, actor: str, rationale: str, at: datetime, cascade_of: str = "") -> None:
        """Erase the content (the caller destroys the key); allowed on every type."""
        self.trigger_event(
            self.Forgotten, timestamp=at, actor=actor, rationale=rationale, cascade_of=cascade_of
        )

    def check_revisable(self) -> None:
        """Revision operations refuse episodic records."""
        if self.state.content.type is MemoryType.EPISODIC:
            raise EpisodicImmutableError(self.record_id)

    def check_replaceable(self) -> None:
        """A record is replaced once: a second supersede or merge (say, a writer racing
        another) would give it two successors and fork its revision chain."""
        self.check_revisable()
        replaced_by = self.state.superseded_by or self.state.merged_into
        if replaced_by:
            raise AlreadyReplacedError(self.record_id, replaced_by)

    def supersede(self, by_id: str, *, actor: str, rationale: str, at: datetime) -> None:
        self.check_replaceable()
        self.trigger_event(
            self.Superseded, timestamp=at, by_id=by_id, actor=actor, rationale=rationale
        )

    def fork(self, to_id: str, *, actor: str, rationale: str, at: datetime) -> None:
        self.check_revisable()
        self.trigger_event(self.Forked, timestamp=at, to_id=to_id, actor=actor, rationale=rationale)

    def merge_into(self, into_id: str, *, actor: str, rationale: str, at: datetime) -> None:
        self.check_replaceable()
        self.trigger_event(
            self.MergedInto, timestamp=at, into_id=into_id, actor=actor, rationale=rationale
        )

    def retract(
        self,
        *,
        actor: str,
        rationale: str,
        at: datetime,
        valid_until: datetime | None = None,
        deleted: bool = False,
    ) -> None:
        self.check_revisable()
        # Stored only when given: the events written before it existed read the same.
        until = {} if valid_until is None else {"valid_until": valid_until}
        self.trigger_event(
            self.Retracted,
            timestamp=at,
            actor=actor,
            rationale=rationale,
            deleted=deleted,
            **until,
        )

    def contest(self, contesting_ref: str, *, actor: str, rationale: str, at: datetime) -> None:
        self.check_revisable()
        self.trigger_event(
            self.Contested,
            timestamp=at,
            contesting_ref=contesting_ref,
            actor=actor,
            rationale=rationale,
        )

    def reinforce(self, *, actor: str, rationale: str, at: datetime) -> None:
        """Raise salience by the record's gain (capped at 1) and reset the decay clock.

        A retracted record is audited but stays at 0: reinforcement must not bring back
        into active reads (and metrics) what was withdrawn.
        """
        decay = self.state.content.lifecycle.decay
        new_base = 0.0 if self.state.retracted else reinforced(self.salience(at), decay)
        self.trigger_event(
            self.Reinforced, timestamp=at, salience=new_base, actor=actor, rationale=rationale
        )

    def corroborate(
        self, source: ProvenanceSource, *, actor: str, rationale: str, at: datetime
    ) -> None:
        """The same content was written again: note its source and reinforce the record."""
        self.check_revisable()
        decay = self.state.content.lifecycle.decay
        self.trigger_event(
            self.Corroborated,
            timestamp=at,
            source=source,
            salience=reinforced(self.salience(at), decay),
            actor=actor,
            rationale=rationale,
        )

    def penalize(self, amount: float, *, actor: str, rationale: str, at: datetime) -> None:
        """Lower salience by ``amount``, never below the record's floor."""
        new_base = penalized(self.salience(at), amount, self.state.content.lifecycle.decay)
        self.trigger_event(
            self.Penalized,
            timestamp=at,
            amount=amount,
            salience=new_base,
            actor=actor,
            rationale=rationale,
        )

    def add_relation(self, relation: Relation, *, actor: str, rationale: str, at: datetime) -> None:
        self.trigger_event(
            self.RelationAdded, timestamp=at, relation=relation, actor=actor, rationale=rationale
        )

    def record_outcome(self, status: str, *, actor: str, rationale: str, at: datetime) -> None:
        """Attach an outcome to an episodic record (allowed: it is evidence, not a revision)."""
        self.trigger_event(
            self.OutcomeRecorded, timestamp=at, status=status, actor=actor, rationale=rationale
        )

    def pin(self, *, actor: str, rationale: str, at: datetime) -> None:
        self.trigger_event(self.Pinned, timestamp=at, actor=actor, rationale=rationale)

    def unpin(self, *, actor: str, rationale: str, at: datetime) -> None:
        self.trigger_event(self.Unpinned, timestamp=at, actor=actor, rationale=rationale)


def creation_state(record: MemoryRecord, actor: str, rationale: str, at: datetime) -> RecordState:
    """The state a record's ``Created`` event (by ``actor``, for ``rationale``, at ``at``)
    gives it (the change feed makes it without an aggregate)."""
    anchor = record.lifecycle.last_reinforced_at or at
    return RecordState(
        content=record,
        salience_base=record.salience,
        salience_anchor=anchor,
        last_reinforced_at=anchor,
        updated_at=record.updated_at or at,
        pinned=record.lifecycle.pinned,
        relations=list(record.relations),
        audit=[
            *record.audit_log,
            AuditEntry(action=AuditAction.CREATE, actor=actor, timestamp=at, rationale=rationale),
        ],
    )


def state_salience(state: RecordState, created_on: datetime, at: datetime) -> float:
    """:meth:`RecordAggregate.salience` of an aggregate with this state, created at
    ``created_on``."""
    content = state.content
    return salience_at(
        state.salience_base,
        state.salience_anchor,
        content.created_at or created_on,
        content.lifecycle.decay,
        at,
        pinned=state.pinned,
    )


def view_state(state: RecordState, created_on: datetime, at: datetime) -> MemoryRecord:
    """:meth:`RecordAggregate.view` of an aggregate with this state, created at
    ``created_on`` (the change feed views states it keeps without an aggregate)."""
    content = state.content
    lifecycle = msgspec.structs.replace(
        content.lifecycle, last_reinforced_at=state.last_reinforced_at, pinned=state.pinned
    )
    return msgspec.structs.replace(
        content,
        salience=state_salience(state, created_on, at),
        created_at=content.created_at or created_on,
        updated_at=state.updated_at,
        lifecycle=lifecycle,
        provenance=viewed_provenance(state),
        relations=list(state.relations),
        payload=viewed_payload(state),
        audit_log=list(state.audit),
    )


def viewed_payload(state: RecordState) -> Payload | None:
    """The payload as :func:`view_state` shows it: with the revision status and successor,
    or the outcome, that later events gave the record."""
    payload = state.content.payload
    if isinstance(payload, SemanticPayload) and (state.status or state.superseded_by):
        revision = payload.revision or RevisionState()
        revision = msgspec.structs.replace(
            revision,
            status=state.status or revision.status,
            superseded_by=state.superseded_by or revision.superseded_by,
        )
        return msgspec.structs.replace(payload, revision=revision)
    if isinstance(payload, EpisodicPayload) and state.outcome:
        return msgspec.structs.replace(payload, outcome=state.outcome)
    return payload


def viewed_provenance(state: RecordState) -> Provenance:
    """The provenance as :func:`view_state` shows it: with the sources later events added."""
    provenance = state.content.provenance
    if state.provenance_added:
        return msgspec.structs.replace(
            provenance, sources=[*provenance.sources, *state.provenance_added]
        )
    return provenance


def redact_state(state: RecordState) -> None:
    """Drop the content from a record's state, leaving what a read of it after erasure shows:
    the same as replaying its events once its key is gone (the creation's rationale and the
    imported audit entries were content)."""
    imported = len(state.content.audit_log)
    state.content = structure_of(state.content)
    audit = state.audit[imported:]
    if audit and audit[0].action is AuditAction.CREATE:
        audit[0] = msgspec.structs.replace(audit[0], rationale="")
    state.audit = audit
    state.forgotten = True


def _put_relation(relations: list[Relation], relation: Relation) -> None:
    """At most one relation per (predicate, target): a repeat replaces the earlier one."""
    for i, existing in enumerate(relations):
        if existing.predicate == relation.predicate and existing.target_id == relation.target_id:
            relations[i] = relation
            return
    relations.append(relation)

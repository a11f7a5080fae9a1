"""One message per write use case: plain data, imperative names, no behaviour.

Records may be given as :class:`~membrane_es.schema.MemoryRecord` or as a dict in the
reference JSON or SDK form; handlers validate and copy them before anything is written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import msgspec

from membrane_es.schema.entries import DELETE_RATIONALE, EntryPatch
from membrane_es.schema.records import MemoryRecord, TrustContext
from membrane_es.schema.validation import VectorInput

RecordInput = MemoryRecord | dict[str, Any]


class Command(msgspec.Struct, kw_only=True, frozen=True):
    """Marker base: every command names who acts and why."""

    # True: everything the handler saves is written at once, at its end (else each save is
    # its own write, as erasure needs: its keys are destroyed after its events are saved).
    one_write: ClassVar[bool] = False

    actor: str
    rationale: str


class CreateRecord(Command, frozen=True, kw_only=True):
    """Store a record as given (the reference's direct create)."""

    record: RecordInput
    actor: str = "system"
    rationale: str = "Initial creation"
    # The record's own vector, if the caller has one (checked against the store's dimensions).
    embedding: VectorInput | None = None
    # False: no vector at all, whatever the engine's embedder (the record is found by its
    # words, scope and salience, never by similarity).
    embed: bool = True
    # Resolution on write (commands.resolution): None: the store's choice.
    resolve: bool | None = None


# A revision's new record is never readable more widely than what it revises (it takes
# their scope when it names none, and at least their sensitivity) unless ``widen`` says so.


class Supersede(Command, frozen=True, kw_only=True):
    old_id: str
    new_record: RecordInput
    # The new record's own vector, if the caller has one (as for CreateRecord).
    embedding: VectorInput | None = None
    widen: bool = False


class Fork(Command, frozen=True, kw_only=True):
    source_id: str
    forked_record: RecordInput
    widen: bool = False


class Merge(Command, frozen=True, kw_only=True):
    record_ids: list[str]
    merged_record: RecordInput
    widen: bool = False


class Retract(Command, frozen=True, kw_only=True):
    record_id: str
    # When what the record says stopped being true, if earlier or later than now.
    valid_until: datetime | None = None
    # The entries API's DELETE: the entry is hidden from every entries read.
    deleted: bool = False


class Forget(Command, frozen=True, kw_only=True):
    """Erase a record's content for good (and that of records derived from it alone)."""

    record_id: str


class Contest(Command, frozen=True, kw_only=True):
    record_id: str
    contesting_ref: str = ""


class Reinforce(Command, frozen=True, kw_only=True):
    record_id: str


class Penalize(Command, frozen=True, kw_only=True):
    record_id: str
    amount: float


class AddRelation(Command, frozen=True, kw_only=True):
    """Add an outgoing relation; with ``inverse`` also the paired edge on the target."""

    source_id: str
    predicate: str
    target_id: str
    weight: float = 1.0
    inverse: str = ""


class RecordOutcome(Command, frozen=True, kw_only=True):
    """Attach an outcome (success, failure, partial) to an episodic record."""

    record_id: str
    status: str


class Pin(Command, frozen=True, kw_only=True):
    record_id: str


class Unpin(Command, frozen=True, kw_only=True):
    record_id: str


# --- capture and ingestion (spec §2) ---------------------------------------------------------
#
# Who acts is the capture's ``source``: it is the actor of every audit entry these write, so
# ``actor`` and ``rationale`` are not used (the reference words each rationale itself).
# Timestamps are a timezone-aware datetime, an RFC 3339 string, or None (now).


class CaptureMemory(Command, frozen=True, kw_only=True):
    """Capture raw content: a primary record, the entities it names, a derived fact, edges."""

    content: Any = None
    source_kind: str = "agent_turn"
    context: Any = None
    reason_to_remember: str = ""
    proposed_type: str = ""
    summary: str = ""
    sensitivity: str = "low"
    source: str = "python-client"
    tags: list[str] = msgspec.field(default_factory=list)
    scope: str = ""
    timestamp: datetime | str | None = None
    decay: Any = None
    pinned: bool = False
    resolve: bool | None = None  # resolution of the derived fact; None: the store's choice
    actor: str = ""
    rationale: str = ""


class _Ingest(Command, frozen=True, kw_only=True):
    """Fields every ingest operation shares; ``sensitivity`` empty means the default (low)."""

    source: str = "python-client"
    timestamp: datetime | str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    scope: str = ""
    sensitivity: str = ""
    actor: str = ""
    rationale: str = ""


class IngestEvent(_Ingest, frozen=True, kw_only=True):
    """An event → an episodic record with one timeline entry."""

    event_kind: str
    ref: str
    summary: str = ""


class IngestToolOutput(_Ingest, frozen=True, kw_only=True):
    """A tool call and its result → an episodic record with one tool node."""

    tool_name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    result: Any = None
    depends_on: list[str] = msgspec.field(default_factory=list)


class IngestObservation(_Ingest, frozen=True, kw_only=True):
    """A subject–predicate–object observation → a semantic record, tied to known entities."""

    subject: str
    predicate: str
    object: Any = None
    resolve: bool | None = None  # resolution on write; None: the store's choice


class IngestOutcome(Command, frozen=True, kw_only=True):
    """The outcome of an episode → recorded on its episodic record."""

    target_record_id: str
    outcome_status: str
    source: str = "python-client"
    timestamp: datetime | str | None = None
    actor: str = ""
    rationale: str = ""


class IngestWorkingState(_Ingest, frozen=True, kw_only=True):
    """A thread's working state → a working record."""

    thread_id: str
    state: str
    next_actions: list[str] = msgspec.field(default_factory=list)
    open_questions: list[str] = msgspec.field(default_factory=list)
    context_summary: str = ""
    active_constraints: list[Any] = msgspec.field(default_factory=list)


# --- consolidation (spec §5.5) -----------------------------------------------------------------


class Consolidate(Command, frozen=True, kw_only=True):
    """Run the consolidation stages once; what earlier runs did is not done again.

    ``now`` is the moment ages are measured at (default: the engine's clock); ``extractor``
    is the optional semantic-extraction hook (an
    :class:`~membrane_es.commands.extractor.Extractor`). The audit entries name each stage's
    own actor, so ``actor`` and ``rationale`` are not used.
    """

    now: datetime | None = None
    extractor: Any = None
    actor: str = ""
    rationale: str = ""


# --- the entries API (seed 003): its writes read the entries view, then change records ----
#
# ``trust`` is what the caller may see (an entry it cannot see is not found); ``writer`` the
# key asking, whose ceiling the entries written must be within (None: no such limit; see
# :class:`membrane_es.commands.entries.Writer`). Arguments arrive checked by the facade.


class CreateEntry(Command, frozen=True, kw_only=True):
    """Create an entry's record; with ``supersedes``, those entries are invalidated and the
    new one relates to each by ``supersedes``, all in one write."""

    one_write: ClassVar[bool] = True

    record: MemoryRecord
    supersedes: tuple[int, ...] = ()
    trust: TrustContext | None = None
    writer: Any = None
    rationale: str = "entry created"


class ReviseEntry(Command, frozen=True, kw_only=True):
    """A new revision of an active entry: its record superseded by one with the patch applied."""

    entry_id: int
    patch: EntryPatch
    trust: TrustContext | None = None
    tenant: int | str = 0
    writer: Any = None
    rationale: str = "entry revised"


class InvalidateEntry(Command, frozen=True, kw_only=True):
    """End an active entry's validity (its record retracted), at ``valid_until`` if given."""

    entry_id: int
    valid_until: datetime | None = None
    trust: TrustContext | None = None
    writer: Any = None
    rationale: str = "entry invalidated"


class DeleteEntry(Command, frozen=True, kw_only=True):
    """Hide an entry from every entries read (its latest record retracted, marked deleted);
    with ``erase``, forget every revision's content instead."""

    entry_id: int
    erase: bool = False
    trust: TrustContext | None = None
    writer: Any = None
    rationale: str = DELETE_RATIONALE


class RelateEntries(Command, frozen=True, kw_only=True):
    """Relate two entries' latest records by ``relation`` (once per source, target, kind)."""

    source_id: int
    target_id: int
    relation: str
    trust: TrustContext | None = None
    writer: Any = None
    rationale: str = ""

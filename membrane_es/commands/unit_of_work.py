"""What a command handler needs from the write side, and nothing more (implemented by
:class:`~membrane_es.engine.event_store_unit_of_work.EventStoreUnitOfWork`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.commands.interpreter import Interpreter
from membrane_es.schema.entries import Entry
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.records import Embedding, MemoryRecord, TrustContext
from membrane_es.schema.validation import VectorInput

if TYPE_CHECKING:
    from membrane_es.commands.resolution import ResolutionSettings

# How many entities a term finds unless told (the reference's ``FindEntitiesByTerm``).
DEFAULT_ENTITY_LIMIT = 10


class EntryReads(Protocol):
    """What the entries API's writes read of the entries view: the committed log, caught up
    at each call. ``trust`` None sees every entry."""

    def current_revision(self, entry_id: int, trust: TrustContext | None) -> tuple[str, int] | None:
        """(record id, ``valid_from``) of the entry's revision if it is active and visible."""
        ...

    def latest_revision(self, entry_id: int, trust: TrustContext | None) -> str | None:
        """The record of the entry's latest visible revision (active or invalidated, not
        deleted)."""
        ...

    def revision_records(self, entry_id: int) -> list[str]:
        """The records of every revision of the entry, first first."""
        ...

    def revision_reach(self, entry_id: int, *, every: bool) -> list[tuple[str, str]]:
        """(sensitivity, scope) of the entry's latest revision, or of every one."""
        ...

    def entry(self, entry_id: int, trust: TrustContext | None, tenant: int | str) -> Entry | None:
        """The active entry, as the entries API reads it."""
        ...

    def relation_id(
        self, source_id: int, target_id: int, relation: str, trust: TrustContext | None
    ) -> int | None:
        """The id of the (source, target, relation) edge between entries, if there is one."""
        ...


class UnitOfWork(Protocol):
    """Loads aggregates, hands out event times, and saves every touched aggregate at once."""

    def get(self, record_id: str) -> RecordAggregate:
        """The record's aggregate; :class:`~membrane_es.errors.NotFoundError` if none."""
        ...

    def exists(self, record_id: str) -> bool:
        """Whether a record with this id has ever been created."""
        ...

    def now(self) -> datetime:
        """The next event time: strictly later than every earlier one."""
        ...

    def save(self, *aggregates: RecordAggregate) -> None:
        """Append all pending events of these aggregates in one atomic write."""
        ...

    def embed(self, record: MemoryRecord, given: VectorInput | None = None) -> Embedding | None:
        """The vector to store with a new record: ``given`` (checked), else the engine's
        embedder's, else none."""
        ...

    # --- reads capture needs (spec §1.10, §2.4 steps 4 and 9) -----------------------------
    #
    # Both see records created earlier in the same unit of work (a batch) as well as the
    # committed store, and leave out retracted records. The records returned are the
    # current state and must not be mutated.

    def find_entities(
        self, term: str, scope: str, limit: int = DEFAULT_ENTITY_LIMIT
    ) -> list[MemoryRecord]:
        """Entity records whose canonical name or an alias is ``term`` (trimmed,
        lower-cased), scoped to ``scope`` or unscoped; exact-scope matches first, then by id;
        at most ``limit`` (≤ 0: :data:`DEFAULT_ENTITY_LIMIT`). A blank term finds nothing."""
        ...

    def candidate_pool(self, scope: str | None, limit: int) -> list[MemoryRecord]:
        """The ``limit`` most salient records (ties: newer, then id), of exactly ``scope``, or
        of every scope when ``scope`` is None."""
        ...

    def episodes_between(self, scope: str, since: datetime, until: datetime) -> list[MemoryRecord]:
        """Active episodic records of exactly ``scope`` whose event time (``created_at``) is
        in ``[since, until]``, oldest first (equal times in the order captured): what capture
        reads to find the turns a conversation turn was said after."""
        ...

    # --- reads resolution on write needs (:mod:`membrane_es.commands.resolution`) ----------

    def entity_name(self, value: str) -> str | None:
        """The canonical name of the entity whose id ``value`` is (None: no entity's id)."""
        ...

    def facts_keyed(self, key: str, *, topic: bool) -> list[RecordAggregate]:
        """The active records whose sameness key (``topic``: topic key) is ``key``, oldest
        first (event time, then capture order), records of this unit of work included."""
        ...

    @property
    def resolution(self) -> ResolutionSettings:
        """The store's resolution on write: on unless a call says, and its vocabulary."""
        ...

    # --- reads consolidation needs (spec §5.5) --------------------------------------------

    def records_of_type(self, memory_type: MemoryType) -> list[MemoryRecord]:
        """Every active (not retracted) record of ``memory_type``, oldest first (equal times in
        the order captured), including records created earlier in this unit of work; current
        state, not to be mutated."""
        ...

    def referrers(self, record_id: str, predicate: str) -> list[str]:
        """Ids of the records with a ``predicate`` relation to ``record_id``, in id order."""
        ...

    # --- erasure ------------------------------------------------------------------------

    def content_key(self, record_id: str) -> bytes | None:
        """The id of the key the record's content is sealed under; None if it was written
        before per-record keys (its content is in the log unsealed)."""
        ...

    def doom_keys(self, erasure: str, keys: Mapping[str, bytes]) -> None:
        """Note, durably, that ``forget(erasure)`` is about to destroy these content keys
        (record id → key id): the first step of an erasure, before its events are saved (see
        :mod:`membrane_es.commands.erasure`)."""
        ...

    def destroy_keys(self, key_ids: Sequence[bytes]) -> None:
        """Destroy these content keys now, for good: the last step of an erasure, once the
        events that say so are saved and durable."""
        ...

    def keys_left(self, record_id: str) -> dict[str, bytes]:
        """The content keys (record id → key id) the key store still holds of the forgotten
        ``record_id`` and of the records an erasure of it took along: what an erasure cut
        short after its events were saved has left to destroy (none: it was finished)."""
        ...

    @property
    def interpreter(self) -> Interpreter | None:
        """The engine's capture interpreter, if it has one."""
        ...

    @property
    def entries(self) -> EntryReads:
        """The entries view, for the entries API's writes."""
        ...

"""The eventsourcing wiring: codec, recorder and repository behind the engine.

Configuration is explicit: the engine passes an ``env`` mapping; the class-level defaults
select the msgspec codec and the aggregate cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
from eventsourcing.application import (
    AggregateNotFoundError,
    Application,
    ProcessingEvent,
    Recording,
)
from eventsourcing.persistence import IntegrityError

from membrane_es.aggregates.identity import record_key
from membrane_es.aggregates.memory_record import MemoryRecord, redact_state
from membrane_es.aggregates.sealing import ContentSealer, redacted_creation
from membrane_es.clock import MonotonicClock
from membrane_es.codec import MsgspecMapper
from membrane_es.commands.interpreter import Interpreter
from membrane_es.embedding.protocol import Embedder
from membrane_es.embedding.text import search_text
from membrane_es.embedding.vectors import pack, record_embedding
from membrane_es.errors import MembraneError, NotFoundError
from membrane_es.keystore import KeyStore, open_key_store
from membrane_es.log_order import EVENT_TIMES, EventTimeBehind
from membrane_es.projections.entities import normalise_term
from membrane_es.projections.read_model import ReadModel
from membrane_es.projections.records import TYPE_CODE
from membrane_es.projections.timecodes import micros
from membrane_es.record_numbers import RECORD_NUMBERS, RecordNumberBehind, RecordNumbering
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.payloads import EntityPayload
from membrane_es.schema.records import Embedding
from membrane_es.schema.records import MemoryRecord as RecordData
from membrane_es.schema.validation import VectorInput

APPLICATION_NAME = "memory"

DEFAULT_ENV: dict[str, str] = {
    "MAPPER_TOPIC": "membrane_es.codec:MsgspecMapper",
    "TRANSCODER_TOPIC": "membrane_es.codec:MsgpackTranscoder",
}

# Recently touched records stay in memory (see RecordCache).
CACHE_SIZE = 10_000
# A save whose record numbers another process took first is numbered again and retried at
# once, up to this many times (each refusal means another save got through).
NUMBERING_ATTEMPTS = 64


class MemoryApplication(Application):
    """The event-sourced store of memory records."""

    name = APPLICATION_NAME
    env = DEFAULT_ENV

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__(env)
        try:
            if self.snapshots is not None:
                # A snapshot would hold a record's content outside its sealed box, beyond
                # the reach of erasure; replay from the record cache is fast enough.
                raise MembraneError(
                    "snapshotting is not supported: snapshots would keep records' content "
                    "unsealed, beyond the reach of forget()"
                )
            self.keys: KeyStore = open_key_store(self.env)
        except BaseException:
            self.factory.close()
            raise
        assert isinstance(self.mapper, MsgspecMapper)
        self.mapper.sealer = ContentSealer(self.keys, MemoryRecord.Created)
        self.cache = RecordCache(CACHE_SIZE)
        # Every event up to this log position is reflected in the cache: a load compares it
        # with the log's head (one read) rather than asking the store for newer events of
        # each record it loads.
        self._coherent_through = self.recorder.max_notification_id() or 0
        self._coherence_lock = threading.Lock()
        self.numbering = RecordNumbering()

    # --- loading --------------------------------------------------------------------------

    def load(self, record_id: str) -> MemoryRecord:
        """The record's current aggregate (a private copy), or :class:`NotFoundError`."""
        return self._load(record_id, self._keep_cache_coherent())

    def load_many(self, record_ids: Sequence[str]) -> list[MemoryRecord]:
        """:meth:`load` of each record, in order; the log's head is read once for them all
        (a read that returns ten records would otherwise read it ten times)."""
        seen = self._keep_cache_coherent()
        return [self._load(record_id, seen) for record_id in record_ids]

    def _load(self, record_id: str, seen: int) -> MemoryRecord:
        """Load through the cache; ``seen``: the log's head, read after the cache was made
        coherent with it (a load from the store reflects at least that)."""
        key = record_key(record_id)
        cached = self.cache.get(key)
        if cached is None:
            try:
                loaded = self.repository.get(key, projector_func=_project)
            except AggregateNotFoundError:
                raise NotFoundError(record_id) from None
            assert isinstance(loaded, MemoryRecord)
            cached = loaded
            with self._coherence_lock:
                # Cache it only if no refresh has moved past what it saw: a refresh meanwhile
                # may already have evicted this record for an event the load did not see.
                if seen >= self._coherent_through:
                    self.cache.put(cached)
        return cached.copy()

    def _keep_cache_coherent(self) -> int:
        """Evict the cached aggregates that events written since the cache was last known
        to be current — by another process sharing the store — have changed. Returns the
        log's head as read."""
        head = self.recorder.max_notification_id() or 0
        if head == self._coherent_through:
            return head
        with self._coherence_lock:
            start = self._coherent_through
            if head <= start:
                return head
            if head - start >= CACHE_SIZE:
                self.cache.clear()
            else:
                for notification in self.recorder.select_notifications(
                    start=start + 1, limit=head - start, stop=head
                ):
                    key = notification.originator_id
                    self.cache.discard(key if isinstance(key, UUID) else UUID(key))
            self._coherent_through = head
        return head

    def _note_recorded(self, recordings: list[Recording[UUID]]) -> None:
        """Advance the cache's coherent position past this process's own events, when
        nothing from elsewhere came between (otherwise the next load reads the gap)."""
        ids = [recording.notification.id for recording in recordings]
        with self._coherence_lock:
            if ids and ids[0] == self._coherent_through + 1 and ids[-1] == ids[0] + len(ids) - 1:
                self._coherent_through = ids[-1]

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """Append the pending events of these aggregates in one atomic write.

        Same steps as the library's ``save``, but our aggregates are recognised by class:
        its runtime ``Protocol`` checks cost more than a durable commit's CPU work.
        """
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        for obj in objs:
            if isinstance(obj, MemoryRecord):
                processing.events.extend(obj.collect_events())
                processing.aggregates[obj.id] = obj
            else:
                processing.collect_events(obj)
        # Events carry transaction times and the log must be in time order; one save (a
        # batch) may hold several commands' events for one aggregate, so put them in order.
        # The sort is stable and each aggregate's events are in time order already.
        processing.events.sort(key=_event_time)
        processing.saved_kwargs.update(kwargs)
        if processing.events:
            first, last = processing.events[0], processing.events[-1]
            processing.saved_kwargs[EVENT_TIMES] = (_event_time(first), _event_time(last))
        recordings = self._record_numbered(processing)
        for aggregate in processing.aggregates.values():
            if isinstance(aggregate, MemoryRecord):
                self.cache.put(aggregate)
        self._note_recorded(recordings)
        self._take_snapshots(processing)
        self._notify(recordings)
        return recordings

    def _record_numbered(self, processing: ProcessingEvent[UUID]) -> list[Recording[UUID]]:
        """Record the events with their records' numbers; numbered again after the log's
        count and recorded again if another process created records meanwhile."""
        created = [e for e in processing.events if isinstance(e, MemoryRecord.Created)]
        numbering = self.numbering
        with numbering.lock:
            for _ in range(NUMBERING_ATTEMPTS):
                numbers = numbering.assign(created)
                if numbers is not None:
                    processing.saved_kwargs[RECORD_NUMBERS] = numbers
                try:
                    recordings = self._record(processing)
                except RecordNumberBehind as behind:
                    numbering.count = behind.count
                    continue
                numbering.recorded(numbers)
                return recordings
        raise RecordNumberBehind(numbering.count or 0, 0)

    def load_as_of(self, record_id: str, moment: datetime) -> MemoryRecord:
        """The record as it stood at ``moment``: its events up to then, replayed — redacted
        if it has been forgotten since (erasure reaches into the past)."""
        aggregate: MemoryRecord | None = None
        forgotten = False
        event: Any
        for event in self.events.get(record_key(record_id)):
            if isinstance(event, MemoryRecord.Forgotten):
                forgotten = True
            elif event.timestamp <= moment:
                aggregate = event.mutate(aggregate)
        if aggregate is None:
            raise NotFoundError(record_id)
        if forgotten and not aggregate.state.forgotten:
            redact_state(aggregate.state)
        return aggregate

    def close(self) -> None:
        super().close()
        self.keys.close()

    def record_events(self, record_id: str) -> list[Any]:
        """Every event of one record, oldest first (its creation redacted if it has been
        forgotten, whether or not this process still had the key in memory)."""
        events = list(self.events.get(record_key(record_id)))
        if not events:
            raise NotFoundError(record_id)
        if any(isinstance(event, MemoryRecord.Forgotten) for event in events):
            events[0] = redacted_creation(events[0])
        return events

    def exists(self, record_id: str) -> bool:
        return bool(self.recorder.select_events(record_key(record_id), limit=1))

    def content_key(self, record_id: str) -> bytes | None:
        """The id of the key the record's content is sealed under (from its ``Created``
        event); None if the record was written before per-record keys."""
        stored = self.recorder.select_events(record_key(record_id), limit=1)
        if not stored:
            raise NotFoundError(record_id)
        created: Any = self.mapper.to_domain_event(stored[0])
        return created.key_id if created.sealed else None

    def last_event_time(self) -> datetime | None:
        """The time of the newest event in the log (to keep the clock ahead of it)."""
        last = self.recorder.max_notification_id()
        if not last:
            return None
        (notification,) = self.recorder.select_notifications(start=last, limit=1)
        event: Any = self.mapper.to_domain_event(notification)
        moment: datetime = event.timestamp
        return moment


def _event_time(event: Any) -> datetime:
    moment: datetime = event.timestamp
    return moment


def _project(aggregate: Any, events: Any) -> Any:
    """A plain fold: the default projector's runtime Protocol check costs more than replay."""
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


class RecordCache:
    """Committed aggregates by key, least recently used evicted first; thread-safe.

    Only committed state enters (after a successful save); loads hand out copies, so a
    command that fails leaves the cache exactly as it was.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[UUID, MemoryRecord] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: UUID) -> MemoryRecord | None:
        with self._lock:
            aggregate = self._items.get(key)
            if aggregate is not None:
                self._items.move_to_end(key)
            return aggregate

    def put(self, aggregate: MemoryRecord) -> None:
        with self._lock:
            current = self._items.get(aggregate.id)
            if current is not None and current.version > aggregate.version:
                return
            self._items[aggregate.id] = aggregate
            self._items.move_to_end(aggregate.id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def discard(self, key: UUID) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class EventStoreUnitOfWork:
    """One command's (or one batch's) view of the write side, with an identity map."""

    def __init__(
        self,
        app: MemoryApplication,
        clock: MonotonicClock,
        embedder: Embedder | None = None,
        views: ReadModel | None = None,
        interpreter: Interpreter | None = None,
    ) -> None:
        self._app = app
        self._clock = clock
        self._embedder = embedder
        self._views = views
        self._interpreter = interpreter
        self._loaded: dict[str, MemoryRecord] = {}
        self._created: dict[str, MemoryRecord] = {}
        self._pending: dict[str, MemoryRecord] = {}
        self.deferred = False
        self.recordings: list[Recording[UUID]] = []  # what the commits wrote, in log order
        # Vectors the embedder still owes, with the search text of each: filled in at commit,
        # all in one model call (a capture's records, or a whole batch's).
        self._unembedded: list[tuple[Embedding, str]] = []

    def get(self, record_id: str) -> MemoryRecord:
        known = self._created.get(record_id) or self._loaded.get(record_id)
        if known is None:
            known = self._loaded[record_id] = self._app.load(record_id)
            # Another engine (or process) may have written it with a clock ahead of ours:
            # this record's next event must still come after its last one.
            self._clock.observe(known.modified_on)
        return known

    def exists(self, record_id: str) -> bool:
        return (
            record_id in self._created or record_id in self._loaded or self._app.exists(record_id)
        )

    def now(self) -> datetime:
        return self._clock.now()

    def save(self, *aggregates: MemoryRecord) -> None:
        for aggregate in aggregates:
            if aggregate.version == 1 and aggregate.pending_events:
                self._created.setdefault(aggregate.record_id, aggregate)
            self._pending[aggregate.record_id] = aggregate
        if not self.deferred:
            self.commit()

    def embed(self, record: RecordData, given: VectorInput | None = None) -> Embedding | None:
        """The record's vector: the caller's now, the embedder's at commit (one model call
        for every record of the unit of work: a forward pass per record is what makes a
        model slow, not the number of texts in it)."""
        if given is not None or self._embedder is None:
            return record_embedding(record, self._embedder, given)
        owed = Embedding(model=self._embedder.model, vector=b"")
        self._unembedded.append((owed, search_text(record)))
        return owed

    def _embed_owed(self) -> None:
        """Fill in every vector :meth:`embed` promised, in one call to the embedder."""
        owed, self._unembedded = self._unembedded, []
        if owed and self._embedder is not None:
            vectors = self._embedder.embed([text for _, text in owed])
            for (embedding, _), vector in zip(owed, vectors, strict=True):
                embedding.vector = pack(embedding.model, vector).vector

    @property
    def interpreter(self) -> Interpreter | None:
        return self._interpreter

    def find_entities(self, term: str, scope: str, limit: int = 10) -> list[RecordData]:
        """Entities named ``term`` in ``scope`` or unscoped (the reference's
        ``FindEntitiesByTerm``): from the entity-term index, plus entities created earlier in
        this unit of work; retracted ones left out."""
        wanted = normalise_term(term)
        if not wanted:
            return []
        limit = limit if limit > 0 else DEFAULT_ENTITY_LIMIT
        exact: dict[str, bool] = {}  # record id -> whether its scope is exactly ``scope``
        views = self._views
        if views is not None:
            views.catch_up(self._app)
            with views.lock:
                table = views.table
                for row in views.entities.rows_named(wanted):
                    row_scope = table.scope_names[int(table.content["scope"][row])]
                    if row_scope in (scope, ""):
                        exact[table.ids[row]] = row_scope == scope
        for aggregate in self._created.values():
            content = aggregate.state.content
            payload = content.payload
            if (
                isinstance(payload, EntityPayload)
                and content.scope in (scope, "")
                and wanted in _entity_terms(payload)
            ):
                exact[content.id] = content.scope == scope
        found: list[RecordData] = []
        now = self._clock.now()
        for record_id in sorted(exact, key=lambda i: (not exact[i], i)):
            aggregate = self.get(record_id)
            if aggregate.state.retracted or aggregate.memory_type is not MemoryType.ENTITY:
                continue
            found.append(aggregate.view(now))
            if len(found) == limit:
                break
        return found

    def candidate_pool(self, scope: str | None, limit: int) -> list[RecordData]:
        """The ``limit`` most salient active records (ties: newer, then id) of exactly
        ``scope`` (every scope for None), including records created in this unit of work."""
        if limit <= 0:
            return []
        now = self._clock.now()
        picks: list[tuple[float, int, str]] = []  # (salience, created_at µs, id)
        views = self._views
        if views is not None:
            views.catch_up(self._app)
            with views.lock:
                picks = _most_salient(views, scope, limit, micros(now))
        listed = {record_id for _, _, record_id in picks}
        for aggregate in self._created.values():
            content = aggregate.state.content
            if content.id in listed or aggregate.state.retracted:
                continue
            if scope is None or content.scope == scope:
                created = content.created_at or aggregate.created_on
                picks.append((aggregate.salience(now), micros(created), content.id))
        picks.sort(key=lambda p: (-p[0], -p[1], p[2]))
        return [self.get(record_id).view(now) for _, _, record_id in picks[:limit]]

    def records_of_type(self, memory_type: MemoryType) -> list[RecordData]:
        """Active records of one type from the record table, plus those created in this unit
        of work, oldest first (then by id)."""
        ids: set[str] = set()
        views = self._views
        if views is not None:
            views.catch_up(self._app)
            with views.lock:
                table = views.table
                rows = np.flatnonzero(table.content["type"][: table.size] == TYPE_CODE[memory_type])
                ids.update(table.ids[int(row)] for row in rows)
        ids.update(
            record_id
            for record_id, aggregate in self._created.items()
            if aggregate.memory_type is memory_type
        )
        now = self._clock.now()
        aggregates = [self.get(record_id) for record_id in ids]
        found = [a.view(now) for a in aggregates if not a.state.retracted]
        found.sort(key=lambda r: (micros(r.created_at) if r.created_at else 0, r.id))
        return found

    def referrers(self, record_id: str, predicate: str) -> list[str]:
        """Sources of ``predicate`` relations to ``record_id``: from the relation graph (the
        committed log), plus relations saved in this unit of work but not yet committed."""
        found: set[str] = set()
        views = self._views
        if views is not None:
            views.catch_up(self._app)
            with views.lock:
                found.update(s for s, p in views.graph.sources(record_id) if p == predicate)
        for aggregate in self._pending.values():
            if any(
                r.predicate == predicate and r.target_id == record_id
                for r in aggregate.state.relations
            ):
                found.add(aggregate.record_id)
        return sorted(found)

    def content_key(self, record_id: str) -> bytes | None:
        return self._app.content_key(record_id)

    def destroy_keys(self, key_ids: Sequence[bytes]) -> None:
        if self.deferred:
            # A batch could still fail after the keys are gone, leaving records erased
            # without the events that say so.
            raise MembraneError("forget cannot run inside a batch")
        self._app.keys.destroy(key_ids)

    def commit(self) -> None:
        """Write every pending event in one atomic save."""
        if self._pending:
            self._embed_owed()
            pending = list(self._pending.values())
            self._pending.clear()
            self.recordings.extend(self._app.save(*pending))

    def rollback(self) -> None:
        """Forget pending work; cached aggregates were copies, so nothing else to undo."""
        self._pending.clear()
        self._unembedded.clear()


DEFAULT_ENTITY_LIMIT = 10


def _entity_terms(payload: EntityPayload) -> set[str]:
    terms = {normalise_term(payload.canonical_name)}
    terms.update(normalise_term(alias.value) for alias in payload.aliases)
    terms.discard("")
    return terms


def _most_salient(
    views: ReadModel, scope: str | None, limit: int, at: int
) -> list[tuple[float, int, str]]:
    """(salience, created_at, id) of the ``limit`` most salient active rows of ``scope``
    (every scope for None), best first; ties at the cut are all kept for the caller to order."""
    table = views.table
    rows = np.arange(table.size)
    if scope is not None:
        scope_id = table.scope_ids.get(scope)
        if scope_id is None:
            return []
        rows = rows[table.content["scope"][: table.size] == scope_id]
    state = table.state_now()
    salience = table.salience(rows, at, state)
    active = ~state.columns["retracted"][rows] & ~table.hidden(rows, at, state)
    rows, salience = rows[active], salience[active]
    if len(rows) > limit:
        cut = np.partition(salience, len(rows) - limit)[len(rows) - limit]
        keep = salience >= cut
        rows, salience = rows[keep], salience[keep]
    created = table.content["created_at"][rows]
    return [
        (float(s), int(c), table.ids[int(r)])
        for r, s, c in zip(rows.tolist(), salience.tolist(), created.tolist(), strict=True)
    ]


__all__ = [
    "APPLICATION_NAME",
    "EVENT_TIMES",
    "EventTimeBehind",
    "DEFAULT_ENV",
    "EventStoreUnitOfWork",
    "IntegrityError",
    "MemoryApplication",
]

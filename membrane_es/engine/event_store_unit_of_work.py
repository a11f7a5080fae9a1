"""The unit of work commands run in: the :class:`~membrane_es.commands.unit_of_work.UnitOfWork`
the handlers ask for, over the event store (loads, one atomic save) and the read side (the
entity, salience, type and relation lookups a command makes before it writes)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
import numpy.typing as npt
from eventsourcing.application import Recording

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.commands.interpreter import Interpreter
from membrane_es.commands.resolution import ResolutionSettings
from membrane_es.commands.unit_of_work import DEFAULT_ENTITY_LIMIT, EntryReads
from membrane_es.embedding.passages import splitter_of
from membrane_es.embedding.protocol import Embedder
from membrane_es.embedding.record_text import search_text
from membrane_es.embedding.vectors import pack, record_embedding
from membrane_es.errors import MembraneError
from membrane_es.projections.entities import normalise_term
from membrane_es.projections.read_model import ReadModel
from membrane_es.projections.record_table import TYPE_CODE, RecordTable
from membrane_es.projections.timecodes import micros
from membrane_es.queries.capture_reads import Pick, best_first, episodes, most_salient
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.fact_keys import sameness_key, topic_key
from membrane_es.schema.payloads import EntityPayload
from membrane_es.schema.records import Embedding, MemoryRecord
from membrane_es.schema.validation import VectorInput
from membrane_es.timekeeping.clock import MonotonicClock
from membrane_es.wiring.application import MemoryApplication

Array = npt.NDArray[Any]


class EventStoreUnitOfWork:
    """One command's (or one batch's) view of the write side, with an identity map."""

    def __init__(
        self,
        app: MemoryApplication,
        clock: MonotonicClock,
        embedder: Embedder | None = None,
        views: ReadModel | None = None,
        interpreter: Interpreter | None = None,
        resolution: ResolutionSettings | None = None,
    ) -> None:
        self._app = app
        self._clock = clock
        self._embedder = embedder
        self._views = views
        self._interpreter = interpreter
        self._resolution = resolution or ResolutionSettings()
        self._loaded: dict[str, RecordAggregate] = {}
        self._created: dict[str, RecordAggregate] = {}
        # The fact keys of the records created here (a batch's), by key: what
        # :meth:`facts_keyed` adds to the views' (kept as they are made, so a batch of n
        # writes does not compute n² keys)
        self._created_keys: dict[tuple[bool, str], list[str]] = {}
        self._pending: dict[str, RecordAggregate] = {}
        self.deferred = False
        self.recordings: list[Recording[UUID]] = []  # what the commits wrote, in log order
        # Vectors the embedder still owes, with the search text of each: filled in at commit,
        # all in one model call (a capture's records, or a whole batch's).
        self._unembedded: list[tuple[Embedding, str]] = []
        # The entries view, for the entries API's writes (set by the engine's entries part).
        self.entry_reads: EntryReads | None = None

    def get(self, record_id: str) -> RecordAggregate:
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

    def save(self, *aggregates: RecordAggregate) -> None:
        for aggregate in aggregates:
            if (
                aggregate.version == 1
                and aggregate.pending_events
                and aggregate.record_id not in self._created
            ):
                self._created[aggregate.record_id] = aggregate
                self._note_keys(aggregate)
            self._pending[aggregate.record_id] = aggregate
        if not self.deferred:
            self.commit()

    def embed(self, record: MemoryRecord, given: VectorInput | None = None) -> Embedding | None:
        """The record's vector: the caller's now, the embedder's at commit (one model call
        for every record of the unit of work: a forward pass per record is what makes a
        model slow, not the number of texts in it)."""
        if given is not None or self._embedder is None:
            return record_embedding(record, self._embedder, given)
        owed = Embedding(model=self._embedder.model, vector=b"")
        self._unembedded.append((owed, search_text(record)))
        return owed

    def _embed_owed(self) -> None:
        """Fill in every vector :meth:`embed` promised, in one call to the embedder: each
        record's, and those of the further passages of a text longer than the model reads
        (:mod:`membrane_es.embedding.passages`)."""
        owed, self._unembedded = self._unembedded, []
        if not owed or self._embedder is None:
            return
        texts = [text for _, text in owed]
        split = splitter_of(self._embedder)
        further = [split(text)[1:] if split is not None else [] for text in texts]
        vectors = self._embedder.embed(texts + [p for passages in further for p in passages])
        start = len(texts)
        for (embedding, _), vector, passages in zip(
            owed, vectors[: len(texts)], further, strict=True
        ):
            embedding.vector = pack(embedding.model, vector).vector
            if passages:
                embedding.passages = pack(
                    embedding.model, vectors[start : start + len(passages)]
                ).vector
                start += len(passages)

    @property
    def interpreter(self) -> Interpreter | None:
        return self._interpreter

    @property
    def entries(self) -> EntryReads:
        if self.entry_reads is None:
            raise MembraneError("this unit of work was made without the entries view")
        return self.entry_reads

    def find_entities(
        self, term: str, scope: str, limit: int = DEFAULT_ENTITY_LIMIT
    ) -> list[MemoryRecord]:
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
        found: list[MemoryRecord] = []
        now = self._clock.now()
        for record_id in sorted(exact, key=lambda i: (not exact[i], i)):
            aggregate = self.get(record_id)
            if aggregate.state.retracted or aggregate.memory_type is not MemoryType.ENTITY:
                continue
            found.append(aggregate.view(now))
            if len(found) == limit:
                break
        return found

    def candidate_pool(self, scope: str | None, limit: int) -> list[MemoryRecord]:
        """The ``limit`` most salient active records (ties: newer, then id) of exactly
        ``scope`` (every scope for None), including records created in this unit of work."""
        if limit <= 0:
            return []
        now = self._clock.now()
        picks: list[Pick] = []
        views = self._views
        if views is not None:
            views.catch_up(self._app)
            with views.lock:
                picks = most_salient(views.table, scope, limit, micros(now))
        listed = {record_id for _, _, record_id in picks}
        for aggregate in self._created.values():
            content = aggregate.state.content
            if content.id in listed or aggregate.state.retracted:
                continue
            if scope is None or content.scope == scope:
                created = content.created_at or aggregate.created_on
                picks.append((aggregate.salience(now), micros(created), content.id))
        return [self.get(record_id).view(now) for record_id in best_first(picks, limit)]

    def episodes_between(self, scope: str, since: datetime, until: datetime) -> list[MemoryRecord]:
        """Active episodic records of exactly ``scope`` with event times in ``[since, until]``
        — from the record table's columns (no record is loaded unless it is in the window),
        plus those created in this unit of work — oldest first, equal times in capture order."""
        low, high = micros(since), micros(until)
        ids = self._table_ids(lambda table: episodes(table, scope, low, high))
        for record_id, aggregate in self._created.items():
            content = aggregate.state.content
            if aggregate.memory_type is MemoryType.EPISODIC and content.scope == scope:
                created = content.created_at or aggregate.created_on
                if low <= micros(created) <= high:
                    ids.add(record_id)
        return self._active_oldest_first(ids)

    @property
    def resolution(self) -> ResolutionSettings:
        return self._resolution

    def entity_name(self, value: str) -> str | None:
        """An entity's canonical name by its id: created in this unit of work, else as the
        views hold it (the names the fact keys there were computed with)."""
        created = self._created.get(value)
        if created is not None:
            payload = created.state.content.payload
            if isinstance(payload, EntityPayload):
                return normalise_term(payload.canonical_name)
            return None
        views = self._views
        if views is None:
            return None
        with views.lock:
            row = views.table.row_of.get(value)
            return None if row is None else views.entities.canonical(row)

    def facts_keyed(self, key: str, *, topic: bool) -> list[RecordAggregate]:
        ids: set[str] = set()
        views = self._views
        if views is not None:
            views.catch_up(self._app)
            with views.lock:
                table, facts = views.table, views.facts
                rows = facts.rows_on_topic(key) if topic else facts.rows_same(key)
                retracted = table.state["retracted"]
                ids.update(table.ids[row] for row in rows if not retracted[row])
        ids.update(self._created_keys.get((topic, key), ()))
        kept = [a for a in map(self.get, ids) if not a.state.retracted]
        kept.sort(key=_event_then_capture_order)
        return kept

    def _note_keys(self, aggregate: RecordAggregate) -> None:
        content = aggregate.state.content
        same = sameness_key(content, self.entity_name)
        if same is None:
            return
        self._created_keys.setdefault((False, same), []).append(content.id)
        topic = topic_key(content, self.entity_name)
        if topic is not None:
            self._created_keys.setdefault((True, topic), []).append(content.id)

    def records_of_type(self, memory_type: MemoryType) -> list[MemoryRecord]:
        """Active records of one type from the record table, plus those created in this unit
        of work, oldest first (equal times in capture order)."""
        code = TYPE_CODE[memory_type]

        def of_type(table: RecordTable) -> Array:
            return np.flatnonzero(table.content["type"][: table.size] == code)

        ids = self._table_ids(of_type)
        ids.update(
            record_id
            for record_id, aggregate in self._created.items()
            if aggregate.memory_type is memory_type
        )
        return self._active_oldest_first(ids)

    def _table_ids(self, pick: Callable[[RecordTable], Array]) -> set[str]:
        """The ids of the record table's rows ``pick`` chooses (the views caught up first)."""
        views = self._views
        if views is None:
            return set()
        views.catch_up(self._app)
        with views.lock:
            table = views.table
            return {table.ids[int(row)] for row in pick(table)}

    def _active_oldest_first(self, ids: set[str]) -> list[MemoryRecord]:
        """Those records now, retracted ones left out, oldest first (event time), then in the
        order they were captured: callers often stamp a whole session or batch with one time,
        and the order things were said in must not then depend on their random ids."""
        now = self._clock.now()
        kept = [a for a in map(self.get, ids) if not a.state.retracted]
        kept.sort(key=_event_then_capture_order)
        return [aggregate.view(now) for aggregate in kept]

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

    def doom_keys(self, erasure: str, keys: Mapping[str, bytes]) -> None:
        self._refuse_in_batch()
        self._app.keys.doom(erasure, keys)

    def destroy_keys(self, key_ids: Sequence[bytes]) -> None:
        self._refuse_in_batch()
        syncer = self._app.abilities.syncer
        if syncer is not None:
            # A log that is not synced at each commit (LMDB's ``sync=False``) could lose the
            # events to a power cut after the keys were gone: the erasure unrecorded.
            syncer.sync_log()
        self._app.keys.destroy(key_ids)

    def keys_left(self, record_id: str) -> dict[str, bytes]:
        keys = self._app.keys
        left: dict[str, bytes] = {}
        own = self._app.content_key(record_id)
        if own is not None and keys.holds(own):
            left[record_id] = own
        for doomed in keys.doomed():
            # A note whose key is gone stays when a crash came before it was dropped: the
            # destroy is run again (it also empties the key store's log of any copy).
            if doomed.erasure != record_id or not self.exists(doomed.record_id):
                continue
            if self.get(doomed.record_id).state.forgotten:
                left.setdefault(doomed.record_id, doomed.key_id)
        return left

    def _refuse_in_batch(self) -> None:
        if self.deferred:
            # Its events are saved at the batch's end: the keys would be doomed (or the
            # events saved) by a write a later failure of the batch undoes.
            raise MembraneError("forget cannot run inside a batch")

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


def _entity_terms(payload: EntityPayload) -> set[str]:
    terms = {normalise_term(payload.canonical_name)}
    terms.update(normalise_term(alias.value) for alias in payload.aliases)
    terms.discard("")
    return terms


def _event_then_capture_order(aggregate: RecordAggregate) -> tuple[int, int, str]:
    """Event time, then the time the engine recorded the record's creation (strictly
    increasing in log order, so capture order), then the id."""
    content = aggregate.state.content
    created = content.created_at or aggregate.created_on
    return (micros(created), micros(aggregate.created_on), aggregate.record_id)

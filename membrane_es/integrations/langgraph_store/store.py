"""``MembraneStore``: LangGraph's ``BaseStore`` over a membrane_es engine (public API only).

Reads go through the engine under the store's trust context, so the engine decides what the
caller sees. The store keeps one thing of its own, read from the engine when it is made:
which record holds each item now, in the order the items were last written (what a search
without a query is ordered by, newest first, as LangGraph's PostgreSQL store orders it).
Before each batch it applies what the log gained since it last looked — its own writes and
any other store's, thread's or process's — re-reading only the records those events touched
(:mod:`membrane_es.integrations._following`): a read sees every write acknowledged before it
started, and the cost is that of the new writes, not of the store.

Many stores may share one engine, in many threads and processes: a put names the record it
replaces and gives the new one an id made from it, so two puts of one key that start from
the same state collide in the engine; the loser catches up and writes again on top of the
winner (the last put wins, as in ``InMemoryStore``), and no key ever has two live items.
Within one batch, reads answer for the store as it was before the batch's writes, and the
writes are one atomic engine write (the last put of a key wins), as in ``InMemoryStore``.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    ensure_embeddings,
)

from membrane_es import (
    MAX_RESULTS,
    AccessDeniedError,
    AlreadyExistsError,
    ExplainedRetrieveResult,
    Membrane,
    MemoryRecord,
    NotFoundError,
    ReadOnlyError,
    Sensitivity,
    TrustContext,
    ValidationError,
)
from membrane_es.integrations._following import (
    changes_since,
    first_id,
    retrying,
    successor_id,
)
from membrane_es.integrations.langgraph_store.items import (
    Revision,
    check_filter,
    check_index,
    check_key,
    check_namespace,
    check_value,
    first_put,
    is_item,
    item_key,
    item_of,
    item_record,
    matches,
    namespace_matches,
    scope_of,
    text_to_embed,
)

Key = tuple[tuple[str, ...], str]
_OWNER = TrustContext(max_sensitivity=Sensitivity.HYPER)  # the store's own bookkeeping
_SEMANTIC = ["semantic"]


@dataclass(frozen=True, slots=True)
class _Current:
    """Which record holds an item now."""

    record_id: str
    # When the item was first put (its revisions keep it); None: not read yet (a revision
    # another writer made, known by its id alone), read when this store revises it.
    created_at: datetime | None


@dataclass(frozen=True, slots=True)
class _Write:
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None  # None: delete
    index: bool | list[str] | None


@dataclass(frozen=True, slots=True)
class _Plan:
    """A batch, checked: its ops in order, and its writes (the last per key)."""

    ops: list[Op]
    writes: dict[Key, _Write]


class MembraneStore(BaseStore):
    """A LangGraph store whose items are membrane_es records.

    :param memory: the engine (``Membrane.open``, ``Membrane.in_memory``…); the store does
        not close it.
    :param trust: who reads and writes through this store. Reads return only what this
        context may see in full (a ``medium`` ceiling never returns a ``high`` item; its
        ``scopes``, if any, are the namespaces it may see, as joined by periods); writes may
        touch only items it may see. Default: least privilege (``low``, every scope).
    :param index: LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``): makes
        ``search(query=...)`` semantic. The store's embedder then makes every item's vector,
        so the engine must have none of its own (``embedder=None`` when opening it).
    :param sensitivity: what the store's writes are classified as (at most the trust's
        ceiling).
    :param actor: who the engine's audit trail names for the store's writes.

    TTL is not supported: a ``ttl`` raises ``NotImplementedError``. Items never expire, and
    the engine keeps every value an item held (see :meth:`history`, :meth:`as_of`).
    """

    supports_ttl = False

    def __init__(
        self,
        memory: Membrane,
        *,
        trust: TrustContext | None = None,
        index: IndexConfig | None = None,
        sensitivity: str = "low",
        actor: str = "langgraph",
    ) -> None:
        if not isinstance(memory, Membrane):
            raise ValidationError("memory", f"must be a Membrane, got {type(memory).__name__}")
        trust = TrustContext() if trust is None else trust
        if not isinstance(trust, TrustContext):
            raise ValidationError("trust", f"must be a TrustContext, got {type(trust).__name__}")
        self._memory = memory
        self._trust = trust
        self._sensitivity = _check_sensitivity(sensitivity, trust)
        if not isinstance(actor, str) or not actor.strip():
            raise ValidationError("actor", "must be a non-empty string")
        self._actor = actor
        self.index_config, self.embeddings, self._fields = _check_index_config(index, memory)
        self._as_of: datetime | None = None
        self._lock = threading.RLock()
        self._current: dict[Key, _Current] = {}  # oldest write first
        self._key_of: dict[str, Key] = {}  # the key of each record in _current
        self._next: dict[str, Key] = {}  # the id each held key's next revision will have
        self._last: dict[Key, str] = {}  # a deleted key's last record (what follows it)
        self._position: int | None = None  # the log position _current reflects
        self._pending: list[Key] = []  # the keys the write under way writes
        self._load()

    # --- the extras: time and history ----------------------------------------------------

    @property
    def moment(self) -> datetime | None:
        """The moment this store answers for (None: now, and writable)."""
        return self._as_of

    def as_of(self, moment: datetime) -> MembraneStore:
        """A read-only store answering every read as this one would have at ``moment``
        (an aware datetime); its writes raise :class:`~membrane_es.ReadOnlyError`."""
        if not isinstance(moment, datetime) or moment.utcoffset() is None:
            raise ValidationError("moment", "must be a datetime with a time zone")
        past = copy.copy(self)
        past._as_of = moment
        past._lock = threading.RLock()
        past._current = {}
        past._key_of = {}
        past._next = {}
        past._last = {}
        past._position = None
        past._load()
        return past

    def history(self, namespace: tuple[str, ...], key: str) -> list[Revision]:
        """Every change of one item, oldest first: each value it held and each deletion,
        with when, by whom and why (as of :attr:`moment`). Empty if the trust context may
        not see the item."""
        namespace = check_namespace(namespace, writing=False)
        key = check_key(key)
        scope = scope_of(namespace)
        if self._trust.scopes and scope not in self._trust.scopes:
            return []
        found = self._memory.retrieve(
            trust=msgspec.structs.replace(self._trust, scopes=[scope]),
            memory_types=_SEMANTIC,
            include_retracted=True,
            as_of=self._as_of,
        )
        records = [r for r in found.records if is_item(r) and item_key(r) == (namespace, key)]
        changes: list[Revision] = []
        for record in records:
            assert record.payload is not None
            value = record.payload.object  # type: ignore[union-attr]
            for event in self._memory.history(record.id, trust=self._trust):
                if self._as_of is not None and event.timestamp > self._as_of:
                    continue
                if event.event == "Created":
                    held: dict[str, Any] | None = value
                elif event.event == "Retracted":
                    held = None
                else:
                    continue  # a supersession shows as the next value's creation
                changes.append(
                    Revision(
                        namespace,
                        key,
                        held,
                        event.timestamp,
                        event.actor,
                        event.rationale,
                        record.id,
                    )
                )
        return sorted(changes, key=lambda change: (change.at, change.value is None))

    # --- BaseStore -----------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        with self._lock:
            self._sync()
            plan = self._plan(ops)
            queries = self._queries(plan)
            vectors = self._vectors(plan)
            return self._run(plan, queries, vectors)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        plan = self._plan(ops)
        queries = await self._aqueries(plan)
        vectors = await self._avectors(plan)

        def run() -> list[Result]:
            with self._lock:
                self._sync()
                return self._run(self._plan(plan.ops), queries, vectors)

        return await asyncio.to_thread(run)

    def close(self) -> None:
        """Nothing to release: the store does not own its engine (close that yourself)."""

    # --- planning: everything checked before anything is read or written ------------------

    def _plan(self, ops: Iterable[Op]) -> _Plan:
        checked: list[Op] = []
        writes: dict[Key, _Write] = {}
        for op in ops:
            if isinstance(op, GetOp):
                checked.append(
                    op._replace(
                        namespace=check_namespace(op.namespace, writing=False),
                        key=check_key(op.key),
                    )
                )
            elif isinstance(op, SearchOp):
                checked.append(_check_search(op))
            elif isinstance(op, ListNamespacesOp):
                checked.append(_check_listing(op))
            elif isinstance(op, PutOp):
                write = self._check_write(op)
                checked.append(op)
                writes[(write.namespace, write.key)] = write
            else:
                raise ValidationError("ops", f"unknown operation {type(op).__name__}")
        return _Plan(checked, writes)

    def _check_write(self, op: PutOp) -> _Write:
        if self._as_of is not None:
            raise ReadOnlyError(f"a store as of {self._as_of.isoformat()} is read-only")
        if op.ttl is not None:
            raise NotImplementedError(
                f"TTL is not supported by {type(self).__name__}: items never expire (set ttl=None)"
            )
        value = None if op.value is None else check_value(op.value)
        namespace = check_namespace(op.namespace, writing=value is not None)
        key = check_key(op.key, writing=value is not None)
        index = check_index(op.index)
        scope = scope_of(namespace)
        if self._trust.scopes and scope not in self._trust.scopes:
            raise ValidationError("namespace", f"{scope!r} is outside the trust context's scopes")
        current = self._current.get((namespace, key))
        if current is not None:
            # Only what the caller may read in full may be revised or deleted (the engine
            # raises AccessDeniedError otherwise).
            self._memory.retrieve_by_id(current.record_id, trust=self._trust)
        return _Write(namespace, key, value, index)

    # --- embedding ---------------------------------------------------------------------------

    def _texts(self, plan: _Plan) -> dict[Key, str]:
        if self.embeddings is None:
            return {}
        texts = {}
        for key, write in plan.writes.items():
            if write.value is None or write.index is False:
                continue
            paths = self._fields if write.index is None else write.index
            text = text_to_embed(write.value, paths)  # type: ignore[arg-type]
            if text is not None:
                texts[key] = text
        return texts

    def _query_texts(self, plan: _Plan) -> list[str]:
        if self.embeddings is None:
            return []
        wanted = (op.query for op in plan.ops if isinstance(op, SearchOp) and op.query)
        return list(dict.fromkeys(q for q in wanted if q is not None))

    def _vectors(self, plan: _Plan) -> dict[Key, list[float]]:
        texts = self._texts(plan)
        if not texts:
            return {}
        assert self.embeddings is not None
        return self._checked(texts, self.embeddings.embed_documents(list(texts.values())))

    async def _avectors(self, plan: _Plan) -> dict[Key, list[float]]:
        texts = self._texts(plan)
        if not texts:
            return {}
        assert self.embeddings is not None
        made = await self.embeddings.aembed_documents(list(texts.values()))
        return self._checked(texts, made)

    def _queries(self, plan: _Plan) -> dict[str, list[float]]:
        texts = self._query_texts(plan)
        if not texts:
            return {}
        assert self.embeddings is not None
        return self._checked_queries(texts, [self.embeddings.embed_query(q) for q in texts])

    async def _aqueries(self, plan: _Plan) -> dict[str, list[float]]:
        texts = self._query_texts(plan)
        if not texts:
            return {}
        assert self.embeddings is not None
        made = await asyncio.gather(*(self.embeddings.aembed_query(q) for q in texts))
        return self._checked_queries(texts, list(made))

    def _checked(
        self, texts: dict[Key, str], vectors: Sequence[Sequence[float]]
    ) -> dict[Key, list[float]]:
        if len(vectors) != len(texts):
            raise ValidationError(
                "index.embed", f"returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return {key: self._checked_vector(v) for key, v in zip(texts, vectors, strict=True)}

    def _checked_queries(
        self, texts: list[str], vectors: Sequence[Sequence[float]]
    ) -> dict[str, list[float]]:
        return {text: self._checked_vector(v) for text, v in zip(texts, vectors, strict=True)}

    def _checked_vector(self, vector: Sequence[float]) -> list[float]:
        assert self.index_config is not None
        if len(vector) != self.index_config["dims"]:
            raise ValidationError(
                "index.embed",
                f"made a vector of {len(vector)} dimensions, not {self.index_config['dims']}",
            )
        return [float(x) for x in vector]

    # --- running ----------------------------------------------------------------------------

    def _run(
        self,
        plan: _Plan,
        queries: dict[str, list[float]],
        vectors: dict[Key, list[float]],
    ) -> list[Result]:
        results: list[Result] = []
        for op in plan.ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, SearchOp):
                query = queries.get(op.query) if op.query else None
                results.append(self._search(op, query))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                results.append(None)
        if plan.writes:
            # Planned against what this store held; after a lost race, planned again
            # against what the winner wrote.
            plans = iter([plan])
            retrying(
                lambda: self._write((next(plans, None) or self._plan(plan.ops)).writes, vectors),
                self._lost_race,
            )
        return results

    def _lost_race(self, error: Exception) -> None:
        """Another writer got there first: follow the log to what it wrote; a record id
        already taken by a key this store thought deleted sends it to the key's history."""
        self._sync()
        if isinstance(error, AlreadyExistsError):
            for key in [k for k in self._pending if k not in self._current]:
                self._last.pop(key, None)
                tail = self._tail(key)
                if tail is not None:
                    self._last[key] = tail

    def _read(self, record_id: str) -> MemoryRecord | None:
        """The record as the trust context sees it in full, or None."""
        try:
            record = self._memory.retrieve_by_id(record_id, trust=self._trust, as_of=self._as_of)
        except (AccessDeniedError, NotFoundError):
            return None
        return record if is_item(record) else None

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        current = self._current.get((namespace, key))
        record = None if current is None else self._read(current.record_id)
        return None if record is None else item_of(record)

    def _search(self, op: SearchOp, query: list[float] | None) -> list[SearchItem]:
        if query is not None:
            return self._search_by_vector(op, query)
        prefix, wanted = op.namespace_prefix, op.offset + op.limit
        found: list[Item] = []
        for (namespace, _), current in reversed(self._current.items()):  # newest first
            if len(found) >= wanted:
                break
            if namespace[: len(prefix)] != prefix:
                continue
            record = self._read(current.record_id)
            if record is not None:
                item = item_of(record)
                if matches(item.value, op.filter):
                    found.append(item)
        return [_scored(item, None) for item in found[op.offset : wanted]]

    def _search_by_vector(self, op: SearchOp, query: list[float]) -> list[SearchItem]:
        """Items by cosine similarity with the query, best first (the engine's ranking; the
        store asks for every candidate when a filter or non-positive similarities mean the
        engine's first page may not hold the best ``offset + limit``)."""
        prefix, wanted = op.namespace_prefix, op.offset + op.limit
        reader = self._reader_within(prefix)
        if reader is None:
            return []
        # Every candidate when filtering, or past the most one read returns.
        asked = 0 if op.filter or wanted > MAX_RESULTS else wanted
        while True:
            found = self._memory.retrieve(
                trust=reader,
                memory_types=_SEMANTIC,
                query_embedding=query,
                explain=True,
                limit=asked,
                as_of=self._as_of,
            )
            assert isinstance(found, ExplainedRetrieveResult)
            similarity = {e.record_id: e.vector_similarity for e in found.explanations}
            hits: list[tuple[Item, float | None]] = []
            for record in found.records:
                if is_item(record):
                    item = item_of(record)
                    if item.namespace[: len(prefix)] == prefix and matches(item.value, op.filter):
                        hits.append((item, similarity.get(record.id)))
            everything = asked == 0 or len(found.records) < asked
            if everything or _ranked_enough(hits, wanted):
                break
            asked = 0
        # Stable: the engine's order stands among equal similarities; no vector goes last.
        hits.sort(key=lambda hit: -hit[1] if hit[1] is not None else float("inf"))
        return [_scored(item, score) for item, score in hits[op.offset : wanted]]

    def _reader_within(self, prefix: tuple[str, ...]) -> TrustContext | None:
        """The trust context narrowed to the scopes of the namespaces under ``prefix``
        (None: there are none the caller may see)."""
        if not prefix and not self._trust.scopes:
            return self._trust
        scopes = {scope_of(ns) for ns, _ in self._current if ns[: len(prefix)] == prefix}
        if self._trust.scopes:
            scopes &= set(self._trust.scopes)
        if not scopes:
            return None
        return msgspec.structs.replace(self._trust, scopes=sorted(scopes))

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions: Sequence[MatchCondition] = op.match_conditions or ()
        seen: set[tuple[str, ...]] = set()
        visible: set[tuple[str, ...]] = set()
        for (namespace, _), current in self._current.items():
            if namespace in visible:
                continue
            if namespace not in seen:
                seen.add(namespace)
                if not all(namespace_matches(namespace, c) for c in conditions):
                    continue
            elif not all(namespace_matches(namespace, c) for c in conditions):
                continue
            if self._read(current.record_id) is not None:
                visible.add(namespace)
        if op.max_depth is not None:
            visible = {namespace[: op.max_depth] for namespace in visible}
        return sorted(visible)[op.offset : op.offset + op.limit]

    def _write(self, writes: dict[Key, _Write], vectors: dict[Key, list[float]]) -> None:
        made: dict[Key, _Current | None] = {}
        memory = self._memory
        before, events = memory.position, 0
        self._pending = list(writes)
        with memory.batch() if len(writes) > 1 else nullcontext():
            for key, write in writes.items():
                current = self._current.get(key)
                if write.value is None:
                    if current is not None:
                        memory.retract(current.record_id, self._actor, "delete")
                        made[key] = None
                        events += 1
                    continue
                record = item_record(
                    write.namespace,
                    write.key,
                    write.value,
                    sensitivity=self._sensitivity,
                    first_put=None if current is None else self._first_put(current),
                )
                vector = vectors.get(key)
                if current is None:
                    last = self._last.get(key)
                    record = msgspec.structs.replace(
                        record,
                        id=first_id("langgraph-store", scope_of(key[0]), key[1])
                        if last is None
                        else successor_id(last),
                    )
                    new = memory.create_record(
                        # an item is its own record under its key, whatever it says
                        record,
                        actor=self._actor,
                        rationale="put",
                        embedding=vector,
                        resolve=False,
                    )
                    events += 1
                else:
                    record = msgspec.structs.replace(record, id=successor_id(current.record_id))
                    new = memory.supersede(
                        current.record_id, record, self._actor, "put", embedding=vector
                    )
                    events += 2  # the old record superseded, the new one created
                made[key] = _Current(new.id, first_put(new))
        for key, now in made.items():  # written: the bookkeeping follows
            self._forget(key)
            if now is not None:
                self._hold(key, now)
        # Still the whole story only if nothing else reached the log meanwhile; else the
        # next read applies the log from where this store stood (its own writes again too).
        if before == self._position and memory.position == before + events:
            self._position = memory.position

    # --- bookkeeping --------------------------------------------------------------------

    def _sync(self) -> None:
        """Apply what the log gained since this store last looked (every write acknowledged
        before now, by anyone): only the records its new events touched."""
        if self._as_of is not None:
            return
        changes = changes_since(self._memory, self._position)
        if changes is None:
            self._load()
            return
        # The keys whose record this pass took out, by the id their next record has: a
        # revision's old record comes first in the changes (superseded, then its successor
        # created), and its successor is then known by its id too, nothing read.
        retired: dict[str, Key] = {}
        for change in changes.records:
            if change.active:
                if change.record_id in self._key_of:
                    continue  # held already (this store's own write)
                revised = self._next.get(change.record_id)
                if revised is not None and revised in self._current:
                    # A revision of an item held: its key is known from its id, nothing read.
                    self._forget(revised)
                    self._hold(revised, _Current(change.record_id, None))
                    continue
                revised = retired.pop(change.record_id, None)
                if revised is not None and revised not in self._current:
                    self._hold(revised, _Current(change.record_id, None))
                    continue
                try:
                    record = self._memory.retrieve_by_id(change.record_id, trust=_OWNER)
                except NotFoundError:  # forgotten meanwhile
                    continue
                if is_item(record):
                    key = item_key(record)
                    held = self._current.get(key)
                    if held is None or held.record_id != record.id:
                        self._forget(key)
                        self._hold(key, _Current(record.id, first_put(record)))
            else:
                gone = self._key_of.get(change.record_id)
                if gone is not None:
                    self._forget(gone)  # deleted, or replaced by a record applied below
                    retired[successor_id(change.record_id)] = gone
        self._position = changes.position

    def _hold(self, key: Key, current: _Current) -> None:
        self._current[key] = current
        self._key_of[current.record_id] = key
        self._next[successor_id(current.record_id)] = key
        self._last.pop(key, None)

    def _forget(self, key: Key) -> None:
        held = self._current.pop(key, None)
        if held is not None:
            del self._key_of[held.record_id]
            self._next.pop(successor_id(held.record_id), None)
            self._last[key] = held.record_id

    def _first_put(self, current: _Current) -> datetime:
        """When the item ``current`` holds was first put (read now if not known yet)."""
        if current.created_at is not None:
            return current.created_at
        return first_put(self._memory.retrieve_by_id(current.record_id, trust=_OWNER))

    def _tail(self, key: Key) -> str | None:
        """The last record a key has had (none live: it was deleted), from its history."""
        namespace, name = key
        found = self._memory.retrieve(
            trust=msgspec.structs.replace(_OWNER, scopes=[scope_of(namespace)]),
            memory_types=_SEMANTIC,
            include_retracted=True,
        ).records
        mine = [r for r in found if is_item(r) and item_key(r) == key]
        return max(mine, key=lambda r: (r.created_at, r.id)).id if mine else None

    def _load(self) -> None:
        """Which record holds each item (as of :attr:`moment`), oldest write first."""
        self._position = self._memory.position
        found = self._memory.retrieve(
            trust=_OWNER, memory_types=_SEMANTIC, as_of=self._as_of
        ).records
        items = sorted((r for r in found if is_item(r)), key=lambda r: (r.created_at, r.id))
        self._current = {item_key(r): _Current(r.id, first_put(r)) for r in items}
        self._key_of = {held.record_id: key for key, held in self._current.items()}
        self._next = {successor_id(held.record_id): key for key, held in self._current.items()}
        self._last = {}


def _ranked_enough(hits: list[tuple[Item, float | None]], wanted: int) -> bool:
    """Whether the engine's first ``wanted`` hits are the best by similarity: it ranks
    positive similarities exactly, the rest by salience and age."""
    if len(hits) < wanted:
        return False
    last = hits[wanted - 1][1] if wanted else 1.0
    return last is not None and last > 0


def _scored(item: Item, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


def _check_sensitivity(sensitivity: object, trust: TrustContext) -> Sensitivity:
    try:
        level = Sensitivity(str(sensitivity))
    except ValueError:
        raise ValidationError("sensitivity", f"unknown sensitivity {sensitivity!r}") from None
    if level.level > Sensitivity(trust.max_sensitivity).level:
        raise ValidationError(
            "sensitivity", f"{level.value} is above the trust ceiling {trust.max_sensitivity}"
        )
    return level


def _check_index_config(
    index: IndexConfig | None, memory: Membrane
) -> tuple[IndexConfig | None, Embeddings | None, list[str]]:
    if index is None:
        return None, None, []
    if not isinstance(index, dict):
        raise ValidationError("index", "must be an IndexConfig (dims, embed, fields)")
    dims = index.get("dims")
    if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
        raise ValidationError("index.dims", "must be a positive integer")
    if index.get("embed") is None:
        raise ValidationError("index.embed", "an Embeddings, an embedding function or a name")
    fields = index.get("fields") or ["$"]
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise ValidationError("index.fields", "must be a list of field paths")
    if memory.embedder is not None:
        raise ValidationError(
            "index",
            "the engine embeds records with its own model: open it with embedder=None so "
            "the store's index makes its items' vectors",
        )
    return dict(index), ensure_embeddings(index["embed"]), list(fields)  # type: ignore[return-value]


def _check_search(op: SearchOp) -> SearchOp:
    for name in ("limit", "offset"):
        number = getattr(op, name)
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise ValidationError(name, "must be a whole number, at least 0")
    if op.query is not None and not isinstance(op.query, str):
        raise ValidationError("query", f"must be a string, got {type(op.query).__name__}")
    return op._replace(
        namespace_prefix=check_namespace(op.namespace_prefix, writing=False),
        filter=check_filter(op.filter),
    )


def _check_listing(op: ListNamespacesOp) -> ListNamespacesOp:
    for name in ("limit", "offset"):
        number = getattr(op, name)
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise ValidationError(name, "must be a whole number, at least 0")
    depth = op.max_depth
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 1):
        raise ValidationError("max_depth", "must be None or a whole number, at least 1")
    conditions = []
    for condition in op.match_conditions or ():
        if not isinstance(condition, MatchCondition) or condition.match_type not in (
            "prefix",
            "suffix",
        ):
            raise ValidationError("match_conditions", "each a prefix or suffix MatchCondition")
        path = check_namespace(condition.path, writing=False)
        conditions.append(MatchCondition(match_type=condition.match_type, path=path))
    return op._replace(match_conditions=tuple(conditions) or None)

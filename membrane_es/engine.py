"""The ``Membrane`` facade: the one object users hold, and the composition root.

Method names and signatures follow the reference Python SDK, so code written against it
ports by changing how the client is made::

    with Membrane.open("./memory") as memory:          # durable, LMDB-backed
        fact = memory.create_record({...})
        memory.reinforce(fact.id, "agent", "it helped")
        memory.retrieve_by_id(fact.id, trust=TrustContext(max_sensitivity="medium"))
        memory.retrieve("deploy the service", limit=10)       # layered, ranked
        memory.retrieve_graph("Orchid")                        # roots and their neighbours
        memory.capture_memory({"project": "Orchid"}, source_kind="event")  # raw content in
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from eventsourcing.persistence import IntegrityError

from membrane_es.application import EventStoreUnitOfWork, MemoryApplication
from membrane_es.clock import MonotonicClock
from membrane_es.commands import COMMAND_HANDLERS, Command, messages
from membrane_es.commands.extractor import Extractor
from membrane_es.commands.interpreter import Interpreter
from membrane_es.commands.messages import RecordInput
from membrane_es.embedding.protocol import Embedder
from membrane_es.errors import ConflictError, MembraneError, ValidationError
from membrane_es.projections.read_model import ReadModel
from membrane_es.projections.timecodes import micros
from membrane_es.queries import graph as graph_queries
from membrane_es.queries import records as record_queries
from membrane_es.queries import retrieve as retrieve_queries
from membrane_es.queries.records import HistoryEntry
from membrane_es.queries.selector import DEFAULT_THRESHOLD
from membrane_es.scheduler import PeriodicTask
from membrane_es.schema.capture import CaptureMemoryResult
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import MemoryRecord, TrustContext
from membrane_es.schema.results import ConsolidationResult, RetrieveGraphResult, RetrieveResult
from membrane_es.schema.validation import check_moment, check_unit_interval

# How often a command that lost an optimistic-concurrency race is retried from a fresh load.
CONFLICT_ATTEMPTS = 5
_LEAST_PRIVILEGE = TrustContext()
Timestamp = datetime | str | None  # a request time: aware datetime, RFC 3339 text, or now


class Membrane:
    """An event-sourced memory engine.

    :param app: the eventsourcing application holding the log (see :meth:`open`,
        :meth:`in_memory`).
    :param clock: the engine's clock; tests may pass one driven by hand.
    :param selection_threshold: the selector's confidence below which a retrieval's
        selection says ``needs_more`` (the reference's default, 0.7).
    :param interpreter: reads captures and proposes mentions and links (an LLM, rules…);
        see :class:`~membrane_es.commands.interpreter.Interpreter`. Without one, capture
        uses its fallback interpretation only.
    :param default_sensitivity: the sensitivity the ``ingest_*`` operations give records
        when the caller names none (capture always defaults to ``low``, as the reference).

    Writes are serialised within one process (event times then increase in log order);
    a write that loses a race with another process is retried from a fresh load, then
    reported as :class:`~membrane_es.errors.ConflictError`.
    """

    def __init__(
        self,
        app: MemoryApplication,
        clock: MonotonicClock | None = None,
        embedder: Embedder | None = None,
        views_dir: Path | None = None,
        selection_threshold: float = DEFAULT_THRESHOLD,
        interpreter: Interpreter | None = None,
        default_sensitivity: str = Sensitivity.LOW.value,
    ) -> None:
        self._selection_threshold = check_unit_interval("selection_threshold", selection_threshold)
        self._default_sensitivity = _check_default_sensitivity(default_sensitivity)
        self._interpreter = interpreter
        self._app = app
        self._clock = clock or MonotonicClock()
        self._embedder = embedder
        self._views_dir = views_dir
        self._consolidation: PeriodicTask | None = None
        self._views = (views_dir and ReadModel.load(views_dir)) or ReadModel()
        max_id = app.recorder.max_notification_id() or 0
        if self._views.position > max_id:
            # The checkpoint is ahead of this log (a different or restored store): start over.
            self._views = ReadModel()
        self._views.catch_up(app)
        index = self._views.embeddings
        if embedder is not None and index.dimensions and index.model != embedder.model:
            raise MembraneError(
                f"this store's vectors were made by {index.model!r}; "
                f"open it with that embedder, not {embedder.model!r}"
            )
        last = app.last_event_time()
        if last is not None:
            self._clock.observe(last)
        self._write_lock = threading.RLock()
        self._batch = threading.local()
        self._closed = False

    # --- construction -------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        sync: bool = True,
        env: Mapping[str, str] | None = None,
        clock: MonotonicClock | None = None,
        embedder: Embedder | None = None,
        selection_threshold: float = DEFAULT_THRESHOLD,
        interpreter: Interpreter | None = None,
        default_sensitivity: str = Sensitivity.LOW.value,
    ) -> Self:
        """A durable store in directory ``path`` (created if missing), backed by LMDB.

        :param sync: fsync every commit (durable); ``False`` trades the last few commits on
            power loss for speed, never consistency.
        :param env: extra eventsourcing settings (e.g. ``COMPRESSOR_TOPIC``, ``CIPHER_KEY``).
        :param embedder: embeds each new record's search text; its vector is stored in the
            record's ``Created`` event (see :mod:`membrane_es.embedding`).
        """
        check_unit_interval("selection_threshold", selection_threshold)  # before opening
        _check_default_sensitivity(default_sensitivity)
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True)
        settings = {
            "PERSISTENCE_MODULE": "membrane_es.lmdb_store",
            "LMDB_PATH": str(directory),
            "LMDB_SYNC": "y" if sync else "n",
            **(env or {}),
        }
        return cls(
            MemoryApplication(settings),
            clock,
            embedder,
            views_dir=directory / "views",
            selection_threshold=selection_threshold,
            interpreter=interpreter,
            default_sensitivity=default_sensitivity,
        )

    @classmethod
    def in_memory(
        cls,
        *,
        env: Mapping[str, str] | None = None,
        clock: MonotonicClock | None = None,
        embedder: Embedder | None = None,
        selection_threshold: float = DEFAULT_THRESHOLD,
        interpreter: Interpreter | None = None,
        default_sensitivity: str = Sensitivity.LOW.value,
    ) -> Self:
        """A store that lives in this process only (eventsourcing's in-memory recorders)."""
        check_unit_interval("selection_threshold", selection_threshold)
        _check_default_sensitivity(default_sensitivity)
        settings = {"PERSISTENCE_MODULE": "eventsourcing.popo", **(env or {})}
        return cls(
            MemoryApplication(settings),
            clock,
            embedder,
            selection_threshold=selection_threshold,
            interpreter=interpreter,
            default_sensitivity=default_sensitivity,
        )

    def close(self) -> None:
        """Checkpoint the read side (durable stores) and release the store."""
        if not self._closed:
            self._closed = True
            if self._consolidation is not None:
                self._consolidation.stop()
            if self._views_dir is not None:
                self._views.catch_up(self._app)
                self._views.save(self._views_dir)
            self._views.close()
            self._app.close()

    @property
    def views(self) -> ReadModel:
        """The read side, caught up with the log (writes by other processes included)."""
        self._views.catch_up(self._app)
        return self._views

    def rebuild_views(self) -> None:
        """Replace the read side by one rebuilt from the whole log."""
        rebuilt = ReadModel.rebuild(self._app)
        with self._write_lock:
            old, self._views = self._views, rebuilt
        old.close()

    def checkpoint(self) -> None:
        """Save the read side now (durable stores); a restart replays only what follows."""
        if self._views_dir is not None:
            self._views.catch_up(self._app)
            self._views.save(self._views_dir)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def application(self) -> MemoryApplication:
        """The underlying eventsourcing application (log, recorder, repository)."""
        return self._app

    # --- writes (reference SDK names and signatures) --------------------------------------

    def create_record(
        self,
        record: RecordInput,
        *,
        actor: str = "system",
        rationale: str = "Initial creation",
        embedding: Sequence[float] | None = None,
    ) -> MemoryRecord:
        """Store a record as given (the reference's direct create); returns it as stored.

        :param embedding: the record's own vector (else the engine's embedder makes one).
        """
        result: MemoryRecord = self.handle(
            messages.CreateRecord(
                record=record,
                actor=actor,
                rationale=rationale,
                embedding=None if embedding is None else list(embedding),
            )
        )
        return result

    def supersede(
        self, old_id: str, new_record: RecordInput, actor: str, rationale: str
    ) -> MemoryRecord:
        """Replace ``old_id`` by ``new_record``; the old one is retracted, nothing deleted."""
        result: MemoryRecord = self.handle(
            messages.Supersede(
                old_id=old_id, new_record=new_record, actor=actor, rationale=rationale
            )
        )
        return result

    def fork(
        self, source_id: str, forked_record: RecordInput, actor: str, rationale: str
    ) -> MemoryRecord:
        """Derive a conditional variant of ``source_id``; both stay active."""
        result: MemoryRecord = self.handle(
            messages.Fork(
                source_id=source_id, forked_record=forked_record, actor=actor, rationale=rationale
            )
        )
        return result

    def retract(self, record_id: str, actor: str, rationale: str) -> None:
        """Withdraw a record: salience 0, excluded from active reads, kept in history."""
        self.handle(messages.Retract(record_id=record_id, actor=actor, rationale=rationale))

    def merge(
        self, record_ids: list[str], merged_record: RecordInput, actor: str, rationale: str
    ) -> MemoryRecord:
        """Combine records into one; every source is retracted, all in one atomic write."""
        result: MemoryRecord = self.handle(
            messages.Merge(
                record_ids=record_ids, merged_record=merged_record, actor=actor, rationale=rationale
            )
        )
        return result

    def contest(self, record_id: str, contesting_ref: str, actor: str, rationale: str) -> None:
        """Flag conflicting evidence (``contesting_ref``: an existing record id, or "")."""
        self.handle(
            messages.Contest(
                record_id=record_id, contesting_ref=contesting_ref, actor=actor, rationale=rationale
            )
        )

    def reinforce(self, record_id: str, actor: str, rationale: str) -> None:
        """The record helped: salience + its gain (capped at 1), decay clock reset."""
        self.handle(messages.Reinforce(record_id=record_id, actor=actor, rationale=rationale))

    def penalize(self, record_id: str, amount: float, actor: str, rationale: str) -> None:
        """The record misled: salience − ``amount`` (never below its floor)."""
        self.handle(
            messages.Penalize(record_id=record_id, amount=amount, actor=actor, rationale=rationale)
        )

    def add_relation(
        self,
        source_id: str,
        predicate: str,
        target_id: str,
        *,
        weight: float = 1.0,
        inverse: str = "",
        actor: str = "system",
        rationale: str = "",
    ) -> None:
        """Relate two existing records (and, with ``inverse``, the target back), atomically."""
        self.handle(
            messages.AddRelation(
                source_id=source_id,
                predicate=predicate,
                target_id=target_id,
                weight=weight,
                inverse=inverse,
                actor=actor,
                rationale=rationale,
            )
        )

    def record_outcome(
        self, record_id: str, status: str, *, actor: str = "system", rationale: str = ""
    ) -> None:
        """Attach an outcome (``success``, ``failure``, ``partial``) to an episodic record."""
        self.handle(
            messages.RecordOutcome(
                record_id=record_id, status=status, actor=actor, rationale=rationale
            )
        )

    def pin(self, record_id: str, *, actor: str = "system", rationale: str = "") -> None:
        """Exempt a record from decay-based hiding."""
        self.handle(messages.Pin(record_id=record_id, actor=actor, rationale=rationale))

    def unpin(self, record_id: str, *, actor: str = "system", rationale: str = "") -> None:
        self.handle(messages.Unpin(record_id=record_id, actor=actor, rationale=rationale))

    # --- capture and ingestion (spec §2) ------------------------------------------------------

    def capture_memory(
        self,
        content: Any,
        *,
        source_kind: str = "agent_turn",
        context: Any = None,
        reason_to_remember: str = "",
        proposed_type: str | None = None,
        summary: str = "",
        sensitivity: str = Sensitivity.LOW.value,
        source: str = "python-client",
        tags: Sequence[str] | None = None,
        scope: str = "",
        timestamp: Timestamp = None,
    ) -> CaptureMemoryResult:
        """Remember raw content (spec §2.4; the SDK's signature).

        Makes a primary record (working for ``source_kind="working_state"``, episodic for
        anything else), an entity for each thing the content names that is not known yet,
        a semantic fact when the content is ``{"subject", "predicate", "object"}``-shaped,
        and the edges between them and the records they name — all in one atomic write.

        :param content: any JSON value; an object's keys drive what is extracted.
        :param context: any JSON value kept alongside (``active_entities`` guide matching).
        :param timestamp: when it happened (aware datetime or RFC 3339); default now.
        """
        result: CaptureMemoryResult = self.handle(
            messages.CaptureMemory(
                content=content,
                source_kind=source_kind,
                context=context,
                reason_to_remember=reason_to_remember,
                proposed_type=proposed_type or "",
                summary=summary,
                sensitivity=sensitivity,
                source=source,
                tags=list(tags or []),
                scope=scope,
                timestamp=timestamp,
            )
        )
        return result

    def ingest_event(
        self,
        event_kind: str,
        ref: str,
        *,
        summary: str = "",
        sensitivity: str | None = None,
        source: str = "python-client",
        tags: Sequence[str] | None = None,
        scope: str = "",
        timestamp: Timestamp = None,
    ) -> MemoryRecord:
        """An event as an episodic record (the older API; confidence 0.8, half-life 1 h)."""
        result: MemoryRecord = self.handle(
            messages.IngestEvent(
                event_kind=event_kind,
                ref=ref,
                summary=summary,
                **self._ingest_fields(sensitivity, source, tags, scope, timestamp),
            )
        )
        return result

    def ingest_tool_output(
        self,
        tool_name: str,
        *,
        args: Mapping[str, Any] | None = None,
        result: Any = None,
        sensitivity: str | None = None,
        source: str = "python-client",
        depends_on: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        scope: str = "",
        timestamp: Timestamp = None,
    ) -> MemoryRecord:
        """A tool call and its result as an episodic record (confidence 0.9, half-life 1 h)."""
        record: MemoryRecord = self.handle(
            messages.IngestToolOutput(
                tool_name=tool_name,
                args=dict(args or {}),
                result=result,
                depends_on=list(depends_on or []),
                **self._ingest_fields(sensitivity, source, tags, scope, timestamp),
            )
        )
        return record

    def ingest_observation(
        self,
        subject: str,
        predicate: str,
        obj: Any,
        *,
        sensitivity: str | None = None,
        source: str = "python-client",
        tags: Sequence[str] | None = None,
        scope: str = "",
        timestamp: Timestamp = None,
    ) -> MemoryRecord:
        """An observed fact as a semantic record (confidence 0.7, half-life 30 days).

        A subject (or string object) that names a known entity in ``scope`` (or unscoped) is
        replaced by the entity's id and joined to it by ``subject_entity``/``object_entity``
        and their inverses, in the same write.
        """
        record: MemoryRecord = self.handle(
            messages.IngestObservation(
                subject=subject,
                predicate=predicate,
                object=obj,
                **self._ingest_fields(sensitivity, source, tags, scope, timestamp),
            )
        )
        return record

    def ingest_outcome(
        self,
        target_record_id: str,
        outcome_status: str,
        *,
        source: str = "python-client",
        timestamp: Timestamp = None,
    ) -> MemoryRecord:
        """Record an episode's outcome (``success``, ``failure``, ``partial``) on its episodic
        record; returns the record as updated."""
        record: MemoryRecord = self.handle(
            messages.IngestOutcome(
                target_record_id=target_record_id,
                outcome_status=outcome_status,
                source=source,
                timestamp=timestamp,
            )
        )
        return record

    def ingest_working_state(
        self,
        thread_id: str,
        state: str,
        *,
        next_actions: Sequence[str] | None = None,
        open_questions: Sequence[str] | None = None,
        context_summary: str = "",
        active_constraints: Sequence[Any] | None = None,
        sensitivity: str | None = None,
        source: str = "python-client",
        tags: Sequence[str] | None = None,
        scope: str = "",
        timestamp: Timestamp = None,
    ) -> MemoryRecord:
        """A thread's working state as a working record (confidence 1.0, half-life 1 day)."""
        record: MemoryRecord = self.handle(
            messages.IngestWorkingState(
                thread_id=thread_id,
                state=state,
                next_actions=list(next_actions or []),
                open_questions=list(open_questions or []),
                context_summary=context_summary,
                active_constraints=list(active_constraints or []),
                **self._ingest_fields(sensitivity, source, tags, scope, timestamp),
            )
        )
        return record

    def _ingest_fields(
        self,
        sensitivity: str | None,
        source: str,
        tags: Sequence[str] | None,
        scope: str,
        timestamp: Timestamp,
    ) -> dict[str, Any]:
        return {
            "sensitivity": sensitivity or self._default_sensitivity,
            "source": source,
            "tags": list(tags or []),
            "scope": scope,
            "timestamp": timestamp,
        }

    # --- reads ----------------------------------------------------------------------------

    def retrieve_by_id(
        self,
        record_id: str,
        *,
        trust: TrustContext | None = _LEAST_PRIVILEGE,
        as_of: datetime | None = None,
    ) -> MemoryRecord:
        """One record in full, now or as it stood at ``as_of`` (decay evaluated then).

        Raises :class:`~membrane_es.errors.NotFoundError` for an unknown id (or one created
        after ``as_of``) and :class:`~membrane_es.errors.AccessDeniedError` when the trust
        context may not read it in full. The default trust is least privilege (``low``, no
        scopes), as in the reference SDK; ``trust=None`` is an error.
        """
        return record_queries.retrieve_by_id(
            self._app, record_id, trust, now=self._clock.now(), as_of=as_of
        )

    def retrieve(
        self,
        task_descriptor: str = "",
        *,
        trust: TrustContext | None = _LEAST_PRIVILEGE,
        memory_types: Iterable[str] | None = None,
        min_salience: float = 0.0,
        limit: int = 0,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
        include_retracted: bool = False,
        query_embedding: Sequence[float] | None = None,
    ) -> RetrieveResult:
        """Layered retrieval: the records visible to ``trust`` that a task needs, best first.

        Layers run working → entity → semantic → competence → plan_graph → episodic
        (``memory_types`` restricts them). Records are ranked by salience, or, when the
        descriptor gives evidence (shared words; with an embedder or ``query_embedding``,
        vector similarity), by that evidence blended with salience; ties by salience, newer,
        then id. Competence and plan_graph candidates are also scored by the multi-solution
        selector (``selection``; None when there are none).

        :param trust: who asks; records one level above its ceiling come back redacted,
            higher ones and those outside its scopes not at all. Default: least privilege.
        :param min_salience: leave out records less salient than this (decay evaluated at
            the moment answered for).
        :param limit: at most this many records (0: all).
        :param as_of: answer as the store stood at that moment, exactly as a read then did.
        :param valid_at: keep only semantic facts whose validity window contains it.
        :param include_retracted: also return retracted records and records decayed to
            nothing (both excluded from active reads, kept in history).
        :param query_embedding: the descriptor's vector, instead of the embedder's reading.
        """
        query = retrieve_queries.Retrieve(
            task_descriptor=task_descriptor,
            trust=trust,
            memory_types=memory_types,
            min_salience=min_salience,
            limit=limit,
            as_of=as_of,
            valid_at=valid_at,
            include_retracted=include_retracted,
            query_embedding=query_embedding,
        )
        return retrieve_queries.retrieve(query, self._sources())

    def retrieve_graph(
        self,
        task_descriptor: str = "",
        *,
        trust: TrustContext | None = _LEAST_PRIVILEGE,
        memory_types: Iterable[str] | None = None,
        min_salience: float = 0.0,
        root_limit: int = graph_queries.DEFAULT_ROOT_LIMIT,
        node_limit: int = graph_queries.DEFAULT_NODE_LIMIT,
        edge_limit: int = graph_queries.DEFAULT_EDGE_LIMIT,
        max_hops: int = graph_queries.DEFAULT_MAX_HOPS,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> RetrieveGraphResult:
        """Ranked roots for a task and the records related to them, within bounds.

        Roots come from :meth:`retrieve` (``3 × root_limit`` candidates) plus entities named
        exactly by the descriptor, reranked towards records tied to what it names. Then
        relations are followed breadth first up to ``max_hops`` (0: roots only), never to a
        record the caller may not see. Nodes: roots first in rank order, then the others by
        hop, then salience.

        Every limit means what it says (0: none of that kind); the gRPC edge maps the wire's
        0 to the default and −1 to "roots only" for ``max_hops``.
        """
        query = graph_queries.RetrieveGraph(
            task_descriptor=task_descriptor,
            trust=trust,
            memory_types=memory_types,
            min_salience=min_salience,
            root_limit=root_limit,
            node_limit=node_limit,
            edge_limit=edge_limit,
            max_hops=max_hops,
            as_of=as_of,
            valid_at=valid_at,
            query_embedding=query_embedding,
        )
        return graph_queries.retrieve_graph(query, self._sources())

    def _sources(self) -> retrieve_queries.Sources:
        return retrieve_queries.Sources(
            views=self.views,
            reader=self._app,
            now=self._clock.now(),
            embedder=self._embedder,
            selection_threshold=self._selection_threshold,
        )

    def get_metrics(self, *, as_of: datetime | None = None) -> dict[str, Any]:
        """The reference metrics snapshot (spec §6), now or as the store stood at ``as_of``.

        Exactly the reference keys: ``collected_at`` (RFC 3339, the moment answered for),
        ``total_records``, ``records_by_type`` (types present only), ``avg_salience``,
        ``avg_confidence``, ``salience_distribution`` (always the five buckets ``0.0-0.2`` …
        ``0.8-1.0``), ``active_records`` (salience > 0), ``pinned_records``,
        ``total_audit_entries``, ``memory_growth_rate`` (created in the 24 h before the
        moment / total), ``retrieval_usefulness`` (reinforce entries / all entries),
        ``competence_success_rate``, ``plan_reuse_frequency`` and ``revision_rate`` (revise,
        fork and merge entries / all entries); a ratio is 0 when its denominator is.

        Like the reference, every stored record counts, with no trust filtering: retracted
        records too (kept forever here, with salience 0), and records decayed to nothing
        that the reference would have pruned (its behaviour before a sweep). Kept
        incrementally by the read side (:mod:`membrane_es.projections.metrics`).
        """
        views = self.views
        with views.lock:
            table = views.table
            if as_of is None:
                moment = self._clock.now()
                return views.metrics.snapshot(table, micros(moment), table.state_now(), live=True)
            at = micros(check_moment("as_of", as_of))
            return views.metrics.snapshot(table, at, table.state_at(at), live=False)

    def history(
        self, record_id: str, *, trust: TrustContext | None = _LEAST_PRIVILEGE
    ) -> list[HistoryEntry]:
        """Every event of a record: version, time, event, audit action, actor, rationale."""
        return record_queries.history(self._app, record_id, trust, now=self._clock.now())

    def verify(self) -> Any:
        """Walk the log's hash chain; the report names the first altered, missing or
        reordered event (LMDB stores; other persistence modules keep no chain)."""
        verify = getattr(self._app.recorder, "verify", None)
        if verify is None:
            raise MembraneError("this persistence module keeps no hash chain to verify")
        return verify()

    # --- the command bus ------------------------------------------------------------------

    def handle(self, command: Command) -> Any:
        """Run one command; inside :meth:`batch` its events join the batch's single write."""
        handler = COMMAND_HANDLERS[type(command)]
        batch: EventStoreUnitOfWork | None = getattr(self._batch, "uow", None)
        if batch is not None:
            return handler(command, batch)
        for attempt in range(CONFLICT_ATTEMPTS):
            with self._write_lock:
                uow = self._unit_of_work()
                try:
                    result = handler(command, uow)
                    self._views.follow(uow.recordings, self._app)  # callers read their own writes
                    return result
                except IntegrityError:
                    # Another writer (another process) saved first: reload and try again.
                    if attempt == CONFLICT_ATTEMPTS - 1:
                        break
        raise ConflictError(
            f"{type(command).__name__} lost {CONFLICT_ATTEMPTS} races with concurrent writers"
        )

    def _unit_of_work(self) -> EventStoreUnitOfWork:
        return EventStoreUnitOfWork(
            self._app, self._clock, self._embedder, self._views, self._interpreter
        )

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run many commands as one atomic, durable write (one commit for all of them).

        Inside the block every write returns as usual; nothing is visible to other readers
        until the block ends, and if it raises, none of it is written.
        """
        if getattr(self._batch, "uow", None) is not None:
            raise MembraneError("batches do not nest")
        with self._write_lock:
            uow = self._unit_of_work()
            uow.deferred = True
            self._batch.uow = uow
            try:
                yield
                try:
                    uow.commit()
                    self._views.follow(uow.recordings, self._app)
                except IntegrityError:
                    raise ConflictError(
                        "another writer changed a record this batch revised; nothing was written"
                    ) from None
            except BaseException:
                uow.rollback()
                raise
            finally:
                self._batch.uow = None

    # --- consolidation (spec §5.5) ----------------------------------------------------------

    def consolidate(
        self, *, now: datetime | None = None, extractor: Extractor | None = None
    ) -> ConsolidationResult:
        """Consolidate once: compress old episodes, extract facts, skills and plan graphs.

        Idempotent: a run does only what no earlier run did (each episode is compressed
        once; a fact or skill is reinforced once per source episode; each plan is extracted
        once), so running it again right away changes nothing and returns zero counters.
        Each derived record with its relations is one atomic write; a failure stops the run
        and keeps what was written before it (the next run picks up the rest).

        :param now: the moment episode ages are measured at (default: now).
        :param extractor: reads each episode's text and proposes subject–predicate–object
            facts (an LLM, rules…); see :class:`~membrane_es.commands.extractor.Extractor`.
        """
        result: ConsolidationResult = self.handle(
            messages.Consolidate(now=now, extractor=extractor)
        )
        return result

    def start_consolidation(
        self, interval_seconds: float, *, extractor: Extractor | None = None
    ) -> PeriodicTask:
        """Consolidate every ``interval_seconds`` on a background thread until :meth:`close`
        (the reference daemon's default is every 6 hours). Returns the running task."""
        if self._consolidation is not None:
            raise MembraneError("consolidation is already scheduled")
        task = PeriodicTask(
            "membrane-consolidation",
            interval_seconds,
            lambda: self.consolidate(extractor=extractor),
        )
        self._consolidation = task
        task.start()
        return task


def _check_default_sensitivity(value: str) -> str:
    """The configured default must be a sensitivity level (the reference refuses to start)."""
    if value not in Sensitivity.__members__.values():
        raise ValidationError("default_sensitivity", f'invalid default sensitivity "{value}"')
    return str(value)

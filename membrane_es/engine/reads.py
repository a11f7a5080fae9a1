"""The facade's reads: a record, its history, layered and graph retrieval, a context packed
to a token budget, metrics."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from membrane_es.embedding.tokens import counter_for
from membrane_es.engine.changes import check_after
from membrane_es.engine.core import (
    _LEAST_PRIVILEGE,
    EngineCore,
)
from membrane_es.errors import MembraneError, ValidationError
from membrane_es.projections.timecodes import micros
from membrane_es.queries import by_id as record_queries
from membrane_es.queries import context as context_queries
from membrane_es.queries import record_ids as listing
from membrane_es.queries import retrieve as retrieve_queries
from membrane_es.queries import retrieve_graph as graph_queries
from membrane_es.queries import touched as touched_queries
from membrane_es.queries.by_id import HistoryEntry
from membrane_es.queries.touched import RecordChanges
from membrane_es.schema.records import MemoryRecord, TrustContext
from membrane_es.schema.results import ContextResult, RetrieveGraphResult, RetrieveResult
from membrane_es.schema.validation import (
    VectorInput,
    check_limit,
    check_moment,
)
from membrane_es.stores.chain import check_span

_MICROSECOND = timedelta(microseconds=1)


class Reads(EngineCore):
    """Everything that answers without writing."""

    # --- reads ----------------------------------------------------------------------------

    def retrieve_by_id(
        self,
        record_id: str,
        *,
        trust: TrustContext | None = _LEAST_PRIVILEGE,
        as_of: datetime | None = None,
        as_of_position: int | None = None,
        min_position: int | None = None,
    ) -> MemoryRecord:
        """One record in full, now or as it stood at ``as_of`` (decay evaluated then).

        Raises :class:`~membrane_es.errors.NotFoundError` for an unknown id (or one created
        after ``as_of``) and :class:`~membrane_es.errors.AccessDeniedError` when the trust
        context may not read it in full. The default trust is least privilege (``low``, no
        scopes), as in the reference SDK; ``trust=None`` is an error. ``min_position``: as
        for :meth:`retrieve`. ``as_of_position``: the record as it stood right after the event
        at that log position, exactly (a position before its creation: not found).
        """
        self.wait_for_position(min_position)
        if as_of_position is not None:
            self._as_of(as_of, as_of_position)  # checked: given alone, within the log
            return record_queries.retrieve_at_position(self._app, record_id, trust, as_of_position)
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
        as_of_position: int | None = None,
        valid_at: datetime | None = None,
        include_retracted: bool = False,
        query_embedding: VectorInput | None = None,
        exact: bool = False,
        min_position: int | None = None,
        explain: bool = False,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> RetrieveResult:
        """Layered retrieval: the records visible to ``trust`` that a task needs, best first.

        Layers run working → entity → semantic → competence → plan_graph → episodic
        (``memory_types`` restricts them). Without a task (an empty descriptor, no
        ``query_embedding``) every admitted record is listed by salience. With one, only the
        records it gives some evidence for are returned (shared words; with an embedder or
        ``query_embedding``, vector similarity; an event time in a period it names), ranked
        by that evidence blended with salience: a task nothing answers returns no records.
        Ties by salience, newer, then id. Competence and plan_graph candidates are also
        scored by the multi-solution selector (``selection``; None when there are none).

        :param trust: who asks; records one level above its ceiling come back redacted,
            higher ones and those outside its scopes not at all. Default: least privilege.
        :param min_salience: leave out records less salient than this (decay evaluated at
            the moment answered for).
        :param limit: at most this many records (0: all).
        :param as_of: answer as the store stood at that moment, exactly as a read then did.
        :param as_of_position: answer as the store stood right after the event at this log
            position (a :class:`~membrane_es.schema.changes.Change`'s ``position``, a
            write's :attr:`last_position`), instead of ``as_of``: see :meth:`_as_of`.
        :param valid_at: keep only semantic facts whose validity window contains it.
        :param created_after: keep records whose event time (``created_at``: when it happened,
            as captured or given) is at or after it (``as_of`` is the other time axis: when
            the store learned of it).
        :param created_before: ... and before it.
        :param include_retracted: also return retracted records, records penalised to nothing
            and records past their ``max_age_seconds`` (excluded from active reads, kept in
            history). A record that merely faded is always returned, ranked lower.
        :param query_embedding: the descriptor's vector, instead of the embedder's reading.
        :param explain: return an :class:`~membrane_es.schema.results.ExplainedRetrieveResult`,
            with an :class:`~membrane_es.schema.results.Explanation` per record: its vector and
            lexical scores, relevance, salience at the moment answered for, score and trust
            decision (an audit of the ranking, now or ``as_of`` T).
        :param exact: score every vector the read may see. Otherwise a read with a limit over
            16,384 vectors or more scores only the nearest by their sign codes, when the codes
            vouch for them (on vectors without clusters they cannot, and the read is exact).
        :param min_position: answer only once the views include the log up to this position
            (a write's :attr:`last_position`, perhaps made by another process); waits up to
            a few seconds, then :class:`~membrane_es.errors.PositionNotReachedError`.
        """
        self.wait_for_position(min_position)
        as_of = self._as_of(as_of, as_of_position)
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
            explain=explain,
            created_after=created_after,
            created_before=created_before,
            exact=exact,
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
        as_of_position: int | None = None,
        valid_at: datetime | None = None,
        query_embedding: VectorInput | None = None,
        exact: bool = False,
        min_position: int | None = None,
        explain: bool = False,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> RetrieveGraphResult:
        """Ranked roots for a task and the records related to them, within bounds.

        Roots come from :meth:`retrieve` (``3 × root_limit`` candidates) plus entities named
        exactly by the descriptor, reranked towards records tied to what it names. Then
        relations are followed breadth first up to ``max_hops`` (0: roots only), never to a
        record the caller may not see. Nodes: roots first in rank order, then the others by
        hop, then salience.

        Every limit means what it says (0: none of that kind); the gRPC edge maps the wire's
        0 to the default and −1 to "roots only" for ``max_hops``. ``min_position`` and
        ``exact``: as for :meth:`retrieve`. ``explain``: an
        :class:`~membrane_es.schema.results.ExplainedRetrieveGraphResult`, explaining each
        root as :meth:`retrieve` does, with the boost its ties to what the descriptor names
        added. ``created_after`` / ``created_before``: an event-time window on the roots.
        """
        self.wait_for_position(min_position)
        as_of = self._as_of(as_of, as_of_position)
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
            explain=explain,
            created_after=created_after,
            created_before=created_before,
            exact=exact,
        )
        return graph_queries.retrieve_graph(query, self._sources())

    def record_ids(
        self,
        *,
        trust: TrustContext | None = _LEAST_PRIVILEGE,
        memory_types: Iterable[str] | None = None,
        as_of: datetime | None = None,
        as_of_position: int | None = None,
        include_retracted: bool = False,
        min_position: int | None = None,
    ) -> list[str]:
        """The ids of the records ``trust`` may read in full, oldest first, loading none.

        For callers that file their own structure under record ids and scopes (list a
        scope's ids, then read the few they need with :meth:`retrieve_by_id`). Active
        records only unless ``include_retracted``; ``as_of``: the ids as the store stood
        then; records the trust would see only redacted are left out. ``trust``'s scopes
        narrow the listing to those scopes (and unscoped records), at the cost of the
        records in them, not of the store. ``min_position``: as for :meth:`retrieve`.
        """
        self.wait_for_position(min_position)
        as_of = self._as_of(as_of, as_of_position)
        return listing.record_ids(
            self.views,
            self._clock.now(),
            trust=trust,
            memory_types=memory_types,
            as_of=as_of,
            include_retracted=include_retracted,
        )

    def record_changes(self, after: int, *, limit: int = 10_000) -> RecordChanges | None:
        """The records the log's events after position ``after`` touched, up to the position
        the views reflect now (every write acknowledged before the call, by any process):
        each once, in the order of its last event, with whether an active read finds it.

        For callers that keep their own index of records (a framework adapter) and follow
        the log by applying only what is new. None when more than ``limit`` events came
        after ``after`` (read afresh instead), or when ``after`` is past the views."""
        check_limit("after", after, low=0, high=2**63 - 1)
        check_limit("limit", limit, low=1, high=1_000_000)
        views = self._views
        with views.lock:
            # Caught up even when a follower applies the log as it is notified: a write
            # another process acknowledged before this call may not have reached it yet.
            views.catch_up(self._app)
            position = views.position
            if after > position or position - after > limit:
                return None
            keys = [] if after == position else self._recent_keys(after, position)
            if keys is None:  # written (partly) by another process: read from the log
                keys = [
                    notification.originator_id
                    for notification in self._app.recorder.select_notifications(
                        start=after + 1, limit=position - after, stop=position
                    )
                ]
            return touched_queries.record_changes(views, after, keys, micros(self._clock.now()))

    def context(
        self,
        task_descriptor: str,
        *,
        trust: TrustContext | None = _LEAST_PRIVILEGE,
        budget_tokens: int = context_queries.DEFAULT_BUDGET_TOKENS,
        as_of: datetime | None = None,
        as_of_position: int | None = None,
        memory_types: Iterable[str] | None = None,
        min_salience: float = 0.0,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        min_position: int | None = None,
        relevance_floor: float | None = None,
    ) -> ContextResult:
        """The memories a task needs, packed into ``budget_tokens`` as text a language model
        reads: one line a memory (event date, who, the words, a short ref to cite — a prefix
        of its id), the turns of a conversation together, in time order; with the ids held.
        Entities are named, a conversation turn reads ``speaker: words``, what changed says
        so (``Dana city: Faro (since 2026-11-29; was Lisbon)``), no line is packed twice, and
        a line scoring under ``relevance_floor`` times the best match's score is left out —
        budget is left unused rather than filled with what matches nothing (None: the
        measured default, :data:`~membrane_es.queries.context.DEFAULT_RELEVANCE_FLOOR`; 0:
        fill the budget).

        Ranked as :meth:`retrieve` ranks, under the same ``trust``, filters and ``as_of``
        (a context as of T holds only records a retrieve at T returned); records the trust
        would return redacted are left out, and an erased record has no words to pack.
        Tokens are the embedder's (MiniLM's word pieces), or an estimate without one
        (``counted_with`` says which). ``min_position``: as for :meth:`retrieve`.
        See :mod:`membrane_es.queries.context`.
        """
        self.wait_for_position(min_position)
        as_of = self._as_of(as_of, as_of_position)
        query = context_queries.Context(
            task_descriptor=task_descriptor,
            trust=trust,
            budget_tokens=budget_tokens,
            as_of=as_of,
            memory_types=memory_types,
            min_salience=min_salience,
            created_after=created_after,
            created_before=created_before,
            relevance_floor=relevance_floor,
            many_valued=frozenset(self._resolution.vocabulary.listed()["many"]),
        )
        return context_queries.context(query, self._sources(), counter_for(self._embedder))

    def log_time_at(self, position: int) -> datetime:
        """The moment a read as of log position ``position`` answers for: the log time of
        the event there (0: just before the first event). What a surface whose reads take
        only a moment (the entries API, which keeps time in epoch seconds) reads as of a
        position by. A position past the log's head raises
        :class:`~membrane_es.errors.ValidationError` naming ``as_of_position``."""
        moment = self._as_of(None, position)
        assert moment is not None  # a position was given
        return moment

    def _as_of(self, as_of: datetime | None, as_of_position: int | None) -> datetime | None:
        """The moment a read answers for: ``as_of``, or the log time of the event at
        ``as_of_position`` (given one or the other, not both).

        A read by id as of a position is exact to the event. The other reads are answered
        from the views as of that event's log time, which no later write shares (each write
        is timed after every one before it); one write's several events may share it, and
        such a read sees that write whole."""
        if as_of_position is None:
            return as_of
        if as_of is not None:
            raise ValidationError("as_of_position", "give as_of or as_of_position, not both")
        position = check_after(as_of_position, "as_of_position")
        head = self._app.recorder.max_notification_id() or 0
        if position > head:
            raise ValidationError(
                "as_of_position", f"the log holds events up to position {head}, not {position}"
            )
        if position == 0:  # before the first event: nothing was there yet
            first = self._app.first_event_time()
            return self._clock.now() if first is None else first - _MICROSECOND
        moment, _ = self._app.events_at(position)
        return moment

    def _sources(self) -> retrieve_queries.Sources:
        return retrieve_queries.Sources(
            views=self.views,
            reader=self._app,
            now=self._clock.now(),
            embedder=self._embedder,
            selection_threshold=self._selection_threshold,
        )

    def get_metrics(
        self,
        *,
        as_of: datetime | None = None,
        as_of_position: int | None = None,
        min_position: int | None = None,
    ) -> dict[str, Any]:
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
        (its behaviour before a sweep). Kept
        incrementally by the read side (:mod:`membrane_es.projections.metrics`).
        ``min_position``: as for :meth:`retrieve`.
        """
        self.wait_for_position(min_position)
        as_of = self._as_of(as_of, as_of_position)
        views = self.views
        with views.lock:
            table = views.table
            if as_of is None:
                moment = self._clock.now()
                return views.metrics.snapshot(table, micros(moment), table.state_now(), live=True)
            at = micros(check_moment("as_of", as_of))
            return views.metrics.snapshot(table, at, table.state_at(at), live=False)

    def history(
        self,
        record_id: str,
        *,
        trust: TrustContext | None = _LEAST_PRIVILEGE,
        min_position: int | None = None,
    ) -> list[HistoryEntry]:
        """Every event of a record: version, time, event, audit action, actor, rationale.
        ``min_position``: as for :meth:`retrieve`."""
        self.wait_for_position(min_position)
        return record_queries.history(self._app, record_id, trust, now=self._clock.now())

    def verify(self, *, from_position: int | None = None, to_position: int | None = None) -> Any:
        """Walk the log's hash chain; the report names the first altered, missing or
        reordered event. LMDB and PostgreSQL stores: the in-memory one keeps no chain, and
        this raises rather than report a check that never ran.

        ``from_position``/``to_position``: check the positions from one to the other only
        (both included; either left out: the log's start or its head), the first linked
        to the hash the log keeps of the one before it, and the last to the log's head
        when it is the head. A bound below 1, past the head, or a start after the end
        raises :class:`~membrane_es.errors.ValidationError` naming it."""
        first, last = check_span(from_position, to_position)
        verifier = self._app.abilities.verifier
        if verifier is None:
            module = type(self._app.recorder).__module__
            raise MembraneError(
                f"verify: this store's log ({module}) keeps no hash chain; "
                "only LMDB and PostgreSQL stores can be verified"
            )
        if first is None and last is None:
            return verifier.verify()
        return verifier.verify(first=first, last=last)

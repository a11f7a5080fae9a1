"""Layered retrieval (spec §3.2): the records a task needs, ranked, and the selector's verdict.

Layers are the memory types in the reference's canonical order — working, entity, semantic,
competence, plan_graph, episodic — or the requested types (any order, duplicates ignored).
Candidates pass the filters of :mod:`membrane_es.queries.candidates` (trust, active, validity,
``min_salience``), are ordered by :mod:`membrane_es.queries.ranking` (salience, or relevance
blended with salience when the descriptor gives evidence) and cut to ``limit`` (0: no limit).
Competence and plan_graph candidates — all of them, before the cut — also go through the
multi-solution selector (:mod:`membrane_es.queries.selector`); the selection is None when
there are none.

Where this differs from the reference on purpose: retracted records, and records penalised
to nothing or past their ``max_age_seconds``, are left out unless ``include_retracted`` (the
reference deletes them at its next sweep); a record that merely decayed — however far —
stays a candidate and is ranked lower (the reference prunes it below 0.001);
the selector's order does not override the ranking of ``records`` (the reference puts every
selected record first whenever the descriptor is non-empty) — it is reported in
``selection``; ties are ordered deterministically.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from membrane_es.embedding.protocol import Embedder, normalise
from membrane_es.errors import ValidationError
from membrane_es.projections.passages import with_passages
from membrane_es.projections.read_model import ReadModel
from membrane_es.projections.timecodes import micros
from membrane_es.queries import feedback, vectors
from membrane_es.queries.alternatives import in_turn, named_things
from membrane_es.queries.by_id import EventReader
from membrane_es.queries.candidates import Candidates, Filters, admit, find, type_codes, universe
from membrane_es.queries.explain import Evidence, Placed, explain_rows, turns_searched_with
from membrane_es.queries.lexical import coverage, matches
from membrane_es.queries.periods import named_periods
from membrane_es.queries.ranking import (
    blend,
    lexical_evidence,
    order,
    redacted_last,
    relative,
    relevance,
)
from membrane_es.queries.selector import (
    DEFAULT_THRESHOLD,
    Selection,
    applicability,
    recency,
    scores,
    select,
    success_rate,
)
from membrane_es.queries.snapshot import Hydrator, Snapshot, consistently
from membrane_es.queries.when_asked import asks_when, says_when
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.records import TrustContext
from membrane_es.schema.results import ExplainedRetrieveResult, RetrieveResult, SelectionResult
from membrane_es.schema.validation import (
    VectorInput,
    check_amount,
    check_flag,
    check_limit,
    check_memory_types,
    check_moment,
    check_text,
    check_trust,
    check_vector,
)

Array = npt.NDArray[Any]

LAYERS: tuple[MemoryType, ...] = (
    MemoryType.WORKING,
    MemoryType.ENTITY,
    MemoryType.SEMANTIC,
    MemoryType.COMPETENCE,
    MemoryType.PLAN_GRAPH,
    MemoryType.EPISODIC,
)
SELECTABLE = frozenset({MemoryType.COMPETENCE, MemoryType.PLAN_GRAPH})
LEXICAL_SCORED = 1024  # lexical matches given an exact similarity however far their vectors
# How many records the command line and the MCP tool return unless told (an agent reads a
# short list; the Python API's default, 0, returns every match).
DEFAULT_RESULTS = 10


class Retrieve(msgspec.Struct, kw_only=True, frozen=True):
    """Layered retrieval for a task. Fields are checked when the query runs.

    ``created_after`` / ``created_before`` keep records whose event time (``created_at``: when
    it happened) is in ``[after, before)``; ``as_of`` answers as the store stood then (decay
    evaluated then) — transaction time, the log's; ``valid_at`` keeps only
    semantic facts whose validity window contains that moment; ``query_embedding`` replaces
    the embedder's reading of the descriptor.
    """

    task_descriptor: str = ""
    trust: TrustContext | None = msgspec.field(default_factory=TrustContext)
    memory_types: Iterable[str] | None = None
    min_salience: float = 0.0
    limit: int = 0
    as_of: datetime | None = None
    valid_at: datetime | None = None
    include_retracted: bool = False
    query_embedding: VectorInput | None = None
    exact: bool = False
    explain: bool = False
    created_after: datetime | None = None
    created_before: datetime | None = None


@dataclass(frozen=True)
class Sources:
    """What retrieval reads: the views, the event store (to hydrate what it returns), the
    moment it runs, the embedder that reads descriptors, and the selector's threshold."""

    views: ReadModel
    reader: EventReader
    now: datetime
    embedder: Embedder | None = None
    selection_threshold: float = DEFAULT_THRESHOLD


@dataclass(frozen=True)
class Plan:
    """A checked retrieval request."""

    descriptor: str
    trust: TrustContext
    filters: Filters
    limit: int
    as_of: datetime | None
    query_vector: Array | None
    exact: bool = False  # score every vector, never a shortlist
    explain: bool = False
    # a task was given: only records it gives some evidence for are returned
    evidence_only: bool = False
    # the two things a task relates, each searched as a task of its own
    # (:mod:`membrane_es.queries.alternatives`)
    things: tuple[Plan, ...] = ()
    # the task's own vector, when ``query_vector`` is it moved by relevance feedback
    # (:mod:`membrane_es.queries.feedback`): explanations report similarity to this one
    asked_vector: Array | None = None


@dataclass(frozen=True)
class Ranking:
    """Candidates best first (cut to the limit) with the score each was ranked by, and the
    selector's verdict over the competence and plan_graph candidates (its ``ranked``
    indexes ``selectable``)."""

    ranked: Candidates
    selectable: Candidates | None
    selection: Selection | None
    scores: Array | None = None
    evidence: Evidence | None = None  # aligned with ``ranked`` (for explanations)
    # aligned with ``ranked``: the passage of a long text its similarity is of (1: the
    # record's own vector, 0: a text with one passage); None when no candidate has several
    passages: Array | None = None
    # the rows of the records the task's vector was moved toward (relevance feedback);
    # empty when the read searched once
    searched_toward: Array = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # whether ``scores`` came from the task's evidence (else: salience, nothing matched)
    by_evidence: bool = False


def retrieve(query: Retrieve, sources: Sources) -> RetrieveResult:
    trust = check_trust(query.trust)  # first, as the reference does
    plan = make_plan(
        sources,
        descriptor=query.task_descriptor,
        trust=trust,
        memory_types=query.memory_types,
        min_salience=query.min_salience,
        limit=check_limit("limit", query.limit),
        as_of=query.as_of,
        valid_at=query.valid_at,
        created_after=query.created_after,
        created_before=query.created_before,
        include_retracted=check_flag("include_retracted", query.include_retracted),
        query_embedding=query.query_embedding,
        exact=check_flag("exact", query.exact),
        explain=check_flag("explain", query.explain),
    )
    # With a task in words, a record the task gives no evidence for (no shared word, no
    # vector pointing its way, not in a period it names) is not an answer: salience alone
    # never returns one. Without words every admitted record is listed, by salience or, for
    # a caller's own query vector, by nearness (a nearest-neighbour search answers k).
    plan = replace(plan, evidence_only=bool(plan.descriptor.strip()))
    return consistently(sources.views, sources.now, plan.as_of, partial(answer, plan, sources))


def answer(plan: Plan, sources: Sources, snapshot: Snapshot) -> RetrieveResult:
    """The result of a checked request, read from one snapshot."""
    ranking = rank(snapshot, plan, sources.selection_threshold)
    hydrator = hydrator_for(sources, snapshot, ranking)
    ranked = ranking.ranked
    records = [
        hydrator.visible(int(row), bool(redacted))
        for row, redacted in zip(ranked.rows, ranked.redacted, strict=True)
    ]
    selection = selection_result(ranking, hydrator)
    if not plan.explain:
        return RetrieveResult(records=records, selection=selection)
    ranked_places, ids = placed(ranked), snapshot.table.ids
    explanations = explain_rows(
        ranked_places,
        ranking.evidence,
        positions(ranked),
        ids,
        snapshot.moment,
        searched_with=turns_searched_with(snapshot, ranking.evidence, ranked_places),
    )
    return ExplainedRetrieveResult(
        records=records,
        selection=selection,
        explanations=explanations,
        searched_toward=[ids[int(row)] for row in ranking.searched_toward],
    )


def placed(ranked: Candidates) -> list[Placed]:
    """The ranked candidates as :class:`~membrane_es.queries.explain.Placed`."""
    return [
        Placed(int(row), bool(redacted), float(salience))
        for row, redacted, salience in zip(
            ranked.rows, ranked.redacted, ranked.salience, strict=True
        )
    ]


def positions(ranked: Candidates) -> dict[int, int]:
    """Each ranked row's place in the ranking's arrays."""
    return {int(row): i for i, row in enumerate(ranked.rows)}


def hydrator_for(sources: Sources, snapshot: Snapshot, ranking: Ranking) -> Hydrator:
    """A hydrator that knows the salience of every record the ranking may return."""
    hydrator = Hydrator(sources.reader, snapshot)
    hydrator.know(ranking.ranked.rows, ranking.ranked.salience)
    hydrator.prepare(ranking.ranked.rows)
    if ranking.selectable is not None:
        hydrator.know(ranking.selectable.rows, ranking.selectable.salience)
    return hydrator


def make_plan(
    sources: Sources,
    *,
    descriptor: str,
    trust: TrustContext | None,
    memory_types: Iterable[str] | None,
    min_salience: float,
    limit: int,
    as_of: datetime | None,
    valid_at: datetime | None,
    include_retracted: bool,
    query_embedding: VectorInput | None,
    exact: bool = False,
    explain: bool = False,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> Plan:
    """Check a request (every failure names its field) and read the descriptor's vector."""
    trust = check_trust(trust)
    descriptor = check_text("task_descriptor", descriptor)
    types = check_memory_types("memory_types", memory_types)
    filters = Filters(
        types=frozenset(types),
        min_salience=check_amount("min_salience", min_salience),
        include_retracted=include_retracted,
        valid_at=None if valid_at is None else micros(check_moment("valid_at", valid_at)),
        created_after=_micros_of("created_after", created_after),
        created_before=_micros_of("created_before", created_before),
    )
    moment = None if as_of is None else check_moment("as_of", as_of)
    vector = _query_vector(descriptor, query_embedding, sources)
    plan = Plan(descriptor, trust, filters, limit, moment, vector, exact, explain)
    things = tuple(
        replace(plan, descriptor=thing, query_vector=_query_vector(thing, None, sources))
        for thing in named_things(descriptor)
    )
    return replace(plan, things=things)


def _micros_of(field: str, moment: datetime | None) -> int | None:
    return None if moment is None else micros(check_moment(field, moment))


def _query_vector(descriptor: str, given: VectorInput | None, sources: Sources) -> Array | None:
    """The caller's vector (checked against the store's width), else the embedder's reading
    of a non-blank descriptor, else none."""
    index, embedder = sources.views.embeddings, sources.embedder
    if given is not None:
        values = check_vector("query_embedding", given)
        expected = index.dimensions or (embedder.dimensions if embedder is not None else 0)
        if expected and len(values) != expected:
            raise ValidationError(
                "query_embedding", f"expected {expected} dimensions, got {len(values)}"
            )
        vector = normalise(np.asarray(values, dtype=np.float32))
    elif embedder is not None and descriptor.strip():
        vector = np.asarray(embedder.embed([descriptor])[0], dtype=np.float32)
    else:
        return None
    return vector if vector.any() else None


def rank(snapshot: Snapshot, plan: Plan, threshold: float = DEFAULT_THRESHOLD) -> Ranking:
    """Find the candidates, order them and cut to the plan's limit; run the selector. A task
    with words and a vector is searched as asked, then again with its vector moved toward
    what that search found first (:mod:`membrane_es.queries.feedback`), where the vectors
    it searches are few enough to be scored exactly (:func:`_fed_back`)."""
    if not _fed_back(snapshot, plan):
        return _rank_tasks(snapshot, plan, threshold)
    limit = 0 if not plan.limit else max(plan.limit, feedback.RECORDS)
    # The second search differs from the first only in its vector: who may see what, the
    # words matched and what can be selected are the first's.
    shared: _Shared = {}
    first = _rank_tasks(snapshot, replace(plan, limit=limit, explain=False), threshold, shared)
    assert plan.query_vector is not None
    widening = _widened(snapshot, plan.query_vector, first)
    if widening is None:
        # Searched once after all: the first search is the answer when it was this one.
        same = limit == plan.limit and not plan.explain
        return first if same else _rank_tasks(snapshot, plan, threshold, shared)
    moved, toward = widening
    widened = replace(plan, query_vector=moved, asked_vector=plan.query_vector)
    ranking = _rank_tasks(snapshot, widened, threshold, shared)
    # The selector scores how well each competence or plan fits the task as asked.
    return replace(
        ranking, selectable=first.selectable, selection=first.selection, searched_toward=toward
    )


def _fed_back(snapshot: Snapshot, plan: Plan) -> bool:
    """Whether the read searches twice: a task with words and a vector, read exactly (asked
    to, or over vectors few enough). Past that the read shortlists by sign codes, and a
    second pass would double the cost that the shortlist exists to keep low."""
    if not plan.descriptor.strip() or not _has_vector(snapshot, plan):
        return False
    index, scopes = snapshot.views.embeddings, _vector_scopes(snapshot, plan)
    return plan.exact or not vectors.approximate(index, scopes, snapshot.size, plan.limit)


# What a task's candidates are scored by apart from its vector, by descriptor: kept for
# the length of one read, whose searches share its trust and filters.
_Shared = dict[str, tuple[Candidates, Array | None, Array]]


def _rank_tasks(
    snapshot: Snapshot, plan: Plan, threshold: float, shared: _Shared | None = None
) -> Ranking:
    """The ranking for one query vector. For a task relating two things, the task's ranking
    and each thing's, taken in turn. ``shared``: the candidates, word matches and
    selectable records of searches already made in this read, reused and added to."""
    ranking = _rank_task(snapshot, plan, threshold, shared)
    if not plan.things:
        return ranking
    each = [
        _rank_task(snapshot, replace(thing, evidence_only=plan.evidence_only), threshold, shared)
        for thing in plan.things
    ]
    return in_turn(ranking, each, plan.limit)


def _widened(snapshot: Snapshot, query: Array, first: Ranking) -> tuple[Array, Array] | None:
    """The query moved toward the best records of ``first`` that the task gave evidence
    for and that have a vector, and those records' rows; None when there are none."""
    if first.scores is None:
        return None
    best = slice(0, feedback.SEARCHED)
    rows = first.ranked.rows[best][first.scores[best] > 0]
    found = snapshot.views.embeddings.vectors_of(rows, snapshot.table.content["scope"][rows])
    return feedback.toward(query, rows, found)


def _rank_task(
    snapshot: Snapshot, plan: Plan, threshold: float, shared: _Shared | None = None
) -> Ranking:
    """One task's ranking (see :func:`rank`)."""
    found = _shortlist(snapshot, plan)
    if found is not None:
        ranking = _rank_by_evidence(snapshot, plan, threshold, found)
        if ranking is not None:
            return ranking
    return _rank_every_candidate(snapshot, plan, threshold, found, shared)


def _shortlist(snapshot: Snapshot, plan: Plan) -> vectors.Shortlist | None:
    """The rows whose vectors the read scores, when it shortlists them; None when it scores
    every vector (or has none to score)."""
    if plan.exact or not _has_vector(snapshot, plan):
        return None
    assert plan.query_vector is not None
    index, scopes = snapshot.views.embeddings, _vector_scopes(snapshot, plan)
    if plan.limit > 0:
        found = _approximately(snapshot, plan, scopes)
        if found is not None:
            return found
    if not vectors.approximate(index, scopes, snapshot.size, plan.limit):
        return None
    admitted = partial(_admitted, snapshot, plan)
    scope_of = snapshot.table.content["scope"]
    scan = index.scan_codes(plan.query_vector, scopes, snapshot.size)
    return vectors.nearest(index, plan.query_vector, scan, admitted, plan.limit, scope_of)


def _approximately(
    snapshot: Snapshot, plan: Plan, scopes: list[int] | None
) -> vectors.Shortlist | None:
    """The shortlist from the approximate index, for a read over most of a store that keeps
    one and that it can vouch for; else None."""
    index, size = snapshot.views.embeddings, snapshot.size
    approximate = index.approximate_index()
    # A read as of a moment before the index was trained is read as it was then.
    if approximate is None or size < approximate.trained_below:
        return None
    if scopes is not None:
        searched = sum(count for _, _, count in index.chosen(scopes, size, codes=True))
        if searched < vectors.APPROXIMATE_SHARE * len(index):
            return None
    assert plan.query_vector is not None
    return vectors.approximate_nearest(
        index,
        approximate,
        plan.query_vector,
        size,
        partial(_admitted_in, snapshot, plan, scopes),
        plan.limit,
        snapshot.table.content["scope"],
    )


def _admitted_in(snapshot: Snapshot, plan: Plan, scopes: list[int] | None, rows: Array) -> Array:
    """Mask of ``rows`` that pass every filter of the read and lie in its blocks."""
    mask = _admitted(snapshot, plan, rows)
    if scopes is not None:
        mask &= np.isin(snapshot.table.content["scope"][rows], scopes)
    return mask


def _admitted(snapshot: Snapshot, plan: Plan, rows: Array) -> Array:
    """Mask of ``rows`` (in any order) that pass every filter of the read."""
    ascending = np.argsort(rows, kind="stable")
    kept = admit(snapshot, rows[ascending], plan.trust, plan.filters).rows
    mask = np.zeros(len(rows), dtype=bool)
    mask[ascending] = vectors.held(kept, rows[ascending])
    return mask


def _rank_every_candidate(
    snapshot: Snapshot,
    plan: Plan,
    threshold: float,
    shortlisted: vectors.Shortlist | None,
    shared: _Shared | None = None,
) -> Ranking:
    """Admit every row the trust lets the caller see, score each, and order them
    (``shortlisted``: the rows whose vectors are scored, when the read shortlists;
    ``shared``: see :func:`_rank_tasks`)."""
    if shared is not None and plan.descriptor in shared:
        found, lexical, selectable = shared[plan.descriptor]
    else:
        found = find(snapshot, plan.trust, plan.filters)
        lexical = _lexical(snapshot, plan, found)
        selectable = _selectable(snapshot, found.rows)
        if shared is not None:
            shared[plan.descriptor] = found, lexical, selectable
    similarity = None
    if _has_vector(snapshot, plan):
        assert plan.query_vector is not None
        index = snapshot.views.embeddings
        if shortlisted is None:
            scopes = _vector_scopes(snapshot, plan)
            similarity = vectors.exact_similarity(
                index, plan.query_vector, scopes, snapshot.size, found.rows
            )
        else:
            scope_of = snapshot.table.content["scope"]
            also = _also_scored(found.rows, lexical, selectable)
            similarity = vectors.scored(
                index, plan.query_vector, shortlisted, found.rows, also, scope_of
            )
    return _ranked(snapshot, plan, found, lexical, similarity, selectable, threshold)


def _rank_by_evidence(
    snapshot: Snapshot, plan: Plan, threshold: float, shortlisted: vectors.Shortlist
) -> Ranking | None:
    """The same ranking as :func:`_rank_every_candidate` for a read that shortlists its
    vectors, from the rows with evidence alone; None when it cannot be sure of that.

    Only shortlisted rows, rows sharing a word with the descriptor, rows that happened in a
    period it names and selectable rows have any relevance; every other candidate scores 0.
    So when the last of the top ``limit`` among the rows with evidence scores more than
    that, no other candidate could have displaced it, and the rest — often almost the whole
    store — need not be admitted or given a salience at all."""
    assert plan.query_vector is not None
    index, size, table = snapshot.views.embeddings, snapshot.size, snapshot.table
    within = universe(snapshot, plan.trust)
    matched = None
    if plan.descriptor.strip():
        matched = matches(snapshot.views.text, plan.descriptor, size, within)
    types = table.content["type"]
    if within is None:
        selectable_rows = table.rows_of_types(type_codes(SELECTABLE), size)
    else:
        selectable_rows = within[np.isin(types[within], type_codes(SELECTABLE))]
    rows = np.union1d(shortlisted.rows, selectable_rows)
    # Long texts whose best passage is near the task, though their own vector may not be.
    near = snapshot.views.passages.nearest(plan.query_vector, size, max(plan.limit, 1))
    rows = np.union1d(rows, near if within is None else np.intersect1d(near, within))
    if matched is not None:
        rows = np.union1d(rows, matched[0])
    if plan.descriptor.strip():
        named = snapshot.views.speakers.named_in(plan.descriptor)
        named = named[named < size]
        rows = np.union1d(rows, named if within is None else np.intersect1d(named, within))
    periods = named_periods(plan.descriptor, snapshot.moment)
    if periods:
        created = table.content["created_at"]
        if within is None:
            rows = np.union1d(rows, np.flatnonzero(periods.contain(created[:size])))
        else:
            rows = np.union1d(rows, within[periods.contain(created[within])])
    found = admit(snapshot, rows, plan.trust, plan.filters)
    lexical = None
    if matched is not None:
        lexical = vectors.aligned(matched[0], matched[1], found.rows, size)
        lexical = np.nan_to_num(lexical, nan=0.0)
    selectable = _selectable(snapshot, found.rows)
    also = _also_scored(found.rows, lexical, selectable)
    similarity = vectors.scored(
        index, plan.query_vector, shortlisted, found.rows, also, table.content["scope"]
    )
    ranking = _ranked(snapshot, plan, found, lexical, similarity, selectable, threshold)
    if not ranking.by_evidence or ranking.scores is None or len(ranking.ranked) < plan.limit:
        # (with no evidence among these rows, every candidate is ordered by salience)
        return None
    if not len(ranking.scores) or ranking.scores[-1] <= 0.0:
        return None
    return ranking


def _some_evidence(
    similarity: Array | None,
    lexical: Array | None,
    timing: Array | None,
    spoken: Array | None,
) -> Array | None:
    """Which candidates the task gives any evidence for, read from the raw signals (a
    relative score puts the least similar at 0 though its vector points the task's way)."""
    shown = None
    for signal in (similarity, lexical, timing, spoken):
        if signal is not None:
            positive = np.nan_to_num(signal, nan=0.0) > 0.0
            shown = positive if shown is None else shown | positive
    return shown


def _ranked(
    snapshot: Snapshot,
    plan: Plan,
    found: Candidates,
    lexical: Array | None,
    similarity: Array | None,
    selectable: Array,
    threshold: float,
) -> Ranking:
    """Order the candidates by their evidence and salience, cut to the limit; select."""
    table = snapshot.table
    created = table.content["created_at"][found.rows]

    def id_of(i: int) -> str:
        return table.ids[int(found.rows[i])]

    passage, own_similarity = None, similarity  # the selector reads records' own vectors
    if similarity is not None and plan.query_vector is not None:
        # A long text is as close to the task as its closest passage.
        similarity, passage = with_passages(
            snapshot.views.passages, plan.query_vector, found.rows, similarity, snapshot.size
        )

    hidden = found.redacted.any()
    if hidden:
        # A record returned redacted shows the caller none of its content: its words and
        # its meaning are no evidence that it answers the task, and ranking by them would
        # leak them (nor may its vector set the scale other records' similarity is read on).
        lexical = None if lexical is None else np.where(found.redacted, 0.0, lexical)
        similarity = None if similarity is None else np.where(found.redacted, np.nan, similarity)
    periods = named_periods(plan.descriptor, snapshot.moment)
    timing = periods.contain(created).astype(np.float64) if periods else None
    spoken = _said_by_named(snapshot, plan, found)
    dated = (
        says_when(snapshot.views.text, found.rows, snapshot.size)
        if plan.descriptor.strip() and asks_when(plan.descriptor)
        else None
    )
    if hidden and dated is not None:
        dated = np.where(found.redacted, 0.0, dated)
    evidence = relevance(similarity, lexical, timing, spoken, dated)
    primary = found.salience if evidence is None else blend(evidence, found.salience)
    if hidden and evidence is not None:
        primary = redacted_last(primary, found.redacted)
    picks = order(primary, found.salience, created, id_of, plan.limit)
    if plan.evidence_only:
        # Records with evidence rank above every one without, so the cut keeps the best.
        shown = _some_evidence(similarity, lexical, timing, spoken)
        picks = picks[:0] if shown is None else picks[shown[picks]]
    chosen, selection = _select(snapshot, found, own_similarity, selectable, threshold)
    kept = None
    if plan.explain:
        kept = Evidence(
            similarity=None
            if similarity is None
            else _similarity_asked(snapshot, plan, found.rows[picks], similarity[picks]),
            vector=None if similarity is None else relative(similarity)[picks],
            lexical=None if lexical is None else lexical_evidence(lexical)[picks],
            relevance=None if evidence is None else evidence[picks],
            score=primary[picks],
            timing=None if timing is None else timing[picks],
            passage=None if passage is None else passage[picks],
            speaker=None if spoken is None else spoken[picks],
        )
    return Ranking(
        found.take(picks),
        chosen,
        selection,
        primary[picks],
        kept,
        None if passage is None else passage[picks],
        by_evidence=evidence is not None,
    )


def _similarity_asked(snapshot: Snapshot, plan: Plan, rows: Array, used: Array) -> Array:
    """The similarity of ``rows`` to the task's own vector (a long text's by its closest
    passage, as ranked), when the ranking used one moved by feedback; else ``used``."""
    asked = plan.asked_vector
    if asked is None:
        return used
    scopes = snapshot.table.content["scope"][rows]
    own = snapshot.views.embeddings.vectors_of(rows, scopes) @ np.asarray(asked, np.float32)
    own = own.astype(np.float64)  # NaN where a record has no vector
    similarity, _ = with_passages(snapshot.views.passages, asked, rows, own, snapshot.size)
    return similarity


def _said_by_named(snapshot: Snapshot, plan: Plan, found: Candidates) -> Array | None:
    """1 for each candidate said by a participant the descriptor names, else 0 (a record
    returned redacted shows no one who said it); None when it names none."""
    if not plan.descriptor.strip() or not len(snapshot.views.speakers):
        return None
    named = snapshot.views.speakers.named_in(plan.descriptor)
    if not len(named):
        return None
    spoken: Array = np.isin(found.rows, named) & ~found.redacted
    return spoken.astype(np.float64)


def _has_vector(snapshot: Snapshot, plan: Plan) -> bool:
    index = snapshot.views.embeddings
    vector = plan.query_vector
    return vector is not None and bool(index.dimensions) and len(vector) == index.dimensions


def _vector_scopes(snapshot: Snapshot, plan: Plan) -> list[int] | None:
    """The embedding blocks a read searches: the trust's scopes and the unscoped, or all."""
    if not plan.trust.scopes:
        return None
    table = snapshot.table
    return [0, *(table.scope_ids[s] for s in plan.trust.scopes if s in table.scope_ids)]


def _selectable(snapshot: Snapshot, rows: Array) -> Array:
    """Mask of ``rows`` the multi-solution selector scores (competence and plan_graph)."""
    mask: Array = np.isin(snapshot.table.content["type"][rows], type_codes(SELECTABLE))
    return mask


def _also_scored(rows: Array, lexical: Array | None, selectable: Array) -> Array:
    """Candidates (of ``rows``) whose similarity a ranking needs even when their vector is
    not among the query's nearest: every selectable one (the selector scores them all), and
    the best lexical matches, ties by row (their blend could still place them)."""
    wanted = rows[selectable]
    if lexical is not None:
        matching = np.flatnonzero(lexical > 0)
        if len(matching) > LEXICAL_SCORED:
            best = np.lexsort((rows[matching], -lexical[matching]))[:LEXICAL_SCORED]
            matching = matching[best]
        wanted = np.union1d(wanted, rows[matching])
    return wanted


def _lexical(snapshot: Snapshot, plan: Plan, found: Candidates) -> Array | None:
    """Lexical coverage of the descriptor by each candidate, as of the snapshot."""
    if not plan.descriptor.strip() or not len(found):
        return None
    return coverage(snapshot.views.text, plan.descriptor, snapshot.size, found.rows)


def _select(
    snapshot: Snapshot,
    found: Candidates,
    similarity: Array | None,
    selectable: Array,
    threshold: float,
) -> tuple[Candidates | None, Selection | None]:
    """The selector over every competence and plan_graph candidate (None if there are none)."""
    content, state = snapshot.table.content, snapshot.state.columns
    picks = np.flatnonzero(selectable)
    if not len(picks):
        return None, None
    chosen = found.take(picks)
    rows = chosen.rows
    composite = scores(
        applicability(
            content["confidence"][rows].astype(np.float64),
            None if similarity is None else similarity[picks],
        ),
        success_rate(content["success"][rows].astype(np.float64)),
        recency(state["last_reinforced"][rows], snapshot.at),
        chosen.redacted,
    )
    table = snapshot.table

    def id_of(i: int) -> str:
        return table.ids[int(rows[i])]

    created = content["created_at"][rows]
    return chosen, select(composite, chosen.salience, created, id_of, threshold)


def selection_result(ranking: Ranking, hydrator: Hydrator) -> SelectionResult | None:
    """The selector's verdict with its records hydrated (redacted where the caller's trust
    asks)."""
    chosen, selection = ranking.selectable, ranking.selection
    if chosen is None or selection is None:
        return None
    ids = hydrator.snapshot.table.ids
    pairs = zip(chosen.rows, selection.scores, strict=True)
    return SelectionResult(
        selected=[
            hydrator.visible(int(chosen.rows[i]), bool(chosen.redacted[i]))
            for i in selection.ranked
        ],
        confidence=float(selection.confidence),
        needs_more=bool(selection.needs_more),
        scores={ids[int(row)]: float(score) for row, score in pairs},
    )

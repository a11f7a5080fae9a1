"""Reading entries (seed 003): browse, ranked search, one entry, relations, the graph.

Browse (no ``q``): rows by ``updated_at`` descending; ``type`` and ``tag`` are hard filters.
Search (``q``): Okapi BM25 over title, content, tags and source weighted 10/4/8/2 (SQLite
FTS5, :mod:`membrane_es.projections.entries`); ``type`` and ``tag`` multiply the score by 1.3
and 1.2 instead of filtering; intent cue words in ``q`` boost types the same way when no
``type`` is given; ``decay`` multiplies by an age step; ``graduated`` fuses a
conversation-scoped pass (weight 1.5) and a tenant-wide pass (1.0) by reciprocal rank
(k = 60). ``expand`` and ``rerank`` go through a :class:`SearchAdvisor`; with none, or when
it fails, the search runs as if they were not asked and the result says why. ``explain``
adds, for each answer, the numbers that placed it
(:mod:`membrane_es.queries.entry_scores`).

``conversation_id`` always filters, to that conversation's rows and the unscoped ones, as
Arbiter does, whether or not the store has an entry in it yet (a new conversation: the
unscoped rows). Each tenant has a store of its own, so another tenant's conversation id
reads as one with no entries here and can reveal nothing of that tenant.

``as_of=T`` reads the entries whose validity window ``valid_from <= T < valid_to`` covers T
(``valid_to`` as known now: null while open), each in its revision current at T (an entry
backfilled after T: its first revision), with its ``valid_to``. Unless a backfill or an
invalidation's ``when`` rewrote a window afterwards, an answer given at T is therefore the
answer ``as_of=T`` gives forever after, but for ``valid_to``, which then tells when the
entry stopped being valid.

A *search* ``as_of=T`` matches exactly the entries found then (matching depends on an
entry's text alone), with the boosts and the age decay of then (age counts up to T), but
FTS5 computes BM25 with the index's statistics as they are now: the document count, the
average length and each term's document frequency count every revision recorded since T
too. The order can therefore differ from the answer given at T, and a ``limit`` smaller
than the matches can pick other ones of them; with ``limit`` at least the number of matches
the entries are the same. Past statistics would need FTS5's per-phrase hit counts, which
only a native auxiliary function can read, so this module does not recompute them. One case
keeps its order: one query word, held equally often (by field weight) by every match. Its
BM25 is idf × f(k₁+1) / (f + k₁(1 − b + b·|D|/avgdl)), the idf and f shared by all, so the
order is by length |D| alone (ties: the newer row), whatever the statistics.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from membrane_es.aggregates.identity import record_key
from membrane_es.projections.entries import SENSITIVITY_RANK, EntryIndex
from membrane_es.projections.folding import fold
from membrane_es.projections.tokens import STOP_WORDS
from membrane_es.queries.entry_scores import (
    RRF_K,
    EntryExplanation,
    Pass,
    Scored,
    Searched,
    explain,
)
from membrane_es.schema.entries import Entry, EntryRelation
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
FIELD_WEIGHTS = (10.0, 4.0, 8.0, 2.0)  # title, content, tags, source
TYPE_BOOST = 1.3
TAG_BOOST = 1.2
CONVERSATION_WEIGHT = 1.5
TENANT_WEIGHT = 1.0
PARAPHRASE_WEIGHT = 0.7
PARAPHRASES = 2
NEAR_DISTANCE = 8
RERANK_POOL = 30
FINE_RERANK_TOP = 8
FINE_EXCERPT_BYTES = 1500
DAY = 86_400
DECAY_HALF_LIFE_DAYS = 90
DECAY_FLOOR = 0.5

# A run of anything but spaces and ASCII punctuation: FTS5 reads each as the documents were
# read (a run with a non-ASCII mark in it, a Hindi vowel sign, stays one word).
_WORD = re.compile(r"[^\s!-/:-@\[-`{-~]+")
# Question cues → the entry types they suggest (seed 003, "intent").
INTENT_CUES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (
        ("favorite", "favourite", "prefer", "prefers", "preferred", "preference", "love",
         "loves", "like", "likes", "dislike", "hate", "enjoy"),
        ("user", "feedback"),
    ),
    (
        ("what is", "where is", "who is", "how many", "url", "address", "endpoint"),
        ("reference",),
    ),
    (("how to", "how do", "why is", "explain", "tutorial", "guide"), ("learning",)),
    (("when", "before", "after", "since", "first", "recent", "ago", "did"), ("project",)),
)  # fmt: skip
_CUE_PATTERNS = tuple(
    (re.compile(r"\b(?:" + "|".join(re.escape(cue) for cue in cues) + r")\b"), types)
    for cues, types in INTENT_CUES
)

_COLUMNS = (
    "r.row, r.entry, r.record_id, r.type, r.title, r.content, r.source, r.tags,"
    " r.conversation, r.artifact, r.valid_from, r.created_at, r.updated_at, r.valid_to"
)
_TAGS = msgspec.json.Decoder(list[str])
_SENSITIVITIES = list(Sensitivity)  # by rank, as the view stores them (SENSITIVITY_RANK)
_ROWS = msgspec.json.Encoder()


class EntryQuery(msgspec.Struct, kw_only=True, frozen=True):
    """The parameters of ``GET /v1/memory/entries``, already checked."""

    q: str = ""
    types: tuple[str, ...] = ()
    tag: str = ""
    conversation_id: int | None = None
    graduated: bool = False
    intent: bool = True
    as_of: int | None = None  # epoch seconds; None: now
    since: int | None = None
    before_updated_at: int | None = None
    limit: int = DEFAULT_LIMIT
    decay: bool = False
    expand: str = ""
    rerank: str = ""
    rerank_fine: str = ""
    explain: bool = False


class Expansion(msgspec.Struct, kw_only=True):
    model: str
    applied: bool
    queries: list[str]
    note: str = ""


class RerankReport(msgspec.Struct, kw_only=True):
    applied: bool
    model: str
    fine_model: str = ""
    fine_applied: bool = False
    stages: int = 0
    note: str = ""


class EntryPage(msgspec.Struct, kw_only=True):
    entries: list[Entry]
    expansion: Expansion | None = None
    rerank: RerankReport | None = None
    explain: list[EntryExplanation] | None = None  # a search with ``explain``: per entry


class RerankCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """One candidate as an advisor sees it: its line of metadata and its text."""

    entry_id: int
    label: str  # "type · YYYY-MM-DD · superseded" (the last part only when it is)
    title: str
    excerpt: str


class SearchAdvisor(Protocol):
    """Paraphrases queries and reorders candidates (a model, a service, a test double).

    Whatever it raises, or an answer that cannot be used, leaves the search as if it had not
    been asked: the response then says ``applied: false`` and why."""

    def paraphrase(self, model: str, query: str, count: int) -> list[str]:
        """Up to ``count`` other phrasings of ``query``."""
        ...

    def rerank(self, model: str, query: str, candidates: Sequence[RerankCandidate]) -> list[int]:
        """The candidates' positions (indices into ``candidates``), best first."""
        ...


# --- query text ---------------------------------------------------------------------------


def query_tokens(text: str) -> list[str]:
    """The distinct words of a query, folded as documents are
    (:func:`~membrane_es.projections.folding.fold`), stop words dropped (all of them kept
    when nothing else is left)."""
    words = list(dict.fromkeys(w for w in _WORD.findall(fold(text))))
    content = [w for w in words if w not in STOP_WORDS]
    return content or words


def match_expression(text: str) -> str:
    """The FTS5 query for ``text``: one word as itself; 2–6 words as the phrase OR the words
    near each other OR any of them; more as any of them ("" when there is no word)."""
    tokens = query_tokens(text)
    quoted = [f'"{t}"' for t in tokens]
    if len(tokens) <= 1:
        return "".join(quoted)
    any_token = " OR ".join(quoted)
    if len(tokens) > 6:
        return any_token
    phrase = '"' + " ".join(tokens) + '"'
    return f"{phrase} OR NEAR({' '.join(quoted)}, {NEAR_DISTANCE}) OR ({any_token})"


def intent_types(text: str) -> tuple[str, ...]:
    """The entry types the question's cue words suggest."""
    lowered = text.casefold()
    found: list[str] = []
    for pattern, types in _CUE_PATTERNS:
        if pattern.search(lowered):
            found.extend(types)
    return tuple(dict.fromkeys(found))


# --- filters ------------------------------------------------------------------------------


class _Where:
    def __init__(self) -> None:
        self.clauses: list[str] = []
        self.params: list[Any] = []

    def add(self, clause: str, *params: Any) -> None:
        self.clauses.append(clause)
        self.params.extend(params)

    @property
    def sql(self) -> str:
        return " AND ".join(self.clauses) or "1"


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


def _visible(
    where: _Where, as_of: int | None, trust: TrustContext | None, alias: str = "r"
) -> None:
    """Rows a reader may see: current (or current at ``as_of``), not deleted, within trust."""
    where.add(f"{alias}.hidden = 0")
    if as_of is not None:
        # The entry's validity window covers T, and this is its revision current at T (an
        # entry written after T with a valid_from before it, a backfill: its first one).
        where.add(
            f"{alias}.valid_from <= ? AND ({alias}.valid_to IS NULL OR {alias}.valid_to > ?)"
            f" AND (({alias}.recorded <= ?"
            f" AND ({alias}.end_kind IS NOT 'revised' OR {alias}.ended > ?))"
            f" OR ({alias}.first = 1 AND {alias}.recorded > ?))",
            as_of,
            as_of,
            as_of,
            as_of,
            as_of,
        )
    else:
        where.add(f"{alias}.end_kind IS NULL")
    _trusted(where, trust, alias)


def _trusted(where: _Where, trust: TrustContext | None, alias: str) -> None:
    """Rows within the reader's trust: sensitivity at most its level, scope one of its own
    (or none)."""
    if trust is None:
        return
    where.add(f"{alias}.sensitivity <= ?", SENSITIVITY_RANK[trust.max_sensitivity.value])
    if trust.scopes:
        scopes = trust.scopes
        where.add(f"({alias}.scope = '' OR {alias}.scope IN ({_marks(scopes)}))", *scopes)


def _filters(
    query: EntryQuery, trust: TrustContext | None, *, conversation: int | None, browse: bool
) -> _Where:
    where = _Where()
    _visible(where, query.as_of, trust)
    if conversation is not None:
        where.add("(r.conversation = ? OR r.conversation IS NULL)", conversation)
    if query.since is not None:
        where.add("r.created_at >= ?", query.since)
    if query.before_updated_at is not None:
        where.add("r.updated_at < ?", query.before_updated_at)
    if browse:
        if query.types:
            where.add(f"r.type IN ({_marks(query.types)})", *query.types)
        if query.tag:
            where.add("instr(r.tags, ?) > 0", query.tag)
    return where


# --- reading ------------------------------------------------------------------------------


def browse(
    index: EntryIndex, query: EntryQuery, trust: TrustContext | None, tenant: int | str
) -> list[Entry]:
    where = _filters(query, trust, conversation=query.conversation_id, browse=True)
    rows = index.db.execute(
        f"SELECT {_COLUMNS} FROM rev r WHERE {where.sql}"
        " ORDER BY r.updated_at DESC, r.row DESC LIMIT ?",
        (*where.params, query.limit),
    ).fetchall()
    return [_entry(row, tenant) for row in rows]


def _ranking(
    index: EntryIndex,
    text: str,
    query: EntryQuery,
    trust: TrustContext | None,
    conversation: int | None,
    now: int,
    depth: int,
) -> list[Scored]:
    """Rows matching ``text``, best first: BM25 × type, tag and intent boosts × age decay.

    FTS5 ranks its matches by BM25 alone fastest, so candidates are read that way, best
    first, and only they are filtered and boosted. A boost multiplies by at most ``most``,
    so a match outside the candidates (BM25 at most the last one's) scores at most ``most``
    × that: once the ``depth``-th boosted score beats it, no other match can place, and the
    answer is exact; otherwise more candidates are read. Ties go to the newer row."""
    match = match_expression(text)
    if not match:
        return []
    where = _filters(query, trust, conversation=conversation, browse=False)
    boosted = query.types or (intent_types(text) if query.intent else ())
    factors: list[str] = []  # each a column: Scored's boost, tag and decay (absent: 1.0)
    params: list[Any] = []
    most = 1.0
    boost, tag, decay = "1.0", "1.0", "1.0"
    if boosted:
        boost = f"(CASE WHEN r.type IN ({_marks(boosted)}) THEN {TYPE_BOOST} ELSE 1.0 END)"
        factors.append(boost)
        params.extend(boosted)
        most *= TYPE_BOOST
    if query.tag:
        tag = f"(CASE WHEN instr(r.tags, ?) > 0 THEN {TAG_BOOST} ELSE 1.0 END)"
        factors.append(tag)
        params.append(query.tag)
        most *= TAG_BOOST
    if query.decay:
        decay = _DECAY
        factors.append(decay)
        params.extend(_decay_params(now if query.as_of is None else query.as_of))
    weights = ", ".join(str(w) for w in FIELD_WEIGHTS)
    # Candidates come in the order (BM25, newest row first); with no factor that is the
    # answer's order, and the first ``depth`` that pass the filters are exact. Factors can lift
    # a candidate past others: read twice as deep to begin with, and check the bound.
    wanted = 2 * depth if factors else depth
    while True:
        candidates = index.db.execute(
            f"SELECT rowid, bm25(fts, {weights}) AS bm25 FROM fts WHERE fts MATCH ?"
            " ORDER BY bm25, rowid DESC LIMIT ?",
            (match, wanted),
        ).fetchall()
        raw = {row: -score for row, score in candidates}
        found = index.db.execute(
            # CROSS JOIN: from the candidates to their rows (never a scan of every row)
            f"SELECT r.row, {boost}, {tag}, {decay} FROM json_each(?) AS c CROSS JOIN rev r"
            f" ON r.row = c.value WHERE {where.sql}",
            (*params, _ROWS.encode(list(raw)).decode(), *where.params),
        ).fetchall()
        scored = sorted(
            (Scored(row, raw[row], *factor) for row, *factor in found),
            key=lambda s: (s.score, s.row),
            reverse=True,
        )
        if len(candidates) < wanted:  # every match was read
            break
        if len(scored) >= depth and (
            not factors or scored[depth - 1].score > most * -candidates[-1][1]
        ):
            break
        wanted *= 4
    return scored[:depth]


# Age steps since valid_from: ≤ 30 days 1.0, ≤ half-life 0.9, ≤ 2× 0.75, ≤ 4× 0.6, older floor.
_DECAY = (
    "(CASE WHEN ? - r.valid_from <= ? THEN 1.0 WHEN ? - r.valid_from <= ? THEN 0.9"
    " WHEN ? - r.valid_from <= ? THEN 0.75 WHEN ? - r.valid_from <= ? THEN 0.6 ELSE ? END)"
)


def _decay_params(now: int) -> list[Any]:
    half_life = DECAY_HALF_LIFE_DAYS * DAY
    return [now, 30 * DAY, now, half_life, now, 2 * half_life, now, 4 * half_life, DECAY_FLOOR]


def fuse(rankings: Sequence[tuple[float, Sequence[int]]], k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion: each item scores Σ weight / (k + rank) over the rankings it is
    in (rank 1 = first); ties go to the item found first."""
    scores: dict[int, float] = {}
    for weight, ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores, key=lambda item: (-scores[item], order[item]))


def _search_rows(
    index: EntryIndex,
    text: str,
    query: EntryQuery,
    trust: TrustContext | None,
    now: int,
    weight: float = 1.0,
) -> Searched:
    """One query's ranking: graduated (two passes fused) when asked and scoped."""
    depth = max(query.limit, RERANK_POOL if query.rerank or query.rerank_fine else 0)
    conversation = query.conversation_id
    if query.graduated and conversation is not None:
        scoped = _ranking(index, text, query, trust, conversation, now, depth)
        wide = _ranking(index, text, query, trust, None, now, depth)
        passes = [
            Pass(text, "conversation", CONVERSATION_WEIGHT, scoped),
            Pass(text, "tenant", TENANT_WEIGHT, wide),
        ]
        rows = fuse([(p.weight or 1.0, [s.row for s in p.scored]) for p in passes])
        return Searched(text, weight, rows, passes)
    scope = "tenant" if conversation is None else "conversation"
    ranked = _ranking(index, text, query, trust, conversation, now, depth)
    return Searched(text, weight, [s.row for s in ranked], [Pass(text, scope, None, ranked)])


def search(
    index: EntryIndex,
    query: EntryQuery,
    trust: TrustContext | None,
    tenant: int | str,
    now: int,
    advisor: SearchAdvisor | None = None,
) -> EntryPage:
    searched = [_search_rows(index, query.q, query, trust, now)]
    rows = searched[0].rows
    expansion: Expansion | None = None
    if query.expand:
        expansion = _expand(index, query, trust, now, advisor, rows)
        if expansion.applied:
            searched += [
                _search_rows(index, text, query, trust, now, PARAPHRASE_WEIGHT)
                for text in expansion.queries
            ]
            rows = fuse([(s.weight, s.rows) for s in searched])
    report: RerankReport | None = None
    if query.rerank or query.rerank_fine:
        rows, report = _rerank(index, query, rows, advisor)
    answer = rows[: query.limit]
    by_row = _rows(index, answer)
    entries = [_entry(by_row[row], tenant) for row in answer]
    explained = None
    if query.explain:
        explained = explain(
            answer,
            {row: int(by_row[row][1]) for row in answer},
            searched,
            typed=bool(query.types),
            decay=query.decay,
            expanded=expansion is not None and expansion.applied,
            reranked=report is not None and report.applied,
        )
    return EntryPage(entries=entries, expansion=expansion, rerank=report, explain=explained)


def _expand(
    index: EntryIndex,
    query: EntryQuery,
    trust: TrustContext | None,
    now: int,
    advisor: SearchAdvisor | None,
    rows: list[int],
) -> Expansion:
    if advisor is None:
        return Expansion(model=query.expand, applied=False, queries=[], note=NO_ADVISOR)
    try:
        answer = advisor.paraphrase(query.expand, query.q, PARAPHRASES)
    except Exception as error:  # the advisor's failure is benign by contract
        return Expansion(
            model=query.expand, applied=False, queries=[], note=f"advisor failed: {error}"
        )
    queries = [
        text.strip()
        for text in (answer if isinstance(answer, list) else [])
        if isinstance(text, str) and text.strip() and text.strip() != query.q
    ][:PARAPHRASES]
    if not queries:
        note = "advisor returned no usable paraphrases"
        return Expansion(model=query.expand, applied=False, queries=[], note=note)
    return Expansion(model=query.expand, applied=True, queries=queries)


NO_ADVISOR = "no search advisor is configured; the search ran on the original query"


def _rerank(
    index: EntryIndex, query: EntryQuery, rows: list[int], advisor: SearchAdvisor | None
) -> tuple[list[int], RerankReport]:
    model, fine = query.rerank or query.rerank_fine, query.rerank_fine
    report = RerankReport(applied=False, model=model, fine_model=fine)
    if advisor is None:
        report.note = NO_ADVISOR
        return rows, report
    pool = rows[:RERANK_POOL]
    details = _rows(index, pool)
    candidates = [_candidate(details[row], index) for row in pool]
    order = _advised_order(advisor, model, query.q, candidates)
    if order is None:
        report.note = "advisor failed or gave an unusable order; the ranking is unchanged"
        return rows, report
    pool = [pool[i] for i in order]
    report.applied, report.stages = True, 1
    if fine:
        top = pool[:FINE_RERANK_TOP]
        fine_candidates = [_candidate(details[row], index, FINE_EXCERPT_BYTES) for row in top]
        fine_order = _advised_order(advisor, fine, query.q, fine_candidates)
        if fine_order is None:
            report.note = "the fine advisor failed; the first stage's order is kept"
        else:
            pool = [top[i] for i in fine_order] + pool[FINE_RERANK_TOP:]
            report.fine_applied, report.stages = True, 2
    return pool + rows[RERANK_POOL:], report


def _advised_order(
    advisor: SearchAdvisor, model: str, text: str, candidates: list[RerankCandidate]
) -> list[int] | None:
    """The advisor's order as a permutation of every candidate (ones it left out keep their
    order after the ones it placed), or None when it failed or answered nonsense."""
    try:
        answer = advisor.rerank(model, text, candidates)
    except Exception:  # the advisor's failure is benign by contract
        return None
    if not isinstance(answer, list):
        return None
    placed = [i for i in dict.fromkeys(answer) if isinstance(i, int) and 0 <= i < len(candidates)]
    if not placed:
        return None
    return placed + [i for i in range(len(candidates)) if i not in set(placed)]


def _candidate(row: tuple[Any, ...], index: EntryIndex, excerpt: int = 300) -> RerankCandidate:
    day = datetime.fromtimestamp(row[10], UTC).strftime("%Y-%m-%d")
    superseded = index.db.execute(
        "SELECT 1 FROM rel WHERE relation = 'supersedes' AND target_record IN"
        " (SELECT record_key FROM rev WHERE entry = ?) LIMIT 1",
        (row[1],),
    ).fetchone()
    label = f"{row[3]} · {day}" + (" · superseded" if superseded else "")
    text = row[5].encode()[:excerpt].decode(errors="ignore")
    return RerankCandidate(entry_id=row[1], label=label, title=row[4], excerpt=text)


def _rows(index: EntryIndex, rows: Sequence[int]) -> dict[int, tuple[Any, ...]]:
    if not rows:
        return {}
    found = index.db.execute(
        f"SELECT {_COLUMNS} FROM rev r WHERE r.row IN ({_marks(rows)})", tuple(rows)
    ).fetchall()
    return {row[0]: row for row in found}


def _entry(row: tuple[Any, ...], tenant: int | str) -> Entry:
    return Entry(
        id=row[1],
        tenant_id=tenant,
        type=row[3],
        title=row[4],
        content=row[5],
        source=row[6],
        tags=_TAGS.decode(row[7]),
        artifact_id=row[9],
        conversation_id=row[8],
        valid_from=row[10],
        valid_to=row[13],  # null in active reads; as_of reads: when the validity ended
        created_at=row[11],
        updated_at=row[12],
        record_id=row[2],
    )


def list_entries(
    index: EntryIndex,
    query: EntryQuery,
    trust: TrustContext | None,
    tenant: int | str,
    now: int,
    advisor: SearchAdvisor | None = None,
) -> EntryPage:
    """``GET /v1/memory/entries``: browse without ``q``, ranked search with it."""
    if query.q.strip():
        return search(index, query, trust, tenant, now, advisor)
    return EntryPage(entries=browse(index, query, trust, tenant))


def current_revision(
    index: EntryIndex, entry_id: int, trust: TrustContext | None
) -> tuple[Any, ...] | None:
    """The entry's current revision row, if it is active and visible."""
    where = _Where()
    _visible(where, None, trust)
    return index.db.execute(
        f"SELECT {_COLUMNS}, r.record_key FROM rev r WHERE r.entry = ? AND {where.sql}",
        (entry_id, *where.params),
    ).fetchone()


def latest_revision(index: EntryIndex, entry_id: int, trust: TrustContext | None) -> str | None:
    """The record of the entry's latest revision (active or invalidated, not deleted)."""
    where = _Where()
    where.add("r.hidden = 0")
    _trusted(where, trust, "r")
    found = index.db.execute(
        f"SELECT r.record_id FROM rev r WHERE r.entry = ? AND {where.sql}"
        " ORDER BY r.row DESC LIMIT 1",
        (entry_id, *where.params),
    ).fetchone()
    return None if found is None else str(found[0])


def revision_reach(index: EntryIndex, entry_id: int, *, every: bool) -> list[tuple[str, str]]:
    """The (sensitivity, scope) of the entry's latest revision, or of every one (``every``):
    what a write to the entry touches, for a key's ceiling to allow or refuse."""
    found = index.db.execute(
        "SELECT sensitivity, scope FROM rev WHERE entry = ? AND hidden = 0 ORDER BY row DESC"
        + ("" if every else " LIMIT 1"),
        (entry_id,),
    ).fetchall()
    return [(_SENSITIVITIES[rank].value, str(scope)) for rank, scope in found]


def revision_records(index: EntryIndex, entry_id: int) -> list[str]:
    """The records of every revision of the entry, first first."""
    found = index.db.execute(
        "SELECT record_id FROM rev WHERE entry = ? ORDER BY row", (entry_id,)
    ).fetchall()
    return [str(record_id) for (record_id,) in found]


def entry_of_record(index: EntryIndex, record_id: str) -> int:
    (entry,) = index.db.execute(
        "SELECT entry FROM rev WHERE record_key = ?", (str(record_key(record_id)),)
    ).fetchone()
    return int(entry)


def get_entry(
    index: EntryIndex, entry_id: int, trust: TrustContext | None, tenant: int | str
) -> Entry | None:
    row = current_revision(index, entry_id, trust)
    return None if row is None else _entry(row, tenant)


# --- relations ----------------------------------------------------------------------------

_RELATIONS = (
    "SELECT min(l.id), s.entry, t.entry, l.relation, min(l.created_at)"
    " FROM rel l JOIN rev s ON s.record_key = l.source_record"
    " JOIN rev t ON t.record_key = l.target_record"
    " WHERE s.entry != t.entry AND s.hidden = 0 AND t.hidden = 0 AND {where}"
    " GROUP BY s.entry, t.entry, l.relation ORDER BY min(l.id) LIMIT ?"
)


def relations(
    index: EntryIndex,
    tenant: int | str,
    trust: TrustContext | None,
    *,
    source_id: int | None = None,
    target_id: int | None = None,
    relation: str = "",
    among: Sequence[int] | None = None,
    limit: int = 1000,
) -> list[EntryRelation]:
    """Relations between entries (by the entries of the records they join), oldest first,
    one per (source, target, relation); none to or from a deleted entry, or one the reader
    may not see."""
    where = _Where()
    _trusted(where, trust, "s")
    _trusted(where, trust, "t")
    if source_id is not None:
        where.add("s.entry = ?", source_id)
    if target_id is not None:
        where.add("t.entry = ?", target_id)
    if relation:
        where.add("l.relation = ?", relation)
    if among is not None:
        where.add(f"s.entry IN ({_marks(among)}) AND t.entry IN ({_marks(among)})", *among, *among)
    found = index.db.execute(_RELATIONS.format(where=where.sql), (*where.params, limit)).fetchall()
    return [
        EntryRelation(
            id=row[0],
            tenant_id=tenant,
            source_id=row[1],
            target_id=row[2],
            relation=row[3],
            created_at=row[4],
        )
        for row in found
    ]

"""Why an entries search ranked what it did (``explain=true``).

Each pass of a search scores its rows as BM25 (FTS5's, field weights 10/4/8/2, positive:
higher is better) times the boosts that apply (``type`` ×1.3, or the intent cue words' ×1.3
when no ``type`` is given; ``tag`` ×1.2) times the age decay step when ``decay`` is asked.
Graduated search fuses a conversation pass (weight 1.5) and a tenant-wide pass (1.0), and
query expansion fuses the original query (1.0) with each paraphrase (0.7), both by
reciprocal rank: each ranking adds ``weight / (60 + rank)``. An explanation gives, for one
answer, each of these numbers as the search computed them, so a client can see which factor
put it where; a rerank advisor may then reorder the answers (``reranked``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

RRF_K = 60


class Scored(NamedTuple):
    """One row of one pass: its BM25 and the factors that multiplied it."""

    row: int
    bm25: float
    boost: float = 1.0  # the type boost (or intent's, when no type was given)
    tag: float = 1.0
    decay: float = 1.0

    @property
    def score(self) -> float:
        # In the order SQLite multiplies the factors, so ties fall as they do there.
        return self.bm25 * (self.boost * self.tag * self.decay)


class Pass(NamedTuple):
    """One ranking of one query text: over the conversation (and unscoped entries) or the
    whole tenant, with its weight when graduated search fused it with another."""

    query: str
    scope: str
    weight: float | None
    scored: list[Scored]


class Searched(NamedTuple):
    """One query text's ranking (its passes fused, if graduated), and its weight when query
    expansion fused it with others."""

    query: str
    weight: float
    rows: list[int]
    passes: list[Pass]


class Boosts(msgspec.Struct, kw_only=True):
    type: float
    tag: float
    intent: float


class PassScore(msgspec.Struct, kw_only=True):
    """Where one pass placed the entry, and why."""

    query: str
    scope: str  # "conversation" (its conversation and unscoped entries) or "tenant"
    rank: int
    bm25: float
    score: float
    weight: float | None = None  # in the graduated fusion
    contribution: float | None = None  # weight / (60 + rank)


class QueryRank(msgspec.Struct, kw_only=True):
    """Where one query text (the original or a paraphrase) placed the entry."""

    query: str
    weight: float
    rank: int
    contribution: float


class EntryExplanation(msgspec.Struct, kw_only=True):
    """Why one entry of a search answer is where it is."""

    id: int
    rank: int  # its place in the answer (1 = first)
    bm25: float | None  # from the first pass that found it (the original query's, if any)
    boosts: Boosts | None
    decay: float | None  # the age step, when ``decay`` was asked
    score: float | None  # bm25 × boosts × decay
    passes: list[PassScore]
    queries: list[QueryRank]  # with query expansion
    rrf: float | None  # the fused score the answer was ordered by (None: no fusion)
    reranked: bool  # an advisor reordered the answer afterwards


def explain(
    rows: Sequence[int],
    entry_ids: dict[int, int],
    searched: Sequence[Searched],
    *,
    typed: bool,
    decay: bool,
    expanded: bool,
    reranked: bool,
) -> list[EntryExplanation]:
    """The explanation of each row of the answer ``rows`` (in order)."""
    ranks = [
        [(p, {s.row: (rank, s) for rank, s in enumerate(p.scored, start=1)}) for p in q.passes]
        for q in searched
    ]
    query_ranks = [{row: rank for rank, row in enumerate(q.rows, start=1)} for q in searched]
    explained = []
    for place, row in enumerate(rows, start=1):
        passes: list[PassScore] = []
        first: Scored | None = None
        graduated = 0.0
        for i, query_passes in enumerate(ranks):
            for ranked, placed in query_passes:
                if row not in placed:
                    continue
                rank, scored = placed[row]
                first = first or scored
                weight = ranked.weight
                share = None if weight is None else weight / (RRF_K + rank)
                if i == 0 and share is not None:
                    graduated += share
                passes.append(
                    PassScore(
                        query=ranked.query,
                        scope=ranked.scope,
                        rank=rank,
                        bm25=scored.bm25,
                        score=scored.score,
                        weight=weight,
                        contribution=share,
                    )
                )
        queries = []
        if expanded:
            for query, ranked_rows in zip(searched, query_ranks, strict=True):
                if row in ranked_rows:
                    rank = ranked_rows[row]
                    share = query.weight / (RRF_K + rank)
                    queries.append(QueryRank(query=query.query, weight=query.weight, rank=rank,
                                             contribution=share))  # fmt: skip
        fused_by_passes = any(p.weight is not None for p in passes)
        rrf = (
            sum(q.contribution for q in queries)
            if expanded
            else graduated
            if fused_by_passes
            else None
        )
        boosts = None
        if first is not None:
            boosts = Boosts(
                type=first.boost if typed else 1.0,
                tag=first.tag,
                intent=1.0 if typed else first.boost,
            )
        explained.append(
            EntryExplanation(
                id=entry_ids[row],
                rank=place,
                bm25=None if first is None else first.bm25,
                boosts=boosts,
                decay=first.decay if first is not None and decay else None,
                score=None if first is None else first.score,
                passes=passes,
                queries=queries,
                rrf=rrf,
                reranked=reranked,
            )
        )
    return explained

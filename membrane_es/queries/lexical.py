"""Lexical evidence: Okapi BM25 of a task descriptor against each record's search text.

Scored from the text index's raw statistics restricted to the records that existed at the
snapshot's moment (term occurrences, document lengths, document count), so a score read
``as_of`` T is the score a live read computed at T: documents written later change neither
the inverse document frequencies nor the average length. (FTS5's built-in ``bm25()`` uses
the statistics of the whole index, which is why it is not used here.)

The formula is the usual one with Lucene's non-negative IDF::

    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
    bm25(q, d)  = Σ_t∈q idf(t) · tf(t, d) · (K1 + 1) / (tf(t, d) + K1 · (1 − B + B · |d| / avgdl))

over the distinct stemmed content words of the descriptor.

:func:`coverage` turns it into a fraction: BM25 divided by the score of a record that holds
every known query word once at average length (Σ idf over the query words some record
holds) — "how much of what the task says, weighted by how telling each word is, this record
says". A record shorter than average, or repeating a word, can pass 1; it is not capped here,
so that order is kept (ranking bounds it: :func:`membrane_es.queries.ranking.lexical_evidence`).
Words no record holds are left out: task descriptors are natural language, and a word the
store has never seen tells nothing about which record fits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.text_index import TextIndex

Array = npt.NDArray[Any]

K1 = 1.2  # term-frequency saturation (the customary value, also FTS5's)
B = 0.75  # length normalisation (likewise)


def bm25(
    text: TextIndex, query: str, size: int, rows: Array | None = None
) -> tuple[Array, float] | None:
    """BM25 of every row below ``size`` — or of just ``rows`` (ascending, below ``size``), in
    their order — 0 where no query word occurs, and Σ idf over the query words some row below
    ``size`` holds; None when no row holds any (or there are no content words).

    The statistics are always those of every row below ``size``: ``rows`` only chooses whose
    scores are computed, so a scoped read pays for the postings in its rows, not for a score
    per record of the store."""
    return _bm25(text, text.postings_with_own(query, size), size, rows)


Postings = list[tuple[Array, Array, Array, Array]]  # TextIndex.postings_with_own


def _bm25(
    text: TextIndex, postings: Postings, size: int, rows: Array | None
) -> tuple[Array, float] | None:
    """:func:`bm25` from the query words' postings (with and without borrowed words).

    A turn counts the words of the turns it was said after
    (:mod:`membrane_es.projections.said_after`), but what it borrows can lift it up to the
    turn it borrowed from, never above: a reply is found by the question it answers, and the
    turn that says a thing keeps precedence over the replies that repeat its words. Its own
    words alone may still take it higher."""
    if not any(len(hits) for hits, _, _, _ in postings):
        return None
    documents, tokens = text.corpus(size)
    average = tokens / documents if documents else 1.0
    idfs = [
        float(np.log1p((documents - len(hits) + 0.5) / (len(hits) + 0.5))) if len(hits) else 0.0
        for hits, _, _, _ in postings
    ]
    ceiling = float(sum(idfs))
    merged = [(hits, counts) for hits, counts, _, _ in postings]
    scores = _scores(merged, idfs, average, size, rows, text.lengths)
    if len(text.said_after):
        # Only a row that scores can be capped (a cap is never below 0): the rows a query
        # word reaches, not every row of the store, are looked up among the replies.
        scored = np.flatnonzero(scores)
        targets = scored if rows is None else rows[scored]
        places, lenders = text.said_after.earlier_of(targets)
        if len(places):
            borrowers = np.unique(places)  # positions in targets, ascending
            own = [(hits, counts) for _, _, hits, counts in postings]
            alone = _scores(own, idfs, average, size, targets[borrowers], text.own_lengths)
            lender_rows, which = np.unique(lenders, return_inverse=True)
            lent = _scores(merged, idfs, average, size, lender_rows, text.lengths)[which]
            best_lender = np.full(len(targets), -np.inf)
            np.maximum.at(best_lender, places, lent)
            cap = np.maximum(alone, best_lender[borrowers])
            capped = scored[borrowers]
            scores[capped] = np.minimum(scores[capped], cap)
    return scores, ceiling


def _scores(
    postings: list[tuple[Array, Array]],
    idfs: list[float],
    average: float,
    size: int,
    rows: Array | None,
    lengths_of: Callable[[Array], Array],
) -> Array:
    """BM25 of every row below ``size`` (or of ``rows``, ascending) from these postings, each
    term's idf given, each document's length read by ``lengths_of``."""
    scores = np.zeros(size if rows is None else len(rows), dtype=np.float64)
    for (hits, counts), idf in zip(postings, idfs, strict=True):
        if not len(hits):
            continue
        places, found = hits, counts
        if rows is not None:
            places, keep = _positions(rows, hits)
            hits, found = hits[keep], counts[keep]
        lengths = np.maximum(lengths_of(hits), 0)
        norm = K1 * (1.0 - B + B * lengths / max(average, 1e-9))
        scores[places] += idf * found * (K1 + 1.0) / (found + norm)
    return scores


def _positions(rows: Array, hits: Array) -> tuple[Array, Array]:
    """(positions in ``rows`` of the ``hits`` it holds, mask of those hits); both ascending."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64), np.zeros(len(hits), dtype=bool)
    places = np.minimum(np.searchsorted(rows, hits), len(rows) - 1)
    keep = rows[places] == hits
    return places[keep], keep


def coverage(text: TextIndex, query: str, size: int, rows: Array | None = None) -> Array | None:
    """BM25 as a fraction of a full match (see above; ≥ 0), for every row below ``size``
    (or for ``rows``, as :func:`bm25`); None when no row holds a query word."""
    scored = bm25(text, query, size, rows)
    if scored is None:
        return None
    return _fraction(*scored)


def _fraction(scores: Array, ceiling: float) -> Array:
    """BM25 scores as fractions of a full match."""
    return scores / ceiling if ceiling > 0 else np.zeros_like(scores)


def matches(
    text: TextIndex, query: str, size: int, within: Array | None = None
) -> tuple[Array, Array] | None:
    """(rows, :func:`coverage`) of just the rows below ``size`` — and in ``within``
    (ascending), when given — that hold a query word, ascending; None when no row below
    ``size`` holds one. Every other row's coverage is 0."""
    postings = text.postings_with_own(query, size)
    hits = [rows for rows, _, _, _ in postings if len(rows)]
    if not hits:
        return None
    rows = np.unique(np.concatenate(hits))
    if within is not None:
        rows = rows[_positions(within, rows)[1]]
    scored = _bm25(text, postings, size, rows)
    assert scored is not None
    return rows, _fraction(*scored)

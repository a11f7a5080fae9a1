"""Vector evidence for a ranked read: each candidate's cosine similarity to the query vector.

A read that returns everything it finds (no limit), or searches fewer than
:data:`APPROXIMATE_MIN_ROWS` vectors, scores every vector of the scopes it may see: exact.

A read with a limit over more vectors finds its nearest ones in two steps, as vector
databases do: the Hamming distance between each row's sign code and the query's (a 32nd of
the bytes of a full scan; the distance tracks the angle) shortlists the admitted candidates
closest to the query — at least :data:`SHORTLIST_PER_RESULT` per result asked for, and a
1/:data:`SHORTLIST_SHARE` of the candidates — and only the shortlist, plus the candidates the
caller names (those with other evidence, whose blend needs their similarity), get an exact
score. Candidates outside both have no vector evidence, as records without a vector have none.
On the clustered benchmark corpus the records returned are 95–100 % of the exact answer's
(docs/benchmarks.md).

Either way the answer depends only on what the snapshot holds — its rows, their codes and
vectors, and which of them the query admits — and ties on distance are broken by row, so a
read ``as_of`` a moment returns what the same read returned then.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.embeddings import CODED_MIN_ROWS, CodeScan, EmbeddingIndex

Array = npt.NDArray[Any]

APPROXIMATE_MIN_ROWS = CODED_MIN_ROWS  # from here on the index keeps every row's code
SHORTLIST_PER_RESULT = 64  # exact scores for at least this many rows per result asked for
SHORTLIST_SHARE = 100  # ... and for at least this share (1/n) of the admitted candidates


def similarity(
    index: EmbeddingIndex,
    query: Array,
    scopes: list[int] | None,
    size: int,
    candidates: Array,
    *,
    limit: int = 0,
    scope_of: Array,
    also: Array | None = None,
) -> Array:
    """Cosine similarity of each candidate (``candidates``: ascending rows under ``size``,
    all in ``scopes`` — every scope when None) to ``query``; NaN where there is none.

    With ``limit`` > 0 over :data:`APPROXIMATE_MIN_ROWS` vectors or more, only the shortlist
    and the rows of ``also`` (a subset of the candidates) are scored; ``scope_of`` is the
    table's scope column."""
    counted = sum(count for _, _, count in index.chosen(scopes, size))
    if limit <= 0 or counted < APPROXIMATE_MIN_ROWS:
        rows, cosine = index.similarities(query, scopes, below=size)
        return aligned(rows, cosine, candidates, size)
    scan = index.scan_codes(query, scopes, size)
    picks = shortlist(scan, candidates, limit)
    if also is not None and len(also):
        places = scan.places(also, scope_of[also])
        picks = np.union1d(picks, places[places >= 0])
    cosine = index.scores_at(query, scan, picks)
    out = np.full(len(candidates), np.nan, dtype=np.float64)
    out[np.searchsorted(candidates, scan.rows[picks])] = cosine
    return out


def shortlist(scan: CodeScan, candidates: Array, limit: int) -> Array:
    """Places in ``scan`` of the candidates whose sign codes are nearest the query's: the
    ``wanted`` smallest (distance, row) among the admitted rows, one set whatever order the
    rows came in (ascending)."""
    wanted = max(SHORTLIST_PER_RESULT * limit, len(candidates) // SHORTLIST_SHARE)
    # Widen a distance cut-off until enough admitted rows fall under it (distances take
    # few values, so counting them is cheap), then break ties at the cut-off by row.
    cumulative = np.cumsum(np.bincount(scan.distances))
    cutoff = int(np.searchsorted(cumulative, wanted))
    while True:
        near = np.flatnonzero(scan.distances <= cutoff)
        near = near[_admitted(scan.rows[near], candidates)]
        if len(near) >= wanted or cutoff >= len(cumulative) - 1:
            break
        missing = wanted - len(near)
        cutoff = int(np.searchsorted(cumulative, cumulative[cutoff] + missing))
    if len(near) <= wanted:
        return near
    keys = (scan.distances[near].astype(np.int64) << 32) | scan.rows[near]
    return np.sort(near[np.argpartition(keys, wanted - 1)[:wanted]])


def _admitted(rows: Array, candidates: Array) -> Array:
    """Mask of ``rows`` that are among ``candidates`` (ascending)."""
    if not len(candidates):
        return np.zeros(len(rows), dtype=bool)
    places = np.minimum(np.searchsorted(candidates, rows), len(candidates) - 1)
    held: Array = candidates[places] == rows
    return held


def aligned(rows: Array, values: Array, wanted: Array, size: int) -> Array:
    """``values`` (of ``rows``) at each of the ``wanted`` rows (ascending); NaN where absent.

    Through a scratch array over every row when the rows cover much of the store (one
    scatter and one gather), else by binary search, so a scoped read stays proportional to
    its own rows."""
    if 4 * (len(rows) + len(wanted)) >= size:
        dense = np.full(size, np.nan, dtype=np.float64)
        dense[rows] = values
        picked: Array = dense[wanted]
        return picked
    out = np.full(len(wanted), np.nan, dtype=np.float64)
    if len(wanted) and len(rows):
        places = np.minimum(np.searchsorted(wanted, rows), len(wanted) - 1)
        hit = wanted[places] == rows
        out[places[hit]] = values[hit]
    return out

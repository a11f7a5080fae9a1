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
On the clustered benchmark corpus 96–97 % of the records returned are the exact answer's
(docs/benchmarks.md).

Either way the answer depends only on what the snapshot holds — its rows, their codes and
vectors, and which of them the query admits — and ties on distance are broken by row, so a
read ``as_of`` a moment returns what the same read returned then.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.embeddings import CODED_MIN_ROWS, CodeScan, EmbeddingIndex

Array = npt.NDArray[Any]

APPROXIMATE_MIN_ROWS = CODED_MIN_ROWS  # from here on the index keeps every row's code
SHORTLIST_PER_RESULT = 64  # exact scores for at least this many rows per result asked for
SHORTLIST_SHARE = 100  # ... and for at least this share (1/n) of the vectors searched

Admitted = Callable[[Array], Array]  # mask of the given rows (ascending) a query admits


def approximate(index: EmbeddingIndex, scopes: list[int] | None, size: int, limit: int) -> bool:
    """Whether a read with this limit over these scopes' rows under ``size`` shortlists."""
    if limit <= 0 or not index.coded:  # codes are kept before a store reaches the threshold
        return False
    return sum(count for _, _, count in index.chosen(scopes, size)) >= APPROXIMATE_MIN_ROWS


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
    scan: CodeScan | None = None,
) -> Array:
    """Cosine similarity of each candidate (``candidates``: every row under ``size`` in
    ``scopes`` — every scope when None — that the query admits, ascending) to ``query``;
    NaN where there is none.

    When :func:`approximate`, only the shortlist and the rows of ``also`` (a subset of the
    candidates) are scored; ``scope_of`` is the table's scope column; ``scan``, the read's
    code scan if it already made one."""
    if scan is None:
        if not approximate(index, scopes, size, limit):
            rows, cosine = index.similarities(query, scopes, below=size)
            return aligned(rows, cosine, candidates, size)
        scan = index.scan_codes(query, scopes, size)
    picks = shortlist(scan, partial(held, candidates), limit)
    return scored(index, query, scan, picks, candidates, also, scope_of)


def scored(
    index: EmbeddingIndex,
    query: Array,
    scan: CodeScan,
    picks: Array,
    candidates: Array,
    also: Array | None,
    scope_of: Array,
) -> Array:
    """Exact similarity of the shortlist (``picks``, places in ``scan``) and of the rows of
    ``also``, aligned to ``candidates`` (ascending, holding both); NaN elsewhere."""
    if also is not None and len(also):
        places = scan.places(also, scope_of[also])
        picks = np.union1d(picks, places[places >= 0])
    cosine = index.scores_at(query, scan, picks)
    out = np.full(len(candidates), np.nan, dtype=np.float64)
    out[np.searchsorted(candidates, scan.rows[picks])] = cosine
    return out


def shortlist(scan: CodeScan, admitted: Admitted, limit: int) -> Array:
    """Places in ``scan`` (ascending) of the admitted rows whose sign codes are nearest the
    query's: the ``wanted`` smallest (distance, row), one set whatever order rows came in."""
    wanted = max(SHORTLIST_PER_RESULT * limit, len(scan.rows) // SHORTLIST_SHARE)
    # Widen a distance cut-off until enough admitted rows fall under it (distances take
    # few values, so counting them is cheap), then break ties at the cut-off by row.
    cumulative = np.cumsum(np.bincount(scan.distances))
    cutoff = int(np.searchsorted(cumulative, wanted))
    while True:
        near = np.flatnonzero(scan.distances <= cutoff)
        near = near[admitted(scan.rows[near])]
        if len(near) >= wanted or cutoff >= len(cumulative) - 1:
            break
        missing = wanted - len(near)
        cutoff = int(np.searchsorted(cumulative, cumulative[cutoff] + missing))
    if len(near) <= wanted:
        return near
    keys = (scan.distances[near].astype(np.int64) << 32) | scan.rows[near]
    return np.sort(near[np.argpartition(keys, wanted - 1)[:wanted]])


def held(candidates: Array, rows: Array) -> Array:
    """Mask of ``rows`` that are among ``candidates`` (ascending)."""
    if not len(candidates):
        return np.zeros(len(rows), dtype=bool)
    places = np.minimum(np.searchsorted(candidates, rows), len(candidates) - 1)
    mask: Array = candidates[places] == rows
    return mask


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

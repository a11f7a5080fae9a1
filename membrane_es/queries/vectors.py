"""Vector evidence for a ranked read: each candidate's cosine similarity to the query vector.

A read that returns everything it finds (no limit), asks for ``exact``, or searches fewer
than :data:`APPROXIMATE_MIN_ROWS` vectors, scores every vector of the scopes it may see.

A read with a limit over more vectors finds its nearest ones in two steps, as vector
databases do: the Hamming distance between each row's sign code and the query's (a 32nd of
the bytes of a full scan; the distance tracks the angle) shortlists the admitted candidates
closest to the query — at least :data:`SHORTLIST_PER_RESULT` per result asked for, and a
1/:data:`SHORTLIST_SHARE` of the candidates — and only the shortlist, plus the candidates the
caller names (those with other evidence, whose blend needs their similarity), get an exact
score. Candidates outside both have no vector evidence, as records without a vector have none.

The shortlist is kept only when the codes vouch for it (:func:`nearest`). A sign bit differs
between two vectors at angle θ with probability θ/π (for directions spread evenly), so the
distance of a row as near the query as the ``limit``-th best shortlisted one is about
binomial; when the shortlist reaches :data:`VOUCH_SIGMAS` standard deviations beyond that
distance's mean, a row of the exact top ``limit`` is left out with a chance under 1 %. Where
it does not — vectors without clusters, whose nearest neighbours are barely nearer than the
rest — the shortlist is widened to that distance, and where that would score more than
1/:data:`WIDEN_SHARE` of the rows, the read scores every vector instead: exact.

Either way the answer depends only on what the snapshot holds — its rows, their codes and
vectors, and which of them the query admits — and ties on distance are broken by row, so a
read ``as_of`` a moment returns what the same read returned then.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.approximate import ApproximateIndex
from membrane_es.projections.embeddings import CODED_MIN_ROWS, CodeScan, EmbeddingIndex

Array = npt.NDArray[Any]

APPROXIMATE_MIN_ROWS = CODED_MIN_ROWS  # from here on the index keeps every row's code
SHORTLIST_PER_RESULT = 64  # exact scores for at least this many rows per result asked for
SHORTLIST_SHARE = 100  # ... and for at least this share (1/n) of the vectors searched
VOUCH_SIGMAS = 2.5  # a shortlist is kept when it reaches this far past a top row's distance
WIDEN_SHARE = 16  # a shortlist widened past 1/n of the rows searched gives way to exact scores
# The approximate index's candidates given exact scores: this many per result asked for, and
# at least MIN_CANDIDATES (8-bit codes order candidates almost as their vectors do: at
# 60,000 clustered vectors, 4 a result kept the same 99 % of the exact top 10 as 10 did);
# a search whose admitted candidates are too few is tried once more with this many times
# the candidates and lists.
CANDIDATES_PER_RESULT = 5
MIN_CANDIDATES = 32
FEW_ADMITTED_WIDEN = 8
# Lists a search scans first (nearest centroid first); more only where the candidates' exact
# scores cannot rule out nearer rows in the lists left out. At a million clustered vectors
# (1,024 lists) the candidates' scores called for 1 or 2 lists on every query measured, so
# the first scan is kept small: a query that needs more gets them on the second.
FIRST_PROBES = 4
# A search whose admitted candidates were too few scans at least this many lists next.
MIN_WIDENED_PROBES = 128
# An approximate index serves reads over at least this share of the store's vectors (a read
# of a few scopes' blocks is fast on its own, and would find few of the index's candidates
# admitted).
APPROXIMATE_SHARE = 0.5

Admitted = Callable[[Array], Array]  # mask of the given rows (ascending) a query admits


def approximate(index: EmbeddingIndex, scopes: list[int] | None, size: int, limit: int) -> bool:
    """Whether a read with this limit over these scopes' rows under ``size`` may shortlist."""
    if limit <= 0 or not index.coded:  # codes are kept before a store reaches the threshold
        return False
    chosen = index.chosen(scopes, size, codes=True)
    return sum(count for _, _, count in chosen) >= APPROXIMATE_MIN_ROWS


@dataclass(frozen=True)
class Shortlist:
    """The rows a read scores exactly (found by the sign codes or by the approximate index)
    and their exact similarities; ``more(rows)`` scores further rows (ascending) the same
    way: those of them the searched blocks hold, and their similarities."""

    rows: Array
    cosine: Array
    more: Callable[[Array], tuple[Array, Array]]


def coded_shortlist(
    index: EmbeddingIndex,
    query: Array,
    scan: CodeScan,
    picks: Array,
    cosine: Array,
    scope_of: Array,
) -> Shortlist:
    """A shortlist of the rows at ``picks`` in a pass over the sign codes."""

    def more(rows: Array) -> tuple[Array, Array]:
        places = scan.places(rows, scope_of[rows])
        extra = np.setdiff1d(places[places >= 0], picks)
        return scan.rows[extra], index.scores_at(query, scan, extra)

    return Shortlist(scan.rows[picks], cosine, more)


def approximate_nearest(
    index: EmbeddingIndex,
    approximate: ApproximateIndex,
    query: Array,
    below: int,
    admitted: Admitted,
    limit: int,
    scope_of: Array,
) -> Shortlist | None:
    """The admitted rows under ``below`` nearest the query, from the approximate index's
    candidates given exact similarities (module doc of
    :mod:`membrane_es.projections.approximate`); None when the admitted candidates are
    fewer than ``limit`` even from a wider search, or when the lists a search would have to
    scan to vouch for them are more than 1/:data:`WIDEN_SHARE` of all (the read then
    searches as it would without the index).

    Lists are scanned nearest centroid first: :data:`FIRST_PROBES` of them, then, if the
    candidates' exact scores say lists further out could hold nearer rows, those lists
    alone (the ones scanned already are not scanned again)."""
    wanted = max(CANDIDATES_PER_RESULT * limit, MIN_CANDIDATES)
    order, centroid_scores = approximate.lists_by_score(query)
    scanned, probes = 0, min(FIRST_PROBES, len(order))
    rows = np.zeros(0, dtype=np.int64)
    cosine = np.zeros(0, dtype=np.float32)
    for _ in range(3):  # the first scan, a wider one, and at most one more
        found = approximate.search_lists(query, order[scanned:probes], wanted, below)
        found = found[admitted(found)]
        scored = exact_of(index, query, found, scope_of)
        rows, cosine = np.concatenate([rows, found]), np.concatenate([cosine, scored])
        scanned = probes
        known = cosine[~np.isnan(cosine)]
        if len(known) >= limit:
            kth = float(np.partition(known, len(known) - limit)[len(known) - limit])
            needed = approximate.lists_reaching(order, centroid_scores, kth)
            if needed <= scanned:
                ascending = np.argsort(rows, kind="stable")
                more = partial(_more, index, query, scope_of)
                return Shortlist(rows[ascending], cosine[ascending], more)
            probes = needed  # lists left out could hold nearer rows: scan them too
        else:
            # Too few admitted: a wider search of the lists scanned so far, and of more.
            wanted = wanted * FEW_ADMITTED_WIDEN
            probes = max(scanned * FEW_ADMITTED_WIDEN, MIN_WIDENED_PROBES)
            scanned, rows, cosine = 0, rows[:0], cosine[:0]
        if probes * WIDEN_SHARE > len(order):
            return None
        probes = min(probes, len(order))
    return None


def exact_of(index: EmbeddingIndex, query: Array, rows: Array, scope_of: Array) -> Array:
    """Exact similarity of each of ``rows`` (ascending) to ``query``, computed as
    :meth:`~EmbeddingIndex.similarities` computes it; NaN where a row has no vector."""
    if not len(rows):
        return np.zeros(0, dtype=np.float32)
    found = index.vectors_at(rows, scope_of[rows])
    cosine: Array = np.einsum("ij,j->i", found, np.ascontiguousarray(query, dtype=np.float32))
    return cosine


def _more(index: EmbeddingIndex, query: Array, scope_of: Array, rows: Array) -> tuple[Array, Array]:
    cosine = exact_of(index, query, rows, scope_of)
    held = ~np.isnan(cosine)
    return rows[held], cosine[held]


def exact_similarity(
    index: EmbeddingIndex, query: Array, scopes: list[int] | None, size: int, candidates: Array
) -> Array:
    """Cosine similarity of each candidate (``candidates``: every row under ``size`` in
    ``scopes`` — every scope when None — that the query admits, ascending) to ``query``,
    from every vector; NaN where there is none."""
    rows, cosine = index.similarities(query, scopes, below=size)
    return aligned(rows, cosine, candidates, size)


def nearest(
    index: EmbeddingIndex,
    query: Array,
    scan: CodeScan,
    admitted: Admitted,
    limit: int,
    scope_of: Array,
) -> Shortlist | None:
    """The admitted rows nearest the query by their codes, with exact similarities; None
    when the codes cannot vouch for a shortlist of a size worth scoring (the read is then
    exact; see the module doc)."""
    picks = shortlist(scan, admitted, limit)
    cosine = index.scores_at(query, scan, picks)
    if len(picks) < _wanted(scan, limit):  # every admitted row: nothing left out
        return coded_shortlist(index, query, scan, picks, cosine, scope_of)
    kth = float(np.partition(cosine, len(cosine) - limit)[len(cosine) - limit])
    reach = plausible_distance(kth, index.dimensions)
    # Every admitted row nearer than the farthest pick is a pick (ties at it may not be).
    if reach < int(scan.distances[picks].max()):
        return coded_shortlist(index, query, scan, picks, cosine, scope_of)
    widened = np.flatnonzero(scan.distances <= reach)
    if len(widened) * WIDEN_SHARE > len(scan.rows):
        return None
    widened = widened[admitted(scan.rows[widened])]
    cosine = index.scores_at(query, scan, widened)
    return coded_shortlist(index, query, scan, widened, cosine, scope_of)


def plausible_distance(cosine: float, bits: int) -> int:
    """The largest code distance (of ``bits`` sign bits) that a vector at this cosine from
    the query plausibly has: :data:`VOUCH_SIGMAS` standard deviations past the mean."""
    share = math.acos(min(1.0, max(-1.0, cosine))) / math.pi  # of bits that differ
    return math.floor(bits * share + VOUCH_SIGMAS * math.sqrt(bits * share * (1 - share)))


def scored(
    index: EmbeddingIndex,
    query: Array,
    found: Shortlist,
    candidates: Array,
    also: Array | None,
    scope_of: Array,
) -> Array:
    """Exact similarity of the shortlist and of the rows of ``also``, aligned to
    ``candidates`` (ascending, holding both); NaN elsewhere."""
    rows, cosine = found.rows, found.cosine
    if also is not None and len(also):
        extra_rows, extra = found.more(np.setdiff1d(also, rows))
        if len(extra_rows):
            rows = np.concatenate([rows, extra_rows])
            cosine = np.concatenate([cosine, extra])
    out = np.full(len(candidates), np.nan, dtype=np.float64)
    out[np.searchsorted(candidates, rows)] = cosine
    return out


def shortlist(scan: CodeScan, admitted: Admitted, limit: int) -> Array:
    """Places in ``scan`` (ascending) of the admitted rows whose sign codes are nearest the
    query's: the ``wanted`` smallest (distance, row), one set whatever order rows came in."""
    wanted = _wanted(scan, limit)
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


def _wanted(scan: CodeScan, limit: int) -> int:
    return max(SHORTLIST_PER_RESULT * limit, len(scan.rows) // SHORTLIST_SHARE)


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

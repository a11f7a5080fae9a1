"""Which conversation turn was said after which: the text index's links between documents.

A captured conversation turn names the turns it was said after
(:mod:`membrane_es.schema.conversation`). The text index
(:class:`~membrane_es.projections.text_index.TextIndex`) searches the turn as if its document
went on with theirs: a query word in an earlier turn counts for the reply too, and the
reply's length includes theirs, both at :data:`WEIGHT` — and at most as much of them as the
reply says itself (:func:`share`). What a reply borrows lifts it up to the turn it borrowed
from, never above (:func:`membrane_es.queries.lexical.bm25`): the turn that says a thing keeps
precedence over the replies that repeat its words.
Nothing is copied: each word lives in one document, so erasing a turn takes it out of every
reply's search at once, and an answer ``as_of`` a moment counts only the replies that existed
then.

The links are pairs of table rows ``(turn, earlier)``, appended in row order of ``turn``
(rows are given in log order, and a turn's links are noted when it is created), with
``earlier < turn`` always. Looking up the replies to a set of rows uses a copy sorted by
``earlier``, made again only when the pairs added since outgrow a fraction of it; the few
newer pairs are scanned directly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]

WEIGHT = 0.5
"""How much a word of an earlier turn counts for a reply, against 1 for the reply's own words
(a field weight, as BM25F gives one per field: occurrences and length alike). Below 1, so a
turn that says a thing itself ranks above the turns that answer it; the exact value is a
choice on that principle, not fitted to any question set."""


def share(own: Array, earlier: Array) -> Array:
    """How much of an earlier turn's words a turn borrows, beside :data:`WEIGHT`: all of them
    when it is at least as long, else in proportion to its own length (token counts; a turn
    without a document borrows nothing). A short reply to a short question takes the
    question's words whole; a short message after a long one takes no more of its words than
    it says itself, so the neighbour's words cannot outweigh its own, nor its length bury the
    message under BM25's length normalisation."""
    own = np.maximum(np.asarray(own, dtype=np.float64), 0.0)
    earlier = np.asarray(earlier, dtype=np.float64)
    return np.where(earlier > own, own / np.maximum(earlier, 1.0), 1.0) * (own > 0)


_TAIL_FRACTION = 8  # pairs added since the sorted copy, at most 1/8 of it (or _TAIL_MIN)
_TAIL_MIN = 4096


class SaidAfter:
    """The ``(turn, earlier)`` row pairs of a text index.

    Searches read it without a lock while a write may add or remove pairs: the pairs are one
    value, ``(turns, earlier rows, count)``, replaced whole by a write (appends go past the
    count a reader holds, so its pairs never change under it), and the sorted copy notes the
    array it was made from, so it is never used with another."""

    def __init__(self) -> None:
        empty = np.zeros(0, dtype=np.int64)
        self._pairs: tuple[Array, Array, int] = (empty, empty, 0)
        # The array of earlier rows it sorts, the positions of its first ``count`` pairs
        # ordered by earlier row, and ``count``.
        self._sorted: tuple[Array, Array, int] = (empty, empty, 0)

    def __len__(self) -> int:
        return self._pairs[2]

    def add(self, links: list[tuple[int, list[int]]]) -> None:
        """Note each ``(turn, [earlier rows])``; turns ascending, after every noted one."""
        pairs = [(turn, row) for turn, rows in links for row in rows if row < turn]
        if not pairs:
            return
        turn, earlier, size = self._pairs
        grown = size + len(pairs)
        if grown > len(turn):
            capacity = max(2 * len(turn), grown, 1024)
            turn, earlier = np.resize(turn, capacity), np.resize(earlier, capacity)
        turn[size:grown], earlier[size:grown] = zip(*pairs, strict=True)
        self._pairs = (turn, earlier, grown)

    def remove(self, rows: list[int]) -> None:
        """Forget every pair with a turn or an earlier turn among ``rows`` (erasure)."""
        turn, earlier = self.pairs()
        gone = np.isin(turn, rows) | np.isin(earlier, rows)
        if gone.any():
            self.load(turn[~gone], earlier[~gone])

    def pairs(self) -> tuple[Array, Array]:
        """(turns, earlier rows), in the order noted (a copy)."""
        turn, earlier, size = self._pairs
        return turn[:size].copy(), earlier[:size].copy()

    def load(self, turn: Array, earlier: Array) -> None:
        """Replace every pair (as :meth:`pairs` gave them)."""
        turn = np.asarray(turn, dtype=np.int64).copy()
        self._pairs = (turn, np.asarray(earlier, dtype=np.int64).copy(), len(turn))

    def replies(self, rows: Array) -> tuple[Array, Array]:
        """(turn, position in ``rows``) of every pair whose earlier row is in ``rows``
        (ascending, unique)."""
        turn, earlier, size = self._pairs
        if not size or not len(rows):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        order, count = self._sorted_copy(earlier, size)
        ranked = earlier[order]
        low = np.searchsorted(ranked, rows, side="left")
        counts = np.searchsorted(ranked, rows, side="right") - low
        total = int(counts.sum())
        turns: list[Array] = []
        places: list[Array] = []
        if total:
            starts = np.repeat(low - np.cumsum(counts) + counts, counts)
            found = order[starts + np.arange(total)]
            turns.append(turn[found])
            places.append(np.repeat(np.arange(len(rows)), counts))
        newer = earlier[count:size]
        if len(newer):
            where = np.minimum(np.searchsorted(rows, newer), len(rows) - 1)
            hit = rows[where] == newer
            turns.append(turn[count:size][hit])
            places.append(where[hit])
        if not turns:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(turns), np.concatenate(places)

    def earlier_of(self, rows: Array) -> tuple[Array, Array]:
        """(position in ``rows``, earlier row) of every pair whose turn is in ``rows``
        (any order)."""
        turn, earlier, size = self._pairs
        if not size or not len(rows):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        noted = turn[:size]  # ascending: pairs are noted in turn order
        ordered = np.argsort(rows, kind="stable")
        wanted = rows[ordered]
        low = np.searchsorted(noted, wanted, side="left")
        counts = np.searchsorted(noted, wanted, side="right") - low
        total = int(counts.sum())
        if not total:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        starts = np.repeat(low - np.cumsum(counts) + counts, counts)
        found = starts + np.arange(total)
        return np.repeat(ordered, counts), earlier[found]

    def below(self, limit: int) -> tuple[Array, Array]:
        """(turns, earlier rows) of the pairs whose turn is below ``limit``."""
        turn, earlier, size = self._pairs
        end = int(np.searchsorted(turn[:size], limit, side="left"))
        return turn[:end], earlier[:end]

    def _sorted_copy(self, earlier: Array, size: int) -> tuple[Array, int]:
        """The positions of the first ``count`` of these pairs by earlier row, and
        ``count``: the copy kept, unless it was made from other pairs or the pairs added
        since outgrow it (then made again, and kept)."""
        made_from, order, count = self._sorted
        stale = made_from is not earlier or count > size
        if stale or size - count > max(_TAIL_MIN, count // _TAIL_FRACTION):
            order, count = np.argsort(earlier[:size], kind="stable"), size
            self._sorted = (earlier, order, count)
        return order, count

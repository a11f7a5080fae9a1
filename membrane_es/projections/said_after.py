"""Which conversation turn was said after which: the text index's links between documents.

A captured conversation turn names the turns it was said after
(:mod:`membrane_es.schema.conversation`). The text index
(:class:`~membrane_es.projections.text_index.TextIndex`) searches the turn as if its document
went on with theirs: a query word in an earlier turn counts for the reply too, and the
reply's length includes theirs, both at :data:`WEIGHT`.
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

_TAIL_FRACTION = 8  # pairs added since the sorted copy, at most 1/8 of it (or _TAIL_MIN)
_TAIL_MIN = 4096


class SaidAfter:
    """The ``(turn, earlier)`` row pairs of a text index."""

    def __init__(self) -> None:
        self._turn = np.zeros(0, dtype=np.int64)
        self._earlier = np.zeros(0, dtype=np.int64)
        self._size = 0
        # Positions of the first ``_sorted`` pairs, ordered by ``earlier``.
        self._order = np.zeros(0, dtype=np.int64)
        self._sorted = 0

    def __len__(self) -> int:
        return self._size

    def add(self, links: list[tuple[int, list[int]]]) -> None:
        """Note each ``(turn, [earlier rows])``; turns ascending, after every noted one."""
        pairs = [(turn, row) for turn, rows in links for row in rows if row < turn]
        if not pairs:
            return
        size = self._size
        grown = size + len(pairs)
        if grown > len(self._turn):
            capacity = max(2 * len(self._turn), grown, 1024)
            self._turn = np.resize(self._turn, capacity)
            self._earlier = np.resize(self._earlier, capacity)
        self._turn[size:grown], self._earlier[size:grown] = zip(*pairs, strict=True)
        self._size = grown

    def remove(self, rows: list[int]) -> None:
        """Forget every pair with a turn or an earlier turn among ``rows`` (erasure)."""
        turn, earlier = self.pairs()
        gone = np.isin(turn, rows) | np.isin(earlier, rows)
        if gone.any():
            self.load(turn[~gone], earlier[~gone])

    def pairs(self) -> tuple[Array, Array]:
        """(turns, earlier rows), in the order noted (a copy)."""
        return self._turn[: self._size].copy(), self._earlier[: self._size].copy()

    def load(self, turn: Array, earlier: Array) -> None:
        """Replace every pair (as :meth:`pairs` gave them)."""
        self._turn = np.asarray(turn, dtype=np.int64).copy()
        self._earlier = np.asarray(earlier, dtype=np.int64).copy()
        self._size = len(self._turn)
        self._order = np.zeros(0, dtype=np.int64)
        self._sorted = 0

    def replies(self, rows: Array) -> tuple[Array, Array]:
        """(turn, position in ``rows``) of every pair whose earlier row is in ``rows``
        (ascending, unique)."""
        if not self._size or not len(rows):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        self._keep_sorted()
        order, earlier = self._order, self._earlier
        ranked = earlier[order]
        low = np.searchsorted(ranked, rows, side="left")
        counts = np.searchsorted(ranked, rows, side="right") - low
        total = int(counts.sum())
        turns: list[Array] = []
        places: list[Array] = []
        if total:
            starts = np.repeat(low - np.cumsum(counts) + counts, counts)
            found = order[starts + np.arange(total)]
            turns.append(self._turn[found])
            places.append(np.repeat(np.arange(len(rows)), counts))
        tail = slice(self._sorted, self._size)
        newer = earlier[tail]
        if len(newer):
            where = np.minimum(np.searchsorted(rows, newer), len(rows) - 1)
            hit = rows[where] == newer
            turns.append(self._turn[tail][hit])
            places.append(where[hit])
        if not turns:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(turns), np.concatenate(places)

    def earlier_of(self, rows: Array) -> tuple[Array, Array]:
        """(position in ``rows``, earlier row) of every pair whose turn is in ``rows``
        (any order)."""
        if not self._size or not len(rows):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        turn = self._turn[: self._size]  # ascending: pairs are noted in turn order
        ordered = np.argsort(rows, kind="stable")
        wanted = rows[ordered]
        low = np.searchsorted(turn, wanted, side="left")
        counts = np.searchsorted(turn, wanted, side="right") - low
        total = int(counts.sum())
        if not total:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        starts = np.repeat(low - np.cumsum(counts) + counts, counts)
        found = starts + np.arange(total)
        return np.repeat(ordered, counts), self._earlier[found]

    def below(self, size: int) -> tuple[Array, Array]:
        """(turns, earlier rows) of the pairs whose turn is below ``size``."""
        end = int(np.searchsorted(self._turn[: self._size], size, side="left"))
        return self._turn[:end], self._earlier[:end]

    def _keep_sorted(self) -> None:
        tail = self._size - self._sorted
        if tail > max(_TAIL_MIN, self._sorted // _TAIL_FRACTION) or (
            self._sorted == 0 and self._size
        ):
            self._order = np.argsort(self._earlier[: self._size], kind="stable")
            self._sorted = self._size

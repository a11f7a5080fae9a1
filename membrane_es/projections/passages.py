"""The vectors of long texts' further passages, by table row.

A record whose text is longer than the embedder reads keeps one vector per passage
(:mod:`membrane_es.embedding.passages`): its own vector reads the opening, the rest are here.
Retrieval scores such a record by its best passage less what chance gives the best of that
many (:func:`with_passages`); everything else — the
embedding matrix, its shortlists, a graph's roots, duplicates — uses the record's own vector.

Passages are few beside records (only long texts have any), so a query scores all of them
exactly. The arrays are one value ``(rows, numbers, vectors, count)``, replaced whole by a
write (appends go past the count a reader holds), so a search reading without the lock never
mixes two states; rows are appended in log order, so ascending.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]


class PassageIndex:
    def __init__(self) -> None:
        empty = np.zeros(0, dtype=np.int64)
        # rows; each passage's number within its record (2 for the first one here: the
        # record's own vector reads passage 1); vectors; how many are written.
        self._state: tuple[Array, Array, Array, int] = (
            empty,
            empty,
            np.zeros((0, 0), dtype=np.float32),
            0,
        )

    def __len__(self) -> int:
        return self._state[3]

    def add_many(self, passages: list[tuple[int, bytes]], dimensions: int) -> None:
        """Note each ``(row, vectors of its further passages as float32 bytes)``; rows
        ascending, after every row noted before."""
        items = [(row, blob) for row, blob in passages if blob]
        if not items or dimensions <= 0:
            return
        rows, numbers, vectors, size = self._state
        if size and vectors.shape[1] != dimensions:
            return  # another model's width: not comparable (the embedding index skips them too)
        new = [np.frombuffer(blob, dtype="<f4").reshape(-1, dimensions) for _, blob in items]
        grown = size + sum(len(block) for block in new)
        if grown > len(rows) or vectors.shape[1] != dimensions:
            capacity = max(2 * len(rows), grown, 256)
            bigger = np.zeros((capacity, dimensions), dtype=np.float32)
            if size:
                bigger[:size] = vectors[:size]
            rows, numbers, vectors = np.resize(rows, capacity), np.resize(numbers, capacity), bigger
        at = size
        for (row, _), block in zip(items, new, strict=True):
            rows[at : at + len(block)] = row
            numbers[at : at + len(block)] = np.arange(2, len(block) + 2)
            vectors[at : at + len(block)] = block
            at += len(block)
        self._state = (rows, numbers, vectors, grown)

    def erase(self, gone: list[int]) -> None:
        """Forget the passages of these rows (erasure)."""
        rows, numbers, vectors, size = self._state
        keep = ~np.isin(rows[:size], gone)
        if not keep.all():
            self._state = (
                rows[:size][keep].copy(),
                numbers[:size][keep].copy(),
                vectors[:size][keep].copy(),
                int(keep.sum()),
            )

    def arrays(self) -> dict[str, Array]:
        """What a checkpoint keeps (copies)."""
        rows, numbers, vectors, size = self._state
        return {
            "rows": rows[:size].copy(),
            "numbers": numbers[:size].copy(),
            "vectors": vectors[:size].copy(),
        }

    def restore(self, rows: Array, numbers: Array, vectors: Array) -> None:
        """Replace every passage (as :meth:`arrays` gave them)."""
        self._state = (
            np.asarray(rows, dtype=np.int64).copy(),
            np.asarray(numbers, dtype=np.int64).copy(),
            np.asarray(vectors, dtype=np.float32).copy(),
            len(rows),
        )

    def nearest(self, query: Array, below: int, limit: int) -> Array:
        """The rows (below ``below``) of the ``limit`` passages most similar to ``query``,
        ascending, unique: records a shortlist of their own vectors may have missed."""
        rows, _, vectors, size = self._state
        end = int(np.searchsorted(rows[:size], below, side="left"))
        if not end or vectors.shape[1] != len(query):
            return np.zeros(0, dtype=np.int64)
        scores = vectors[:end] @ query
        picks = np.argsort(-scores, kind="stable")[:limit]
        found: Array = np.unique(rows[picks])
        return found

    def best(self, query: Array, candidates: Array, below: int) -> tuple[Array, Array, Array]:
        """For each of ``candidates`` (rows, any order): the best cosine of its further
        passages with ``query`` (-inf: it has none), that passage's number (0: none), and
        the cosines of all its further passages, as ``(count, sum, sum of squares)`` rows."""
        rows, numbers, vectors, size = self._state
        similarity = np.full(len(candidates), -np.inf)
        number = np.zeros(len(candidates), dtype=np.int64)
        moments = np.zeros((len(candidates), 3))
        end = int(np.searchsorted(rows[:size], below, side="left"))
        if not end or not len(candidates) or vectors.shape[1] != len(query):
            return similarity, number, moments
        held = np.isin(rows[:end], candidates)
        if not held.any():
            return similarity, number, moments
        places = np.flatnonzero(held)
        scores = (vectors[places] @ query).astype(np.float64)
        # Best first, then by row: the first entry of each row is its best passage.
        order = np.lexsort((-scores, rows[places]))
        ranked_rows = rows[places][order]
        first = np.concatenate(([True], ranked_rows[1:] != ranked_rows[:-1]))
        best_rows = ranked_rows[first]
        at = np.searchsorted(best_rows, candidates)
        at = np.minimum(at, len(best_rows) - 1)
        found = best_rows[at] == candidates
        similarity[found] = scores[order][first][at[found]]
        number[found] = numbers[places][order][first][at[found]]
        # Each passage's candidate, to sum its record's cosines.
        owner = np.searchsorted(best_rows, rows[places])
        per_row = np.zeros((len(best_rows), 3))
        np.add.at(per_row, owner, np.stack([np.ones_like(scores), scores, scores**2], axis=1))
        moments[found] = per_row[at[found]]
        return similarity, number, moments


def with_passages(
    index: PassageIndex, query: Array, candidates: Array, similarity: Array, below: int
) -> tuple[Array, Array | None]:
    """``similarity`` (each candidate's own vector's cosine, NaN: none) raised to what its
    best passage shows beyond chance, and, for candidates with further passages, which one
    scored (1: the record's own vector; 0 for candidates without); None when no candidate
    has passages.

    The best of n passages is higher than one passage's cosine even where the text says
    nothing about the task: of n draws of spread sigma, the largest is expected about
    ``sigma * sqrt(2 ln n)`` above their mean. A long text is therefore credited with its
    best passage less that expected maximum (sigma read from its own passages' cosines), so
    its length alone earns it nothing, while a passage that stands out from the rest of the
    text — the one that holds the fact — still lifts it."""
    if not len(index):
        return similarity, None
    best, number, moments = index.best(query, candidates, below)
    if not (number > 0).any():
        return similarity, None
    own = np.nan_to_num(similarity, nan=-np.inf)
    # The record's own vector is one of its passages: count it with the others.
    has_own = np.isfinite(own)
    own_or_zero = np.where(has_own, own, 0.0)
    top = np.where(number > 0, np.maximum(best, own), 0.0)
    count = moments[:, 0] + has_own
    # The spread of the passages other than the best: how far apart a text's passages lie
    # when they are not about the task (the best one, if it is, would widen it).
    rest = np.maximum(count - 1, 1.0)
    mean = (moments[:, 1] + own_or_zero - top) / rest
    squares = (moments[:, 2] + own_or_zero**2 - top**2) / rest
    sigma = np.sqrt(np.maximum(squares - mean**2, 0.0))
    chance = sigma * np.sqrt(2.0 * np.log(np.maximum(count, 1.0)))
    # Records with further passages are credited with their best less chance; the others
    # keep their own vector's similarity.
    raised = np.where(number > 0, top - chance, similarity)
    better = (number > 0) & (best > own)
    return raised, np.where(better, number, np.where(number > 0, 1, 0))

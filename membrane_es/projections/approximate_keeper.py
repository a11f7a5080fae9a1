"""Keeping an approximate index (:mod:`membrane_es.projections.approximate`) in step with
the embedding blocks (:mod:`membrane_es.projections.embeddings`): when to build it, building
it on a thread of its own, following every write once it is built, and publishing it.

From its threshold on, each vector appended to the blocks is appended to the index, in row
order. It is built on a thread of its own — when the store reaches its threshold, or,
restored from a checkpoint that keeps only its training (one written while it was being
built, or whose index file could not be read), when a search first asks for it
(:meth:`ApproximateKeeper.index`) — and published between two writes once it holds every
vector; until then reads search without it. A checkpoint written once it is built keeps it
(:mod:`membrane_es.projections.approximate_file`), and an open takes it up as it was
(:meth:`ApproximateKeeper.keep` with the loaded index): no vector is read back for it.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from membrane_es.projections.approximate import SLAB, ApproximateIndex

if TYPE_CHECKING:
    from membrane_es.projections.embeddings import Block

logger = logging.getLogger(__name__)

Array = npt.NDArray[Any]
Held = list[tuple["Block", Array]]  # blocks read, each with its rows (ascending)


class Blocks(Protocol):
    """What the keeper needs of the blocks it follows (an EmbeddingIndex)."""

    dimensions: int
    size: int
    closed: bool
    writing: threading.RLock  # held while vectors are written or erased

    def unread_scopes(self) -> list[int]: ...

    def read_scope(self, scope: int) -> None: ...

    def held_blocks(self) -> Held: ...


class ApproximateKeeper:
    """The approximate index of one embedding index's blocks, kept from a threshold on."""

    def __init__(self, blocks: Blocks) -> None:
        self._blocks = blocks
        # From how many vectors on it is kept (None: not kept), the index, whether it is to
        # be built again from the blocks before its next use, and the size below which that
        # is not tried again (too few vectors not erased).
        self.start: int | None = None
        self.current: ApproximateIndex | None = None
        self.stale = False
        self._retry = 0
        self.saved = b""  # a checkpoint's trained index (ApproximateIndex.saved)
        # A checkpoint's whole index (codes and lists, covering its position), taken up by
        # keep when kept from the same threshold: no vector is read back for it.
        self.loaded: ApproximateIndex | None = None
        # A build publishes its index only if ``_generation`` has not moved since it
        # started (a restore, a new threshold or a close moves it); rows erased while it
        # runs are noted and erased from its index before it is published.
        self._generation = 0
        self._builder: threading.Thread | None = None
        self._built = threading.Event()  # set while no build runs
        self._built.set()
        self._erased_meanwhile: list[int] = []

    def reset(self) -> None:
        """Forget the index (the blocks were replaced): a build under way publishes nothing,
        and the index is built again before its next use (under ``writing``)."""
        self.loaded = None
        self._generation += 1  # a build under way indexes blocks no longer held
        self.current, self.stale = None, True

    def keep(self, min_vectors: int | None) -> None:
        """Keep an approximate index from ``min_vectors`` vectors on (None: keep none), built
        on a thread of its own; one due already is built when a search first asks for it."""
        loaded, self.loaded = self.loaded, None
        with self._blocks.writing:
            self._generation += 1
            self.start = min_vectors
            self.current, self.stale = None, min_vectors is not None
            self._retry = 0
            if (
                loaded is not None
                and min_vectors is not None
                and loaded.min_vectors == max(1, min_vectors)
                and loaded.dimensions == self._blocks.dimensions
            ):
                # Holds every vector under the checkpoint's position; what the log adds
                # after it is appended as it is applied (follow).
                self.current, self.stale = loaded, False

    def index(self) -> ApproximateIndex | None:
        """The index, trained and holding every vector; None when none is kept, the store is
        too small, or it is still being built (a build is started if it is due and none
        runs: after a restore, its first search's)."""
        if not self.due():
            return None
        approximate = self.live()
        if approximate is not None:
            return approximate
        with self._blocks.writing:
            if self.stale or self.current is None:
                self._start_build()
            return self.live()

    def wait(self, timeout: float | None) -> bool:
        """Start building the index if it is due, and wait up to ``timeout`` seconds (None:
        as long as it takes) for the build; True once none runs."""
        if self.due():
            self.index()
        return self._built.wait(timeout)

    @property
    def building(self) -> bool:
        return not self._built.is_set()

    def close(self) -> None:
        """Stop a build under way: it publishes nothing."""
        with self._blocks.writing:
            self._generation += 1

    def live(self) -> ApproximateIndex | None:
        """The index if it is built and holds every vector, else None (starts no build)."""
        approximate = self.current
        if approximate is not None and approximate.trained and not self.stale:
            return approximate
        return None

    def state(self) -> bytes:
        """The index's training for a checkpoint (empty when it is not trained): the live
        index's, or the one a checkpoint gave it not yet built again."""
        approximate = self.live()
        if approximate is not None:
            return approximate.saved()
        return self.saved if self.start is not None else b""

    def due(self) -> bool:
        start = self.start
        return start is not None and self._blocks.size >= max(start, self._retry)

    def follow(self, rows: Array, matrix: Array, *, unread: bool) -> None:
        """Hand rows just written (ascending) to the index, or start building it once the
        store reaches its threshold (under ``writing``); a build under way adds them itself.
        ``unread``: blocks are still to be read back (then built when a search asks)."""
        if self.start is None:
            return
        approximate = self.live()
        if approximate is not None:
            approximate.add(rows, matrix)
        elif self.due() and self._builder is None:
            if unread:
                self.stale = True  # built when a search asks (reads them)
            else:
                self._start_build()

    def erase(self, row: int) -> None:
        """Remove ``row`` from the index (under ``writing``), and from one being built."""
        approximate = self.current
        if approximate is not None and not self.stale:
            approximate.erase(row)
        if self._builder is not None:
            self._erased_meanwhile.append(row)

    def _start_build(self) -> None:
        """Start building the index on a thread of its own (under ``writing``)."""
        if self._builder is not None or self._blocks.closed:
            return
        generation = self._generation
        self._erased_meanwhile = []
        self._built.clear()
        self._builder = threading.Thread(
            target=self._build_in_background,
            args=(generation,),
            name="membrane-approximate-index",
            daemon=True,
        )
        self._builder.start()

    def _build_in_background(self, generation: int) -> None:
        try:
            self._build(generation)
        except Exception:  # the log closed or damaged under it: reads go on without the index
            logger.exception("the approximate index could not be built")
        finally:
            with self._blocks.writing:
                self._builder = None
                self._erased_meanwhile = []
                self._built.set()

    def _build(self, generation: int) -> None:
        """Build the index from every block (read back first, a block at a time), in row
        order, a slab at a time: the first vectors not erased fill its training set (unless
        a checkpoint kept its training), the rest are added once it is trained (never a
        second copy of every vector). Only taking the blocks' rows and publishing hold
        ``writing``: writes go on meanwhile, and the rows they add are caught up with, in
        order, before the index is published."""
        blocks = self._blocks
        start = self.start
        assert start is not None
        for scope in blocks.unread_scopes():
            if generation != self._generation:
                return
            blocks.read_scope(scope)
        with blocks.writing:
            if generation != self._generation:
                return
            held = blocks.held_blocks()
            saved = self.saved
        dimensions = blocks.dimensions
        approximate = ApproximateIndex.restored(saved, dimensions, start) or ApproximateIndex(
            dimensions, start
        )
        end = _end_of(held)
        if not approximate.trained:
            filled = _train(approximate, held, end, start, dimensions)
            if filled < start:
                with blocks.writing:
                    if generation == self._generation:
                        # Too few vectors not erased: tried again once that many more are in.
                        self._retry = blocks.size + (start - filled)
                        self.current, self.stale = None, False
                return
        done = approximate.rows_below  # the training vectors are in
        while True:
            if generation != self._generation:
                return
            _add_slabs(approximate, held, done, end, dimensions)
            done = end
            with blocks.writing:
                if generation != self._generation:
                    return
                held = blocks.held_blocks()
                end = _end_of(held)
                if end - done > SLAB:
                    continue  # many rows written meanwhile: add them without holding writes
                _add_slabs(approximate, held, done, end, dimensions)
                for row in self._erased_meanwhile:
                    approximate.erase(row)
                self.current, self.stale = approximate, False
                return


def _train(approximate: ApproximateIndex, held: Held, end: int, start: int, dimensions: int) -> int:
    """Train on the first ``start`` vectors not erased under ``end``; how many there were
    (fewer than ``start``: not trained)."""
    sample = np.empty((start, dimensions), dtype=np.float32)
    sample_rows = np.empty(start, dtype=np.int64)
    filled = 0
    for first in range(0, end, SLAB):
        rows, matrix = _slab(held, first, first + SLAB, dimensions)
        kept = np.flatnonzero(np.any(matrix != 0.0, axis=1))[: start - filled]
        sample[filled : filled + len(kept)] = matrix[kept]
        sample_rows[filled : filled + len(kept)] = rows[kept]
        filled += len(kept)
        if filled == start:
            approximate.train(sample_rows, sample)
            break
    return filled


def _end_of(held: Held) -> int:
    """One past the last row these blocks hold."""
    return max((int(rows[-1]) + 1 for _, rows in held if len(rows)), default=0)


def _add_slabs(
    approximate: ApproximateIndex, held: Held, first: int, last: int, dimensions: int
) -> None:
    """Add the rows in ``[first, last)`` of these blocks, in row order, a slab at a time."""
    for low in range(first, last, SLAB):
        rows, matrix = _slab(held, low, min(low + SLAB, last), dimensions)
        approximate.add(rows, matrix)


def _slab(held: Held, first: int, last: int, dimensions: int) -> tuple[Array, Array]:
    """The rows in ``[first, last)`` of these blocks (each with its rows) and their vectors,
    in row order."""
    parts: list[tuple[Array, Array]] = []
    for block, rows in held:
        lo, hi = np.searchsorted(rows, [first, last]).tolist()
        if lo < hi:
            vectors = np.empty((hi - lo, dimensions), dtype=np.float32)
            block.gather_into(np.arange(lo, hi), vectors)
            parts.append((rows[lo:hi], vectors))
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros((0, dimensions), dtype=np.float32)
    rows = np.concatenate([r for r, _ in parts])
    order = np.argsort(rows, kind="stable")
    return rows[order], np.concatenate([v for _, v in parts])[order]

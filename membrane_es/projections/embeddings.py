"""The embedding matrix, partitioned by scope: float32, L2-normalised, in fixed-size chunks.

Rows of one scope are stored together, so a query limited to a few scopes multiplies only
their rows — at 5 % selectivity a per-scope block is far faster than masking a global matrix
(notes/vector-search.md). A query over every scope visits every block.

Each block is a list of chunks of :data:`CHUNK_ROWS` rows. Growth appends a chunk: nothing is
ever copied (doubling a matrix briefly holds both copies and leaves half of the new one
spare), and a chunk's unused tail is zero pages the process never touches.

Scores come from ``einsum`` over each chunk's written rows: it computes every row's dot
product the same way wherever the row sits and however many rows there are, so a similarity
read "as of" a moment equals, to the bit, the one computed at that moment, however many rows
were appended since. BLAS (sgemv) over fixed-shape chunks would be exact too, but measured
on these 2-core machines it was no faster (about 1.2–1.3× FAISS's one-thread scan either
way, docs/benchmarks.md): the scan is bound by memory bandwidth, a 1,024-row call is too
short for OpenBLAS's second thread to pay, and its spinning threads slow whatever the process
runs next; and it computes a partly filled chunk whole.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]

CHUNK_ROWS = 1024  # 1.5 MB of 384-dimension vectors: few calls per scan, little spare


class Block:
    """The vectors of one scope and the table rows they belong to (ascending: appended in
    log order)."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.chunks: list[Array] = []  # (CHUNK_ROWS, dimensions) float32 each
        self.row_chunks: list[Array] = []  # (CHUNK_ROWS,) int64 each
        self.size = 0

    @classmethod
    def of(cls, dimensions: int, rows: Array, matrix: Array) -> Block:
        """A block holding these rows and vectors (from a checkpoint)."""
        block = cls(dimensions)
        for first in range(0, len(rows), CHUNK_ROWS):
            chunk, row_chunk = block._new_chunk()
            last = min(len(rows), first + CHUNK_ROWS)
            chunk[: last - first] = matrix[first:last]
            row_chunk[: last - first] = rows[first:last]
        block.size = len(rows)
        return block

    def append(self, row: int, vector: Array) -> None:
        chunk, offset = divmod(self.size, CHUNK_ROWS)
        if chunk == len(self.chunks):
            self._new_chunk()
        self.chunks[chunk][offset] = vector
        self.row_chunks[chunk][offset] = row
        self.size += 1

    def extend(self, rows: Array, vectors: Array) -> None:
        """Append many rows at once (the same as appending them one by one)."""
        done = 0
        while done < len(rows):
            chunk, offset = divmod(self.size, CHUNK_ROWS)
            if chunk == len(self.chunks):
                self._new_chunk()
            take = min(CHUNK_ROWS - offset, len(rows) - done)
            self.chunks[chunk][offset : offset + take] = vectors[done : done + take]
            self.row_chunks[chunk][offset : offset + take] = rows[done : done + take]
            done += take
            self.size += take  # after the data: a reader never sees a row not yet written

    def _new_chunk(self) -> tuple[Array, Array]:
        chunk = np.zeros((CHUNK_ROWS, self.dimensions), dtype=np.float32)
        rows = np.zeros(CHUNK_ROWS, dtype=np.int64)
        self.chunks.append(chunk)
        self.row_chunks.append(rows)
        return chunk, rows

    @property
    def rows(self) -> Array:
        """Every row, in order (a copy)."""
        return _joined(self.row_chunks, self.size, np.int64)

    @property
    def matrix(self) -> Array:
        """Every vector, in order (a copy)."""
        if not self.chunks:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.concatenate(self.chunks)[: self.size]

    def count_below(self, below: int | None) -> int:
        """How many of the block's rows are under ``below`` (all when None): a prefix."""
        size = self.size
        if below is None or size == 0:
            return size
        last = size - 1
        if self.row_chunks[last // CHUNK_ROWS][last % CHUNK_ROWS] < below:
            return size  # the usual case: every row (a live read)
        # Chunks hold ascending rows: find the chunk where ``below`` falls, then inside it.
        firsts = [int(r[0]) for r in self.row_chunks[: last // CHUNK_ROWS + 1]]
        chunk = int(np.searchsorted(firsts, below, side="left")) - 1
        if chunk < 0:
            return 0
        filled = min(CHUNK_ROWS, size - chunk * CHUNK_ROWS)
        inside = int(np.searchsorted(self.row_chunks[chunk][:filled], below, side="left"))
        return chunk * CHUNK_ROWS + inside

    def score_into(self, query: Array, count: int, rows: Array, scores: Array) -> None:
        """Write the first ``count`` rows and their scores into ``rows`` and ``scores``."""
        # By index, up to ``count``: a writer may be appending a chunk meanwhile.
        for chunk in range(-(-count // CHUNK_ROWS)):
            first = chunk * CHUNK_ROWS
            take = min(CHUNK_ROWS, count - first)
            rows[first : first + take] = self.row_chunks[chunk][:take]
            np.einsum("ij,j->i", self.chunks[chunk][:take], query, out=scores[first : first + take])

    def used_bytes(self) -> int:
        return self.size * (self.dimensions * 4 + 8)

    def reserved_bytes(self) -> int:
        return len(self.chunks) * CHUNK_ROWS * (self.dimensions * 4 + 8)


class EmbeddingIndex:
    """Vectors by scope; one model and one dimension for the whole store."""

    def __init__(self) -> None:
        self.model = ""
        self.dimensions = 0
        self.blocks: dict[int, Block] = {}
        self.skipped = 0  # vectors from another model or of another size, not indexed

    def add(self, row: int, scope: int, model: str, vector: Array) -> None:
        if not self.dimensions:
            self.model, self.dimensions = model, len(vector)
        if len(vector) != self.dimensions:
            self.skipped += 1
            return
        block = self.blocks.get(scope)
        if block is None:
            block = self.blocks[scope] = Block(self.dimensions)
        block.append(row, vector)

    def add_many(self, entries: list[tuple[int, int, str, bytes]]) -> None:
        """:meth:`add` for each ``(row, scope, model, float32 little-endian bytes)``, in
        order, appended to each scope's block in bulk."""
        if not entries:
            return
        if not self.dimensions:
            _, _, model, data = entries[0]
            self.model, self.dimensions = model, len(data) // 4
        width = 4 * self.dimensions
        kept = [entry for entry in entries if len(entry[3]) == width]
        self.skipped += len(entries) - len(kept)
        if not kept:
            return
        data = b"".join(entry[3] for entry in kept)
        matrix = np.frombuffer(data, dtype="<f4").reshape(len(kept), self.dimensions)
        rows = np.array([entry[0] for entry in kept], dtype=np.int64)
        scopes = np.array([entry[1] for entry in kept], dtype=np.int64)
        for scope in dict.fromkeys(entry[1] for entry in kept):
            block = self.blocks.get(scope)
            if block is None:
                block = self.blocks[scope] = Block(self.dimensions)
            picks = np.flatnonzero(scopes == scope)
            block.extend(rows[picks], matrix[picks])

    def __len__(self) -> int:
        return sum(block.size for block in self.blocks.values())

    def similarities(
        self, query: Array, scopes: list[int] | None, below: int | None = None
    ) -> tuple[Array, Array]:
        """(rows, cosine similarity) for every vector in the given scopes (all if None), of
        the rows under ``below`` when given (the records that existed at some moment).

        Rows come block by block (in the order of ``scopes``, or of the blocks' creation),
        ascending within a block. A row's score is the same bits whatever ``below`` is and
        however many rows were added after it (see the module's docstring).
        """
        empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if not self.dimensions:
            return empty
        query = np.ascontiguousarray(query, dtype=np.float32)
        chosen = (
            list(self.blocks.values())
            if scopes is None
            else [self.blocks[s] for s in dict.fromkeys(scopes) if s in self.blocks]
        )
        counts = [block.count_below(below) for block in chosen]
        total = sum(counts)
        if not total:
            return empty
        rows = np.empty(total, dtype=np.int64)
        scores = np.empty(total, dtype=np.float32)
        start = 0
        for block, count in zip(chosen, counts, strict=True):
            block.score_into(
                query, count, rows[start : start + count], scores[start : start + count]
            )
            start += count
        return rows, scores


def _joined(chunks: list[Array], size: int, dtype: Any) -> Array:
    if not chunks:
        return np.zeros(0, dtype=dtype)
    return np.concatenate(chunks)[:size]

"""The embedding matrix, partitioned by scope: float32, L2-normalised, grown by doubling.

Rows of one scope are stored together, so a query limited to a few scopes multiplies only
their rows — at 5 % selectivity a per-scope block is far faster than masking a global matrix
(notes/vector-search.md). A query over every scope visits every block.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]


class Block:
    """The vectors of one scope and the table rows they belong to."""

    def __init__(self, dimensions: int, capacity: int = 256) -> None:
        self.matrix = np.zeros((capacity, dimensions), dtype=np.float32)
        self.rows = np.zeros(capacity, dtype=np.int64)
        self.size = 0

    def append(self, row: int, vector: Array) -> None:
        if self.size == len(self.rows):
            grown = np.zeros((len(self.rows) * 2, self.matrix.shape[1]), dtype=np.float32)
            grown[: self.size] = self.matrix
            self.matrix = grown
            rows = np.zeros(len(self.rows) * 2, dtype=np.int64)
            rows[: self.size] = self.rows
            self.rows = rows
        self.matrix[self.size] = vector
        self.rows[self.size] = row
        self.size += 1

    def extend(self, rows: Array, vectors: Array) -> None:
        """Append many rows at once (the same as appending them one by one)."""
        size = self.size + len(rows)
        if size > len(self.rows):
            capacity = len(self.rows)
            while capacity < size:
                capacity *= 2
            grown = np.zeros((capacity, self.matrix.shape[1]), dtype=np.float32)
            grown[: self.size] = self.matrix[: self.size]
            self.matrix = grown
            grown_rows = np.zeros(capacity, dtype=np.int64)
            grown_rows[: self.size] = self.rows[: self.size]
            self.rows = grown_rows
        self.matrix[self.size : size] = vectors
        self.rows[self.size : size] = rows
        self.size = size


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

        Each row's score depends only on its vector and the query: ``einsum`` computes every
        dot product the same way whatever the matrix's size, where BLAS matrix-vector
        kernels round rows differently by their position in the batch — so a similarity read
        "as of" a moment equals the one computed then, to the bit.
        """
        if not self.dimensions:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        query = np.asarray(query, dtype=np.float32)
        chosen = (
            list(self.blocks.values())
            if scopes is None
            else [self.blocks[s] for s in scopes if s in self.blocks]
        )
        if not chosen:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        # Rows of a block ascend (appended in log order), so "under below" is a prefix.
        sizes = [
            b.size if below is None else int(np.searchsorted(b.rows[: b.size], below))
            for b in chosen
        ]
        rows = [b.rows[:n] for b, n in zip(chosen, sizes, strict=True)]
        scores = [
            np.einsum("ij,j->i", b.matrix[:n], query) for b, n in zip(chosen, sizes, strict=True)
        ]
        if len(chosen) == 1:
            return rows[0], scores[0]
        return np.concatenate(rows), np.concatenate(scores)

"""A checkpointed block searched by its sign codes before its vectors are read from the log.

A checkpoint keeps each block's rows and, once the index keeps codes, each row's sign code
(48 bytes for 384 dimensions: a 32nd of the vector); the vectors themselves are in the log
(:mod:`membrane_es.projections.block_vectors`). Reading every vector of a large store back
takes about 35 µs a record, half a minute for a million; a search that shortlists by codes
needs only the shortlist's vectors. So until a block's vectors are read, a shortlisting
search scans a :class:`CodedBlock` — the block's rows and codes as saved, with what was
written since applied in order — and reads from the log the vectors of the rows it picks.

Scores are the same bits either way: the log holds the very vectors the block would hold
(what a record's events say, zeros once it is forgotten), and their codes were computed from
them. A search that scores every vector (no limit, ``exact``, or codes that cannot vouch for
a shortlist) reads the block whole first, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.embeddings import CHUNK_ROWS, Block

Array = npt.NDArray[Any]
Fetch = Callable[[Array], Array]  # the vectors of these table rows, from the log, in order


class CodedBlock(Block):
    """The rows and sign codes of a block whose first ``restored`` vectors are still in the
    log; rows appended since hold their vectors as any block does."""

    def __init__(self, dimensions: int, rows: Array, codes: Array, fetch: Fetch) -> None:
        super().__init__(dimensions)
        self.restored = len(rows)
        self._restored_rows = rows
        self._fetch = fetch
        for first in range(0, len(rows), CHUNK_ROWS):
            # The vector chunk stays zeros nobody writes: pages the process never touches.
            _, row_chunk = self._new_chunk()
            take = min(CHUNK_ROWS, len(rows) - first)
            row_chunk[:take] = rows[first : first + take]
        self.size = len(rows)
        self.code_chunks = []
        if len(rows):
            self._write_codes(0, codes)

    def gather_into(self, positions: Array, out: Array) -> None:
        """Copy the vectors at ``positions`` (ascending) into ``out``: from the log for the
        rows the checkpoint held, from the block for rows appended since."""
        split = int(np.searchsorted(positions, self.restored))
        if split:
            out[:split] = self._fetch(self._restored_rows[positions[:split]])
        if split < len(positions):
            super().gather_into(positions[split:], out[split:])

    def score_into(self, query: Array, count: int, rows: Array, scores: Array) -> None:
        raise RuntimeError("a block searched by its codes scores no vector it has not read")

    @property
    def matrix(self) -> Array:
        raise RuntimeError("a block searched by its codes holds no vector it has not read")

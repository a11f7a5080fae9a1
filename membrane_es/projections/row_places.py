"""Where each row's vector sits among the vector blocks, for reads of a few rows anywhere.

A read of a few scattered rows (an approximate index's candidates) would otherwise look
each row up block by block. The map keeps, for every row, the block it is in (its number
in the blocks' order) in the high 32 bits and its position in that block in the low 32
(-1 for a row without a vector), and is extended by the rows the blocks gained since the
last read: a row's place never changes while its block is held.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from membrane_es.projections.embeddings import Block

Array = npt.NDArray[Any]


class RowPlaces:
    """The map from row to place over a sequence of blocks (see the module's doc)."""

    def __init__(self) -> None:
        self._places = np.full(0, -1, dtype=np.int64)
        self._blocks: list[Block | None] = []  # the blocks placed, by number (None: absent)
        self._placed: dict[int, int] = {}  # rows placed of each block, by its number
        self._lock = threading.Lock()

    def of(self, rows: Array, blocks: Sequence[Block | None]) -> tuple[Array, list[Block | None]]:
        """Each row's place among ``blocks`` (in their order; -1 for none), and the blocks
        the numbers in it refer to."""
        with self._lock:
            if len(self._blocks) > len(blocks) or any(
                mine is not theirs for mine, theirs in zip(self._blocks, blocks, strict=False)
            ):
                # Blocks were replaced (a restore): place every row again.
                self._places = np.full(0, -1, dtype=np.int64)
                self._blocks, self._placed = [], {}
            self._blocks.extend(blocks[len(self._blocks) :])
            for number, block in enumerate(self._blocks):
                if block is not None:
                    self._place(number, block)
            known, placed = self._places, list(self._blocks)
        inside = rows < len(known)
        out = np.full(len(rows), -1, dtype=np.int64)
        out[inside] = known[rows[inside]]
        return out, placed

    def _place(self, number: int, block: Block) -> None:
        """Place the rows ``block`` gained since it was last placed."""
        done, size = self._placed.get(number, 0), block.size
        if size <= done:
            return
        added = block.flat_rows()[done:size]
        needed = int(added[-1]) + 1
        if needed > len(self._places):
            grown = np.full(max(needed, 2 * len(self._places)), -1, dtype=np.int64)
            grown[: len(self._places)] = self._places
            self._places = grown
        self._places[added] = (number << 32) | np.arange(done, size, dtype=np.int64)
        self._placed[number] = size

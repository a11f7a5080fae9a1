"""The map from row to place over vector blocks (projections/row_places.py)."""

from __future__ import annotations

import numpy as np

from membrane_es.projections.embeddings import CHUNK_ROWS, Block
from membrane_es.projections.row_places import RowPlaces


def _block(rows: list[int], dimensions: int = 3) -> Block:
    block = Block(dimensions)
    for row in rows:
        block.append(row, np.full(dimensions, float(row), dtype=np.float32))
    return block


def _vector(places: np.ndarray, blocks: list[Block | None], i: int) -> float | None:
    """The first component of the vector at row ``i``'s place (None: no place)."""
    place = int(places[i])
    if place < 0:
        return None
    block = blocks[place >> 32]
    assert block is not None
    chunk, offset = divmod(place & 0xFFFFFFFF, CHUNK_ROWS)
    return float(block.chunks[chunk][offset][0])


def test_each_row_is_placed_in_its_block_and_rows_without_a_vector_in_none() -> None:
    first, second = _block([0, 2, 5]), _block([1, 3])
    places, blocks = RowPlaces().of(np.array([0, 1, 2, 3, 4, 5, 99]), [first, second])
    assert [_vector(places, blocks, i) for i in range(7)] == [0.0, 1.0, 2.0, 3.0, None, 5.0, None]


def test_an_absent_block_keeps_the_numbers_of_the_blocks_after_it() -> None:
    present = _block([4, 7])
    places, blocks = RowPlaces().of(np.array([4, 7]), [None, present])
    assert blocks[0] is None and blocks[1] is present
    assert [_vector(places, blocks, i) for i in range(2)] == [4.0, 7.0]


def test_rows_a_block_gains_are_placed_at_the_next_read_and_a_replaced_block_anew() -> None:
    places_map, block = RowPlaces(), _block([0, 1])
    places_map.of(np.array([0]), [block])
    block.append(8, np.full(3, 8.0, dtype=np.float32))
    places, blocks = places_map.of(np.array([8]), [block])
    assert _vector(places, blocks, 0) == 8.0
    replaced = _block([8])  # a restore: another block where the first was
    places, blocks = places_map.of(np.array([0, 8]), [replaced])
    assert _vector(places, blocks, 0) is None and _vector(places, blocks, 1) == 8.0

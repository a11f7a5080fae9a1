"""A caller's vector (a record's own, or a query's) is checked with numpy: lists, tuples and
arrays of finite numbers are taken, as float32; anything else is refused naming the field,
and nothing is written."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.errors import ValidationError
from membrane_es.schema.validation import check_vector
from tests.unit.builders import semantic


@pytest.mark.parametrize(
    "given",
    [[0.5, -1, 2.0], (0.5, -1, 2.0), np.array([0.5, -1, 2.0]), np.array([1, 2, 3], dtype=np.int8)],
)
def test_numbers_in_any_sequence_are_taken_as_float32(given: Any) -> None:
    vector = check_vector("embedding", given)
    assert vector.dtype == np.float32 and vector.ndim == 1
    np.testing.assert_array_equal(vector, np.asarray(given, dtype=np.float32))
    if isinstance(given, np.ndarray):
        assert vector is not given  # a private copy


@pytest.mark.parametrize(
    "bad",
    [
        [],
        [True, 1.0],
        [1.0, "2"],
        [1.0, None],
        [[1.0, 2.0]],
        [1.0, float("nan")],
        [1.0, float("inf")],
        [1e39],  # finite in Python, not in float32
        [10**40],
        "1.0",
        b"\x00",
        {"a": 1.0},
        3.0,
        np.zeros((2, 2), dtype=np.float32),
        np.array([True]),
        np.array(["1.0"]),
    ],
)
def test_anything_else_is_refused_naming_the_field(bad: Any, memory: Membrane) -> None:
    with pytest.raises(ValidationError, match="embedding"):
        check_vector("embedding", bad)
    before = memory.application.recorder.max_notification_id()
    with pytest.raises(ValidationError, match="embedding"):
        memory.create_record(semantic("fact"), embedding=bad)
    with pytest.raises(ValidationError, match="query_embedding"):
        memory.retrieve("fact", query_embedding=bad)
    assert memory.application.recorder.max_notification_id() == before


def test_an_array_is_stored_as_the_same_list_would_be(memory: Membrane) -> None:
    values = [0.25, -0.5, 1.0, 0.0]
    from_list = memory.create_record(semantic("a"), embedding=values).id
    from_array = memory.create_record(semantic("b"), embedding=np.array(values)).id
    blocks = memory.views.embeddings
    rows = [memory.views.table.row_of[i] for i in (from_list, from_array)]
    found = {int(r): v for r, v in zip(*blocks.similarities(np.array(values), None), strict=True)}
    assert found[rows[0]] == found[rows[1]] > 0

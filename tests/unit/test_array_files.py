"""The checkpoint's arrays file reads back every array as numpy wrote it: dtype, shape,
order and values (NaN included), writable, whatever the header's form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from membrane_es.projections.array_files import load_arrays, save_arrays


def _arrays() -> dict[str, Any]:
    rng = np.random.default_rng(5)
    return {
        "content.type": rng.integers(-5, 5, 51).astype("i1"),
        "content.half_life": np.array([1.5, np.nan, -0.0, np.inf]),
        "state.pinned": np.array([True, False, True]),
        "timeline.times": rng.integers(0, 2**62, 1000, dtype="i8"),
        "big.endian": np.arange(7, dtype=">u4"),
        "passages.vectors": np.zeros((0, 0), dtype="f4"),
        "block.3.codes": rng.integers(0, 2**63, (40, 6), dtype="u8"),
        "fortran": np.asfortranarray(rng.random((3, 4))),
        "scalar": np.array(2.5),
        "moment": np.array(["2024-01-02"], dtype="datetime64[ns]"),  # read by numpy
        "structured": np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]),
    }


def test_every_array_reads_back_as_numpy_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "arrays.npz"
    written = _arrays()
    save_arrays(path, written)
    read = load_arrays(path)
    with np.load(path) as by_numpy:
        assert sorted(read) == sorted(by_numpy.files) == sorted(written)
        for name, array in read.items():
            expected = by_numpy[name]
            assert array.dtype == expected.dtype == written[name].dtype, name
            assert array.shape == expected.shape, name
            assert array.flags.f_contiguous == expected.flags.f_contiguous, name
            if array.dtype.names is None and array.dtype.kind in "fc":
                np.testing.assert_array_equal(array, expected)  # NaNs compare equal here
            else:
                assert np.array_equal(array, expected), name


@pytest.mark.parametrize("name", ["content.type", "fortran", "timeline.times"])
def test_arrays_read_back_are_writable(tmp_path: Path, name: str) -> None:
    path = tmp_path / "arrays.npz"
    save_arrays(path, _arrays())
    array = load_arrays(path)[name]
    array.flat[0] = 1
    assert array.flat[0] == 1

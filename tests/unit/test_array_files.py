"""The checkpoint's arrays file reads back every array as it was written: dtype, shape,
order and values (NaN included), writable; a checkpoint saved before it (``arrays.npz``)
reads back as numpy reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from membrane_es.projections.array_files import (
    ARRAYS_FILE,
    NPZ_FILE,
    load_arrays,
    load_checkpoint_arrays,
    load_npz_arrays,
    save_arrays,
)


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
        "block.4.codes": np.zeros((0, 6), dtype="u8"),
        "fortran": np.asfortranarray(rng.random((3, 4))),
        "scalar": np.array(2.5),
        "moment": np.array(["2024-01-02"], dtype="datetime64[ns]"),
        "structured": np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]),
    }


def _same(read: dict[str, Any], written: dict[str, Any]) -> None:
    assert sorted(read) == sorted(written)
    for name, array in read.items():
        expected = written[name]
        assert array.dtype == expected.dtype, name
        assert array.shape == expected.shape, name
        assert array.flags.f_contiguous == expected.flags.f_contiguous, name
        if array.dtype.names is None and array.dtype.kind in "fc":
            np.testing.assert_array_equal(array, expected)  # NaNs compare equal here
        else:
            assert np.array_equal(array, expected), name


def test_every_array_reads_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / ARRAYS_FILE
    written = _arrays()
    save_arrays(path, written)
    _same(load_arrays(path), written)


def test_structured_arrays_of_every_shape_read_back(tmp_path: Path) -> None:
    # A field holding an array, a nested record, padding (aligned), a titled field: each
    # comes back from the header's JSON as numpy wrote its descr.
    nested = np.zeros(3, dtype=[("a", "<f8", (3,)), ("b", [("c", "<i4"), ("d", "S4")])])
    nested["a"][1] = [1, 2, 3]
    nested["b"]["d"][2] = b"xy"
    aligned = np.array([(1, 5), (2, 6)], dtype=np.dtype([("x", "u1"), ("y", "<i8")], align=True))
    titled = np.array([(1, 0.5)], dtype=[(("a title", "n"), "<i4"), ("m", "<f4")])
    written = {"nested": nested, "aligned": aligned, "titled": titled}
    path = tmp_path / ARRAYS_FILE
    save_arrays(path, written)
    _same(load_arrays(path), written)


@pytest.mark.parametrize("name", ["content.type", "fortran", "timeline.times", "block.3.codes"])
def test_arrays_read_back_are_writable(tmp_path: Path, name: str) -> None:
    path = tmp_path / ARRAYS_FILE
    save_arrays(path, _arrays())
    array = load_arrays(path)[name]
    array.flat[0] = 1
    assert array.flat[0] == 1


def test_sign_codes_are_kept_as_they_are_and_the_rest_deflated(tmp_path: Path) -> None:
    codes = np.random.default_rng(2).integers(0, 2**63, (500, 6), dtype="u8")
    save_arrays(tmp_path / "codes", {"block.0.codes": codes})
    save_arrays(tmp_path / "column", {"content.type": np.zeros(codes.size * 8, dtype="i1")})
    assert codes.nbytes < (tmp_path / "codes").stat().st_size < codes.nbytes + 200
    assert (tmp_path / "column").stat().st_size < codes.nbytes // 20


def test_a_cut_short_or_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / ARRAYS_FILE
    save_arrays(path, _arrays())
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 100])
    with pytest.raises(ValueError, match=r"block\.3\.codes"):
        load_arrays(path)
    path.write_bytes(b"PK" + whole[2:])
    with pytest.raises(ValueError, match="not a checkpoint"):
        load_arrays(path)


def test_a_checkpoint_saved_as_npz_reads_back_as_numpy_reads_it(tmp_path: Path) -> None:
    written = _arrays()
    np.savez(tmp_path / NPZ_FILE, **written)  # the file older checkpoints hold
    with np.load(tmp_path / NPZ_FILE) as by_numpy:
        expected = {name: by_numpy[name] for name in by_numpy.files}
    read = load_checkpoint_arrays(tmp_path)
    _same(read, expected)
    assert load_npz_arrays(tmp_path / NPZ_FILE).keys() == read.keys()
    read["content.type"][0] = 3  # writable, as np.load gives
    save_arrays(tmp_path / ARRAYS_FILE, written)  # a newer save is read first
    _same(load_checkpoint_arrays(tmp_path), written)

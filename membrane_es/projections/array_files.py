"""The checkpoint's arrays in one ``.npz`` file: written deflated at level 1 (sign codes
stored as they are), read back all at once. Reading parses numpy's plain headers with a
pattern rather than numpy's parse of them as Python literals, which took most of the time a
small store's open spends on its checkpoint; anything else is read by numpy.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

# The header numpy writes for a plain array (format 1.0–3.0): read with a pattern, as
# ``np.load``'s parse of it as a Python literal takes most of a small store's open.
_NPY_HEADER = re.compile(
    r"\{'descr': '([<>|=][a-zA-Z][0-9]*)', 'fortran_order': (False|True), "
    r"'shape': \(((?:[0-9]+, ?)*[0-9]*)\), \}\s*"
)


def load_arrays(path: Path) -> dict[str, NDArray[Any]]:
    """Every array of an ``.npz`` file :func:`save_arrays` wrote, by name: writable
    arrays, as ``np.load`` would give (one it cannot read quickly is read by numpy)."""
    arrays: dict[str, NDArray[Any]] = {}
    with zipfile.ZipFile(path) as zipped:
        for info in zipped.infolist():
            name = info.filename.removesuffix(".npy")
            raw = bytearray(zipped.read(info))
            arrays[name] = _npy_array(raw)
    return arrays


def _npy_array(raw: bytearray) -> NDArray[Any]:
    """The array an ``.npy`` file holds, sharing ``raw``'s memory when its header is plain."""
    if raw[:6] == b"\x93NUMPY" and raw[6] in (1, 2, 3):
        length_bytes = 2 if raw[6] == 1 else 4
        start = 8 + length_bytes
        length = int.from_bytes(raw[8:start], "little")
        header = _NPY_HEADER.fullmatch(bytes(raw[start : start + length]).decode("latin1"))
        if header is not None:
            descr, fortran, dims = header.groups()
            shape = tuple(int(dim) for dim in dims.split(",") if dim.strip())
            count = 1
            for dim in shape:
                count *= dim
            flat = np.frombuffer(raw, dtype=np.dtype(descr), count=count, offset=start + length)
            return flat.reshape(shape, order="F" if fortran == "True" else "C")
    array: NDArray[Any] = np.lib.format.read_array(io.BytesIO(raw), allow_pickle=False)
    return array


def save_arrays(path: Path, arrays: dict[str, Any]) -> None:
    """``arrays`` as an ``.npz`` file (what ``np.load`` reads), deflated at level 1: the
    columns are times, enums and repeated defaults, which shrink about sixfold, at a tenth
    of the time numpy's own compressed save takes. Sign codes are stored as they are: they
    are random bits, which deflate only slows down."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zipped:
        for name, array in arrays.items():
            member_name: str | zipfile.ZipInfo = f"{name}.npy"
            if name.endswith(".codes"):
                member_name = zipfile.ZipInfo(f"{name}.npy")
                member_name.compress_type = zipfile.ZIP_STORED
            with zipped.open(member_name, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)

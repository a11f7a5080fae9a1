"""The checkpoint's arrays in one file, ``arrays.bin``: read back with one read and one
inflate, however many arrays it holds.

Layout: a magic line, the length of a msgpack header, the header (each array's name,
dtype, shape, order, and where its bytes are), then one deflated section (level 1) holding
every array but the sign codes, then the sign codes as they are (random bits, which
deflate only slows down). Each array starts on a 16-byte boundary of its section, so the
arrays read back share the two buffers' memory, aligned and writable, with no copy each.

Checkpoints saved before this format keep their arrays in ``arrays.npz`` (a zip of ``.npy``
members, read by :func:`load_npz_arrays`): a store written by an older version opens from
its checkpoint, and its next save writes ``arrays.bin``. Reading a zip member by member was
most of what a small store's open spent on its checkpoint (3 of 14 ms of CPU at 50 records).
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

ARRAYS_FILE = "arrays.bin"
NPZ_FILE = "arrays.npz"  # what checkpoints saved before arrays.bin hold
_MAGIC = b"membrane arrays 1\n"
_ALIGN = 16
_PACK_LEVEL = 1


class _Entry(msgspec.Struct, array_like=True, frozen=True):
    name: str
    dtype: str  # numpy's ``dtype.str`` (plain dtypes) or its ``descr`` (structured)
    shape: tuple[int, ...]
    fortran: bool
    packed: bool  # in the deflated section (else in the raw one)
    offset: int  # in its section
    size: int  # bytes


class _Header(msgspec.Struct, array_like=True, frozen=True):
    entries: list[_Entry]
    packed_size: int  # the deflated section's length in the file
    unpacked_size: int  # and inflated


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Header)


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def _dtype_text(dtype: np.dtype[Any]) -> str:
    return dtype.str if dtype.names is None else msgspec.json.encode(dtype.descr).decode()


def _dtype_of(text: str) -> np.dtype[Any]:
    if text.startswith("["):
        # numpy's own reading of a descr (padding fields included), once JSON's lists are
        # the tuples a descr is made of again.
        return np.lib.format.descr_to_dtype(_descr(msgspec.json.decode(text)))
    return np.dtype(text)


def _descr(fields: list[Any]) -> list[tuple[Any, ...]]:
    """A structured dtype's descr as JSON gave it back: each field ``[name, type, shape?]``
    a tuple again, at every depth (a nested dtype's type is a descr itself; a titled
    field's name is a ``[title, name]`` pair)."""
    found: list[tuple[Any, ...]] = []
    for name, kind, *shape in fields:
        found.append(
            (
                tuple(name) if isinstance(name, list) else name,
                _descr(kind) if isinstance(kind, list) else kind,
                *(tuple(size) for size in shape),
            )
        )
    return found


def save_arrays(path: Path, arrays: dict[str, Any]) -> None:
    """``arrays`` in one file at ``path`` (see the module's docstring); object arrays are
    refused (nothing a checkpoint keeps is one)."""
    entries: list[_Entry] = []
    sections: dict[bool, list[bytes]] = {True: [], False: []}
    ends = {True: 0, False: 0}
    for name, value in arrays.items():
        array = np.asanyarray(value)
        if array.dtype.hasobject:
            raise ValueError(f"array {name}: objects are not kept in a checkpoint")
        fortran = array.ndim > 1 and array.flags.f_contiguous and not array.flags.c_contiguous
        data = array.tobytes(order="F" if fortran else "C")
        packed = not name.endswith(".codes")
        offset = _aligned(ends[packed])
        if offset > ends[packed]:
            sections[packed].append(bytes(offset - ends[packed]))
        sections[packed].append(data)
        ends[packed] = offset + len(data)
        entries.append(
            _Entry(name, _dtype_text(array.dtype), array.shape, fortran, packed, offset, len(data))
        )
    unpacked = b"".join(sections[True])
    packed_bytes = zlib.compress(unpacked, _PACK_LEVEL)
    header = _ENCODER.encode(_Header(entries, len(packed_bytes), len(unpacked)))
    with path.open("wb") as file:
        file.write(_MAGIC)
        file.write(len(header).to_bytes(4, "little"))
        file.write(header)
        file.write(packed_bytes)
        for part in sections[False]:
            file.write(part)


def load_arrays(path: Path) -> dict[str, NDArray[Any]]:
    """Every array of a file :func:`save_arrays` wrote, by name: writable arrays."""
    raw = path.read_bytes()
    if not raw.startswith(_MAGIC):
        raise ValueError(f"{path} is not a checkpoint's arrays file")
    start = len(_MAGIC)
    length = int.from_bytes(raw[start : start + 4], "little")
    start += 4
    header = _DECODER.decode(raw[start : start + length])
    start += length
    unpacked = bytearray(zlib.decompress(raw[start : start + header.packed_size]))
    if len(unpacked) != header.unpacked_size:
        raise ValueError(f"{path}: its packed arrays are {len(unpacked)} bytes, not as said")
    loose = bytearray(raw[start + header.packed_size :])
    arrays: dict[str, NDArray[Any]] = {}
    for entry in header.entries:
        buffer = unpacked if entry.packed else loose
        if entry.offset + entry.size > len(buffer):
            raise ValueError(f"{path}: array {entry.name} runs past the end of the file")
        dtype = _dtype_of(entry.dtype)
        count = entry.size // dtype.itemsize if dtype.itemsize else 0
        flat = np.frombuffer(buffer, dtype=dtype, count=count, offset=entry.offset)
        arrays[entry.name] = flat.reshape(entry.shape, order="F" if entry.fortran else "C")
    return arrays


# --- checkpoints saved before arrays.bin ---------------------------------------------------

# The header numpy writes for a plain array (format 1.0–3.0): read with a pattern, as
# ``np.load``'s parse of it as a Python literal takes most of a small store's open.
_NPY_HEADER = re.compile(
    r"\{'descr': '([<>|=][a-zA-Z][0-9]*)', 'fortran_order': (False|True), "
    r"'shape': \(((?:[0-9]+, ?)*[0-9]*)\), \}\s*"
)


def load_npz_arrays(path: Path) -> dict[str, NDArray[Any]]:
    """Every array of an ``.npz`` file (what checkpoints held before ``arrays.bin``), by
    name: writable arrays, as ``np.load`` would give."""
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


def load_checkpoint_arrays(directory: Path) -> dict[str, NDArray[Any]]:
    """The arrays of the checkpoint in ``directory``: its ``arrays.bin``, or the
    ``arrays.npz`` of a checkpoint saved before that format."""
    if (directory / ARRAYS_FILE).exists():
        return load_arrays(directory / ARRAYS_FILE)
    return load_npz_arrays(directory / NPZ_FILE)

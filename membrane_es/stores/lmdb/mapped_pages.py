"""Giving back the pages of an LMDB map that the process has touched.

LMDB reads its file through a read-only shared memory map. Every page a read or a write's
B-tree descent touches becomes part of the process's resident set, and so do its neighbours:
on a fault the kernel maps what the page cache already holds around it ("fault-around": 16
pages, or on recent kernels whole large folios; measured on Linux 6.18 with ext4, one record
read mapped 0.8 to 2.5 MB). ``MADV_RANDOM`` (LMDB's ``readahead=False``), ``MADV_NOHUGEPAGE``
and ``MADV_SEQUENTIAL`` were measured not to change it. A writer inserting under random
record ids descends to a leaf at random for every record, and a search reads its results'
events wherever they lie, so a process that writes or reads a store for long enough comes
to map most of the file, though it needs none of it again.

:class:`MappedPages` unmaps them (``madvise(MADV_DONTNEED)``). On a shared file map that
drops the page-table entries only: the pages stay in the kernel's page cache, as the pages of
a file read with ``read()`` do, and the next touch maps the page again from there, without
I/O. Nothing written is lost: LMDB writes through ``pwrite`` (the map is never written to
without ``MDB_WRITEMAP``, which this package does not use). Where the map cannot be found
(not Linux: no ``/proc/self/maps``) nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Callable
from pathlib import Path

MAPS = Path("/proc/self/maps")
STATM = "/proc/self/statm"
DATA_FILE = "data.mdb"
# How many bytes of file pages the process may map beyond what it mapped right after the
# last release: a share of the file, with a floor. Unmapping every few reads gives back the
# B-tree's upper pages too, which the next reads fault in again: at a million records a
# release every 16 places (what a few reads visit) kept up to 34 MB mapped all the same,
# while releasing past 1/64 of the file kept as much with a third of the releases and a
# scattered read 0.8 ms faster. A share, so that a process serving many small stores keeps
# little of each mapped.
MAPPED_SHARE = 64
MAPPED_FLOOR = 4 << 20


def _madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise``, where there is one and the platform names ``MADV_DONTNEED``."""
    if not hasattr(mmap, "MADV_DONTNEED"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    call: Callable[[int, int, int], int] = madvise
    return call


_MADVISE = _madvise()


def find_map(data_file: str, size: int) -> int | None:
    """The address of the one mapping of ``data_file`` (a real path) that is ``size`` bytes
    long, or None when there is no such single mapping to be found."""
    try:
        lines = MAPS.read_text().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == data_file:
            start, end = (int(part, 16) for part in fields[0].split("-"))
            if end - start == size:
                found.append(start)
    return found[0] if len(found) == 1 else None


class MappedPages:
    """Unmaps the pages of one environment's map (see the module's docstring).

    The caller keeps the map where it is while :meth:`release` runs (no resize, no close:
    :class:`~membrane_es.stores.lmdb.environment.LMDBEnvironment` holds its gate) and calls
    :meth:`moved` whenever the map may have been replaced (after a resize).
    """

    def __init__(self, directory: str) -> None:
        self._data_file = os.path.join(directory, DATA_FILE)
        self._address: int | None = None
        self._size = 0
        self.releases = 0
        self._page_size = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._mapped_after_release: int | None = None  # bytes of file pages then mapped

    def due(self) -> bool:
        """Whether the process maps more file pages than the budget allows over what it
        mapped right after the last release (always, where that cannot be read)."""
        if self._mapped_after_release is None:
            return True
        mapped = _file_pages_mapped(self._page_size)
        try:
            budget = max(MAPPED_FLOOR, os.path.getsize(self._data_file) // MAPPED_SHARE)
        except OSError:
            return True
        return mapped is None or mapped - self._mapped_after_release > budget

    def moved(self) -> None:
        """The map was (or may have been) replaced: find it again before the next release."""
        self._address = None
        self._size = 0

    def release(self, map_size: int) -> bool:
        """Unmap every page of the map (``map_size`` bytes); returns whether it was done."""
        if _MADVISE is None:
            return False
        if self._address is None or self._size != map_size:
            self._address = find_map(self._data_file, map_size)
            self._size = map_size
        if self._address is None:
            return False
        if _MADVISE(self._address, map_size, mmap.MADV_DONTNEED) != 0:
            # The map was not where it was found: look again next time, unmap nothing now.
            self.moved()
            return False
        self.releases += 1
        self._mapped_after_release = _file_pages_mapped(self._page_size)
        return True


def _file_pages_mapped(page_size: int) -> int | None:
    """Bytes of file (and shared) pages in the process's resident set: ``statm``'s third
    field, a cheap read (``smaps`` would say which file, at the cost of a walk of every
    mapping). Other files' pages count too: they only bring a release earlier."""
    try:
        with open(STATM, "rb") as statm:
            fields = statm.read().split()
        return int(fields[2]) * page_size
    except (OSError, IndexError, ValueError):
        return None

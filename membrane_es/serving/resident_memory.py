"""How much memory this process holds, and giving freed memory back to the system.

A memory budget for open stores is kept against the process's resident set (what the system
counts against it), read from ``/proc/self/statm`` where there is one. After stores close,
glibc keeps the freed heap for reuse; :func:`give_back_freed_memory` asks it to return what
it can, so the resident set the budget is checked against falls when stores are closed.

That is not enough by itself. glibc serves a block of 128 KiB or more from a mapping of its
own (returned whole when freed), but each time such a block is freed it raises that threshold
to the block's size, so the next store's blocks of that size come from the heap instead, among
small objects that outlive them: a process that opens and closes stores keeps growing
(measured: +100 MiB over 150 stores closed with 50 open). :func:`keep_large_blocks_apart`
fixes the threshold at 1 MiB (flat: +4 MiB over the same 150; at 4 MiB it still grew). Its
price: a temporary array of 1 MiB or more is mapped afresh each time (a 4 MB one doubled the
time of a 100,000-vector scoring loop), so it is set only once stores are being closed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path

_STATM = Path("/proc/self/statm")


def resident_bytes() -> int | None:
    """This process's resident set in bytes, or ``None`` where the system does not say."""
    try:
        fields = _STATM.read_text().split()
    except OSError:
        return None
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


def open_descriptors() -> int | None:
    """How many file descriptors this process holds, or ``None`` where the system does not
    list them."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
        return trim
    except (OSError, AttributeError):  # not glibc
        return None


# mallopt's parameter for the size from which a block gets a mapping of its own; setting it
# also turns off glibc's raising of it (mallopt(3)).
_M_MMAP_THRESHOLD = -3
_LARGE_BLOCK = 1024 * 1024


@cache
def keep_large_blocks_apart() -> bool:
    """Give every block of 1 MiB or more a mapping of its own for the life of the process
    (glibc's ``mallopt(M_MMAP_THRESHOLD)``), so freeing it returns it to the system; returns
    whether that was done (not on other C libraries). Once per process."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt: Callable[[int, int], int] = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _LARGE_BLOCK))


def give_back_freed_memory() -> None:
    """Return freed heap pages to the system (glibc's ``malloc_trim``; nothing elsewhere)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)

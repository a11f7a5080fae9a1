"""How much memory this process holds, and giving freed memory back to the system.

A memory budget for open stores is kept against the process's resident set (what the system
counts against it), read from ``/proc/self/statm`` where there is one. After stores close,
glibc keeps the freed heap for reuse; :func:`give_back_freed_memory` asks it to return what
it can, so the resident set the budget is checked against falls when stores are closed.
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


def give_back_freed_memory() -> None:
    """Return freed heap pages to the system (glibc's ``malloc_trim``; nothing elsewhere)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)

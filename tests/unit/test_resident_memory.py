"""The process's resident memory, read where the system says it, and glibc told to keep
large blocks in mappings of their own (so closed stores' arrays go back to the system)."""

from __future__ import annotations

import ctypes.util
import os
import platform

import pytest

from membrane_es.serving.resident_memory import (
    keep_large_blocks_apart,
    open_descriptors,
    resident_bytes,
)

linux_glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="glibc on Linux",
)


@linux_glibc
def test_glibc_keeps_large_blocks_apart_once_per_process() -> None:
    assert ctypes.util.find_library("c") is not None
    assert keep_large_blocks_apart() is True
    assert keep_large_blocks_apart() is True  # done once: the answer is remembered


@linux_glibc
def test_resident_set_and_descriptors_are_read_from_proc() -> None:
    resident = resident_bytes()
    assert resident is not None and resident > 0
    opened = open_descriptors()
    assert opened is not None
    descriptor = os.open(os.devnull, os.O_RDONLY)
    try:
        assert open_descriptors() == opened + 1
    finally:
        os.close(descriptor)

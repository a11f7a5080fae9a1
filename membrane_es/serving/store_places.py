"""Where a new store may be made, and saying so.

A write to a path that holds no store makes one there, as Membrane's daemon does with its
``-db`` — but only inside a directory that exists: a mistyped path is then an error naming
the missing directory, and nothing is created. A store that is made is announced on standard
error with its full path, so a typo never silently becomes an empty store that answers every
read with nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from membrane_es.engine import StoreAddress, holds_store
from membrane_es.errors import ValidationError


def check_new_store_place(path: Path, field: str) -> bool:
    """True when ``path`` holds no store yet, so opening it for writing makes one; False when
    it holds one. A path whose parent directory is missing, or that is a file, is a
    :class:`~membrane_es.errors.ValidationError` on ``field`` (nothing is created)."""
    if holds_store(path):
        return False
    if path.exists() and not path.is_dir():
        raise ValidationError(field, f"{path} is a file, not a store directory")
    parent = Path(os.path.abspath(path)).parent
    if not parent.is_dir():
        raise ValidationError(
            field,
            f"no directory {parent}: a new store is made only inside a directory that exists "
            "(check the path, or create the directory first)",
        )
    return True


@contextmanager
def announced_if_new(
    place: str | os.PathLike[str] | StoreAddress, field: str, stream: TextIO | None = None
) -> Iterator[None]:
    """Around the opening of ``place`` for writing: a directory is checked first
    (:func:`check_new_store_place`), and when the open made a new store there, ``created a new
    store at <full path>`` on standard error (or ``stream``). A database or memory is not a
    place on this machine's disk: nothing is checked or said."""
    address = StoreAddress.parse(place)
    if address.path is None:
        yield
        return
    directory = address.path
    new = check_new_store_place(directory, field)
    yield
    if new and holds_store(directory):
        print(f"created a new store at {directory.resolve()}", file=stream or sys.stderr)

"""The approximate index's file in a read-view checkpoint: written without holding up
searches, and kept from one checkpoint to the next while little was added.

At a million records the index's file holds about 400 MB (each vector's 8-bit code and row).
A checkpoint is written every minute while writes come in, so:

- **Little added since the file was written: it is kept.** The new checkpoint takes the
  previous one's file as it is (a hard link: no byte copied, and the file is part of the new
  checkpoint, covered by its seal like any other), and its manifest says which rows the file
  holds (``rows_below``, its log ``position``) and which of them were erased since. An open
  loads the file, erases those rows again in the order they were erased, and adds the rows
  written after the file from the log — only their vectors, read by key where the log can —
  then the log's tail after the checkpoint as always. The index is then the one the
  checkpoint saw (its size and rows are checked; any mismatch, a file another process
  replaced or a damaged one: the index is built again from the blocks, as before).
- **Otherwise it is written again**, from a copy of the index taken under the read views'
  lock (a memory copy, well under a second at a million records; searches go on meanwhile:
  the copy only reads the index), and written to disk after that lock is released, with the
  checkpoint's seal: a search never waits for the file to reach the disk.

"Little" is at most :data:`KEEP_MIN_ROWS` rows, or a :data:`KEEP_SHARE` th of the file's
vectors (at a million, 62,500: about two seconds of reading by key at an open).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections import approximate
from membrane_es.projections.approximate import ApproximateIndex

logger = logging.getLogger(__name__)

Array = npt.NDArray[Any]
# The vectors of these rows (ascending), from the log, whose creations all come after the
# given log position.
FetchAfter = Callable[[Array, int], Array]

KEEP_MIN_ROWS = 4096
KEEP_SHARE = 16
Identity = tuple[int, int, int, int]  # device, inode, bytes, modification time (ns)


@dataclass(frozen=True)
class IndexFile:
    """A file holding the index as it was when a checkpoint at ``position`` wrote it: every
    vector of the rows under ``rows_below``, ``size`` of them; ``identity``: the file's, to
    know it again in a later checkpoint (None: not known, never kept)."""

    identity: Identity | None
    rows_below: int
    size: int
    position: int

    def held(self) -> dict[str, int]:
        return {"rows_below": self.rows_below, "size": self.size, "position": self.position}


def identity_of(path: Path) -> Identity | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


class FileWrite:
    """One checkpoint's index file, decided under the views' lock (:func:`prepare`): kept
    (linked already) or a copy to write (:meth:`write`, after the lock is released); once
    the checkpoint is in place, :meth:`settle` tells the index which file it now has."""

    def __init__(
        self,
        index: ApproximateIndex,
        held: dict[str, Any],
        copy: Any = None,
        file: IndexFile | None = None,
        noted: int = 0,
    ) -> None:
        self.index = index
        self.held = held  # what the manifest says of the file
        self._copy = copy
        self._file = file
        self._noted = noted

    @property
    def kept(self) -> bool:
        return self._file is None

    def write(self, path: Path) -> None:
        """Write the copy (if the file is not kept) to ``path``."""
        copy, self._copy = self._copy, None
        if copy is not None:
            write_index(copy, path)

    def settle(self, path: Path) -> None:
        """The checkpoint holding the file is in place at ``path``."""
        file = self._file
        if file is not None:
            written = IndexFile(identity_of(path), file.rows_below, file.size, file.position)
            self.index.mark_written(written, self._noted)


def write_index(index: Any, path: Path) -> None:
    """FAISS's own format, straight to the file (no second copy in memory)."""
    approximate.faiss.write_index(index, str(path))


def prepare(index: ApproximateIndex, previous: Path, path: Path, position: int) -> FileWrite:
    """The index's file for a checkpoint at ``position`` (under the views' lock: nothing
    changes the index meanwhile): the previous checkpoint's file, linked to ``path``, when
    it is the one the index was last written to and little was added since; else a copy of
    the index to write there."""
    rows_below, size, erasures = index.held()
    mark = index.file
    if (
        mark is not None
        and mark.identity is not None
        and _little(mark, rows_below, len(erasures))
        and identity_of(previous) == mark.identity
    ):
        try:
            os.link(previous, path)
        except OSError:  # a file system without hard links: written again
            pass
        else:
            held = {
                "rows_below": rows_below,
                "size": size,
                "file": mark.held(),
                "erased": [list(pair) for pair in erasures],
            }
            return FileWrite(index, held)
    copy, rows_below, size, noted = index.snapshot()
    file = IndexFile(None, rows_below, size, position)
    held = {"rows_below": rows_below, "size": size, "file": file.held(), "erased": []}
    return FileWrite(index, held, copy, file, noted)


def _little(mark: IndexFile, rows_below: int, erased: int) -> bool:
    """Whether what changed since the file (rows added, at most; rows erased) is little."""
    changed = max(0, rows_below - mark.rows_below) + erased
    return changed <= max(KEEP_MIN_ROWS, mark.size // KEEP_SHARE)


def load(
    data: bytes,
    held: dict[str, Any],
    path: Path,
    dimensions: int,
    block_rows: Array,
    fetch: FetchAfter,
) -> ApproximateIndex | None:
    """The index a checkpoint holds: its file (trained as ``data`` says), with the rows
    erased since it was written erased again and the rows written since (those of
    ``block_rows``, every row the checkpoint's blocks hold, at or past the file's) added
    from the log by ``fetch``, in the order they were; None when that is not the index the
    checkpoint saw (it is then built again from the blocks)."""
    whole = {"rows_below": int(held["rows_below"]), "size": int(held["size"])}
    file = held.get("file") or {**whole, "position": 0}  # a file covering the checkpoint
    index = ApproximateIndex.loaded(data, file, path, dimensions)
    if index is None:
        return None
    first = int(file["rows_below"])
    gap = np.sort(block_rows[block_rows >= first])
    erased = [(int(row), int(below)) for row, below in held.get("erased", [])]
    if len(gap) or erased:
        try:
            vectors = fetch(gap, int(file["position"])) if len(gap) else np.zeros((0, dimensions))
        except Exception:  # noqa: BLE001 - the blocks' read reports the log's damage
            logger.warning("the approximate index's file not brought up to date", exc_info=True)
            return None
        done = 0
        for row, below in erased:
            # Each erasure after the rows added before it, as it was applied.
            upto = int(np.searchsorted(gap, below))
            if upto > done:
                index.add(gap[done:upto], vectors[done:upto])
                done = upto
            if row < first:  # rows added since read as erased from the log: never added
                index.erase(row)
        if done < len(gap):
            index.add(gap[done:], vectors[done:])
    if index.size != whole["size"] or index.rows_below != whole["rows_below"]:
        logger.warning("the approximate index's file does not match its checkpoint")
        return None
    index.erasures = erased
    index.file = IndexFile(
        identity_of(path), first, int(file["size"]), int(file.get("position", 0))
    )
    return index

"""Read-view checkpoints a restart can trust.

A checkpoint is *sealed*: a digest of every file in it, of the log position it reflects and
of the log's chain hash at that position, written inside it before it replaces the last one.
On open a checkpoint is used only if its seal matches its files and the log still holds that
chain hash at that position; otherwise it is discarded (and logged) and the views are
rebuilt from the log — never trusted. In a store with a keyed chain the digest is keyed with
the same key, so nobody without it can forge a seal; with a plain chain the seal catches
damage and naive edits, not someone who recomputes it.

Writing a checkpoint on a full disk fails before the new one replaces the last (which stays
as it was), and leaves no partial files behind. Processes sharing a store take turns: a save
holds an exclusive lock on the checkpoint directory, a load a shared one.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from membrane_es.errors import IntegrityError, StorageFullError
from membrane_es.projections.log_pages import NotificationSource
from membrane_es.projections.read_model import ReadModel

SEAL_FILE = "seal"
LOCK_FILE = "lock"
_CHUNK = 1 << 20

log = logging.getLogger("membrane_es")


def _disk_full(error: OSError | sqlite3.Error) -> bool:
    if isinstance(error, OSError):
        return error.errno in (errno.ENOSPC, errno.EDQUOT)
    return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "full" in str(error)


class _Seal(msgspec.Struct, frozen=True):
    position: int
    tie: str  # the log's chain hash at ``position`` (hex; empty for a log without a chain)
    digest: str


class Checkpoints:
    """Saves and loads the read views of one store in ``directory``, sealed.

    :param hash_at: the log's chain hash at a notification id (None: the log keeps no chain).
    :param key: the chain key (empty: a plain chain).
    """

    def __init__(
        self, directory: Path, hash_at: Callable[[int], bytes] | None, key: bytes = b""
    ) -> None:
        self.directory = directory
        self._hash_at = hash_at
        self._key = key

    def save(self, views: ReadModel) -> None:
        """Write a sealed checkpoint of ``views``; on failure the last one stays in place."""
        try:
            with self._locked(fcntl.LOCK_EX):
                views.save(self.directory, self._seal)
        except (OSError, sqlite3.Error) as error:
            shutil.rmtree(self.directory / "staging", ignore_errors=True)
            if isinstance(error, StorageFullError) or not _disk_full(error):
                raise
            raise StorageFullError(
                errno.ENOSPC, f"no space left to checkpoint the read views: {error}"
            ) from error

    def load(self, source: NotificationSource) -> ReadModel | None:
        """The checkpointed views, if their seal holds; None (after discarding them) if not.
        ``source``: the log the views follow (their vectors are read from it)."""
        if not (self.directory / "current").exists():
            return None
        with self._locked(fcntl.LOCK_SH):
            return self._load(source)

    @contextmanager
    def _locked(self, mode: int) -> Iterator[None]:
        """Hold the checkpoint directory's lock (``flock``: released if the process dies)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / LOCK_FILE).open("a") as lock:
            fcntl.flock(lock, mode)
            yield  # closing the file releases the lock

    def _load(self, source: NotificationSource) -> ReadModel | None:
        current = self.directory / "current"
        if not current.exists():
            return None
        try:
            seal = msgspec.json.decode((current / SEAL_FILE).read_bytes(), type=_Seal)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return self._discard("it has no readable seal")
        try:
            tie = self._tie(seal.position)
        except IntegrityError:
            return self._discard(f"the log has no notification {seal.position}")
        if tie.hex() != seal.tie:
            return self._discard(f"the log at notification {seal.position} is not the one seen")
        if self._digest(current, seal.position, tie).hex() != seal.digest:
            return self._discard("its files do not match its seal")
        try:
            model = ReadModel.load(self.directory, source)
        except Exception as error:  # sealed but unreadable (e.g. an older format): rebuild
            return self._discard(f"it could not be read ({type(error).__name__}: {error})")
        if model is None or model.position != seal.position:
            return self._discard("its manifest does not match its seal")
        return model

    def _seal(self, staging: Path, position: int) -> None:
        tie = self._tie(position)
        seal = _Seal(position, tie.hex(), self._digest(staging, position, tie).hex())
        (staging / SEAL_FILE).write_bytes(msgspec.json.encode(seal))

    def _tie(self, position: int) -> bytes:
        return b"" if self._hash_at is None else self._hash_at(position)

    def _digest(self, directory: Path, position: int, tie: bytes) -> bytes:
        digest = hashlib.blake2b(digest_size=32, key=self._key)
        digest.update(position.to_bytes(8, "big") + tie)
        for path in sorted(directory.iterdir()):
            if path.name == SEAL_FILE or not path.is_file():
                continue
            name = path.name.encode()
            digest.update(len(name).to_bytes(4, "big") + name)
            digest.update(path.stat().st_size.to_bytes(8, "big"))
            with path.open("rb") as file:
                while chunk := file.read(_CHUNK):
                    digest.update(chunk)
        return digest.digest()

    def _discard(self, why: str) -> ReadModel | None:
        """Remove the checkpoint (logged); None, for the caller to return."""
        log.warning("read-view checkpoint in %s discarded (%s): rebuilding", self.directory, why)
        ReadModel.discard(self.directory)
        return None

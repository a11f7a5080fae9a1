"""A keys file's changes take effect without a restart.

The daemon watches its keys file (:mod:`membrane_es.access.keys`): when the file changes — or on
SIGHUP — it is read again and, if it is valid, its keys replace the old ones at once (a call
sees the old keys or the new, never a mix). A file that cannot be read or is malformed keeps
the old keys in force, and the log says why. A new tenant's key works at once (its store is
made by its first write); a removed key is refused from its next call on.

Writing the file in place can be seen half-written; a change is read only once the file has
stayed the same for a moment, and writing a new file then renaming it over the old one is
safest (what ``mv`` and most deploy tools do).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from membrane_es.access.keys import KeyRing
from membrane_es.errors import ValidationError

log = logging.getLogger("membrane_es.keys")

POLL_SECONDS = 1.0  # how often the file's size, time and inode are looked at
SETTLE_SECONDS = 0.2  # a change is read once the file has stayed the same this long

_Signature = tuple[int, int, int] | None


class KeysFileWatcher:
    """Reloads ``path`` into ``keys`` when it changes (a thread) or when asked (SIGHUP)."""

    def __init__(
        self, keys: KeyRing, shared_key: str, path: str | Path, poll: float = POLL_SECONDS
    ) -> None:
        self._keys = keys
        self._shared_key = shared_key
        self._path = Path(path)
        self._poll = poll
        self._seen = _signature(self._path)
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one reload at a time
        self._thread: threading.Thread | None = None
        self.reloads = 0  # reloads that took effect
        self.refusals = 0  # reloads refused, the old keys kept

    def start(self) -> KeysFileWatcher:
        self._thread = threading.Thread(target=self._watch, name="membrane-keys", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def reload(self) -> bool:
        """Read the file now; True if its keys took effect, False if the old ones stay."""
        with self._lock:
            self._seen = _signature(self._path)
            try:
                fresh = KeyRing.load(self._shared_key, self._path)
            except ValidationError as error:
                self.refusals += 1
                log.error(
                    "keys file %s not reloaded, the previous keys stay: %s", self._path, error
                )
                return False
            self._keys.replace(fresh)
            self.reloads += 1
            log.info(
                "keys file %s reloaded: %d keys, %d tenants",
                self._path,
                len(fresh),
                len(fresh.tenants),
            )
            return True

    def _watch(self) -> None:
        while not self._stop.wait(self._poll):
            now = _signature(self._path)
            if now == self._seen:
                continue
            # Changed: read it once it has stopped changing (a write in progress is skipped).
            if self._stop.wait(SETTLE_SECONDS) or _signature(self._path) != now:
                continue
            try:
                self.reload()
            except Exception:  # the watch must outlive one bad read
                log.exception("keys file %s: reload failed", self._path)


def _signature(path: Path) -> _Signature:
    """What changes when the file is written or replaced (``None``: no file)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

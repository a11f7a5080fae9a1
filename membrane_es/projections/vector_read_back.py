"""Reading a checkpoint's embedding blocks back from the log on a thread of its own.

An open from a checkpoint leaves every block's vectors in the log until a search first needs
them (:meth:`membrane_es.projections.embeddings.EmbeddingIndex.restore_later`). Reading them
all back in the background — once a read has shown they will be wanted, or once a server has
started — lets later searches find them in memory; a search that needs a scope not read yet
meanwhile reads it itself (after the scope being read). The thread is started only when some
block is still to be read: an open with nothing left in the log (a new store, a store whose
blocks were read) starts none.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)


class Unread(Protocol):
    """What is read back: the scopes whose blocks are still in the log, read one at a time."""

    def unread_scopes(self) -> list[int]: ...

    def read_scope(self, scope: int) -> None: ...


def start_read_back(
    index: Unread, stopped: Callable[[], bool], name: str = "membrane-vectors-read-back"
) -> threading.Thread | None:
    """Read every block of ``index`` not read yet back, a scope at a time, on a daemon
    thread, until done or ``stopped()`` (checked before each scope); the running thread, or
    None when there is nothing to read (no thread is started)."""
    if not index.unread_scopes() or stopped():
        return None
    thread = threading.Thread(target=_read_all, args=(index, stopped), name=name, daemon=True)
    thread.start()
    return thread


def _read_all(index: Unread, stopped: Callable[[], bool]) -> None:
    try:
        for scope in index.unread_scopes():
            if stopped():
                return
            index.read_scope(scope)
    except Exception as error:  # the log closed or damaged under it: a search reads it itself
        if not stopped():
            logger.warning("vectors not read back in the background: %s", error)

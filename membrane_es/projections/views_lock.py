"""The read views' lock: held alone by whatever changes the views, shared by what only
reads them while others read too.

Applying events (a catch-up, a write followed, an erasure) changes the views and holds the
lock alone, as a re-entrant lock (``with views.lock:``). A checkpoint only reads them, for as
long as it takes to write their files (seconds at a million records), and a read takes its
snapshot in a moment: both hold it shared (``with views.lock.shared():``), so a search takes
its snapshot while a checkpoint writes, where it used to wait for the whole checkpoint.
Events wait for both, as they waited for a checkpoint before.

A thread holding the lock alone may take it shared as well (it is then still alone); a
thread holding it shared may not take it alone (it would wait for itself): that is an error.
Readers do not queue behind a waiting writer: shared holds are short (a snapshot) or rare (a
checkpoint), and a writer gets in between them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType


class ViewsLock:
    """Re-entrant exclusive holds (``with lock:``) and shared ones (:meth:`shared`)."""

    def __init__(self) -> None:
        self._state = threading.Condition(threading.Lock())
        self._owner: int | None = None  # the thread holding it alone
        self._depth = 0  # how many times it holds it alone
        self._readers: dict[int, int] = {}  # shared holds by thread

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = threading.get_ident()
        with self._state:
            if self._owner == me:
                self._depth += 1
                return True
            if me in self._readers:
                raise RuntimeError("the views' lock is held shared by this thread: not alone")
            free = (
                self._state.wait_for(
                    lambda: self._owner is None and not self._readers,
                    None if timeout < 0 else timeout,
                )
                if blocking
                else (self._owner is None and not self._readers)
            )
            if not free:
                return False
            self._owner, self._depth = me, 1
            return True

    def release(self) -> None:
        with self._state:
            if self._owner != threading.get_ident():
                raise RuntimeError("the views' lock is not held alone by this thread")
            self._depth -= 1
            if not self._depth:
                self._owner = None
                self._state.notify_all()

    def __enter__(self) -> bool:
        me = threading.get_ident()
        depth = self._depth if self._owner == me else 0  # only this thread changes it then
        try:
            return self.acquire()
        except BaseException:
            # An interrupt (Ctrl-C's KeyboardInterrupt) can land after the lock was taken and
            # before the ``with`` block is entered, whose exit would then never release it.
            if self._owner == me and self._depth > depth:
                self.release()
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the lock shared: no event is applied meanwhile; other readers read on."""
        me = threading.get_ident()
        counted = False
        try:
            # Counted inside the ``try``: an interrupt landing right after the count still
            # takes it back (a count left behind would keep every writer waiting).
            with self._state:
                if self._owner != me:  # held alone already: nothing else to wait for
                    self._state.wait_for(lambda: self._owner is None)
                    self._readers[me] = self._readers.get(me, 0) + 1
                    counted = True
            yield
        finally:
            if counted:
                with self._state:
                    left = self._readers[me] - 1
                    if left:
                        self._readers[me] = left
                    else:
                        del self._readers[me]
                        self._state.notify_all()

"""Shared LMDB environments: one per data directory per process, with group commit.

Package-private support for :mod:`membrane_es.stores.lmdb.recorders`. An :class:`LMDBEnvironment`
owns one ``lmdb.Environment`` and everything that must be coordinated per
environment inside one process: the single write path (group commit), map growth,
named sub-database handles, subscription wake-ups and closing.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import lmdb
from eventsourcing.persistence import (
    DataError,
    InterfaceError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
)
from eventsourcing.persistence import IntegrityError as ConcurrentWrite

from membrane_es.errors import IntegrityError, StorageFullError
from membrane_es.stores.lmdb.mapped_pages import MappedPages

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    Txn = lmdb.Transaction[bytes]
    BufferTxn = lmdb.Transaction[memoryview]

T = TypeVar("T")
X = TypeVar("X", "Txn", "BufferTxn")

DEFAULT_MAP_SIZE = 64 * 1024 * 1024
DEFAULT_MAX_DBS = 128
DEFAULT_MAX_READERS = 256
# Doubling stops here so that a runaway writer fails instead of reserving the
# whole address space.
MAX_MAP_SIZE = 1 << 40
# Other processes cannot signal us, so subscriptions poll the environment's last
# transaction id while at least one is active: every POLL_INTERVAL while the store has seen a
# commit in the last QUIET_AFTER seconds (a follower then learns of another process's commit
# within a few ms: the lag a consumer there sees), every IDLE_POLL_INTERVAL once it has been
# quiet that long (a first commit after a pause waits up to that). A poll
# opens one read transaction (some µs): at 200 a second, well under 1% of a core.
POLL_INTERVAL = 0.005
IDLE_POLL_INTERVAL = 0.025
QUIET_AFTER = 10.0
# The map's pages the process touched are unmapped (see mapped_pages) when they are past
# their budget (MappedPages.due), which is looked at once this many
# places of the file were visited since the last time: a read transaction or a commit is one,
# and a write's work counts what it visits (an append: each event it writes). Measured at
# 100,000 records: one record read mapped up to 2.5 MB and a commit of 1,000 records under
# random ids 40 % of the file; counted this way neither maps more than some tens of MB before
# it is given back. Unmapping costs one system call, and a page needed again comes back from
# the page cache without I/O, but mapping it again costs a fault: a read by id (record cache
# emptied) took 87-159 µs unmapping every 8 places against 73-80 µs every 32 or never.
RELEASE_EVERY = 16


# LMDB reports a short write (a disk that filled up mid-commit) as EIO, not ENOSPC: an I/O
# error on a store with less free space than this is taken for a full disk.
FULL_BELOW_BYTES = 64 * 1024 * 1024


# Errors of the caller's making, or limits to raise: eventsourcing's kinds, as before.
_PROGRAMMING = (
    lmdb.NotFoundError,
    lmdb.BadDbiError,
    lmdb.BadRslotError,
    lmdb.InvalidParameterError,
    lmdb.EnvEncryptionError,
)
_OPERATIONAL = (
    lmdb.MapFullError,
    lmdb.MapResizedError,
    lmdb.DbsFullError,
    lmdb.ReadersFullError,
    lmdb.TxnFullError,
    lmdb.CursorFullError,
    lmdb.TlsFullError,
    lmdb.ReadonlyError,
    lmdb.LockError,
    lmdb.MemoryError,
)


def translate_error(error: lmdb.Error, path: str | None = None) -> Exception:
    """Return the exception that corresponds to an LMDB error: a full disk
    (:class:`~membrane_es.errors.StorageFullError`), a damaged file — anything LMDB reports
    of the file itself, and any fault it has no name for (an I/O error) —
    (:class:`~membrane_es.errors.IntegrityError`, saying what to do), else eventsourcing's
    error for a conflicting write, a bad value, a misuse or a limit.

    ``path`` (the store's directory) lets an I/O error on a nearly full disk count as full.
    """
    if isinstance(error, lmdb.DiskError) or _short_write(error, path):
        full = StorageFullError(
            errno.ENOSPC, f"no space left on the device holding the store: {error}"
        )
        full.__cause__ = error
        return full
    kind: type[PersistenceError]
    if isinstance(error, lmdb.KeyExistsError):
        kind = ConcurrentWrite
    elif isinstance(error, lmdb.BadValsizeError):
        kind = DataError
    elif isinstance(error, _PROGRAMMING):
        kind = ProgrammingError
    elif isinstance(error, _OPERATIONAL) or _environment_problem(error):
        kind = OperationalError
    else:
        # Everything else is the file itself: a damaged page or meta page (MDB_CORRUPTED,
        # MDB_PAGE_NOTFOUND, MDB_PAGE_FULL…), a transaction a failed page read left unusable
        # (MDB_BAD_TXN), an environment that panicked, an I/O error. It reaches the user as
        # the engine's IntegrityError, never as a bare storage error.
        where = f" in {path}" if path else ""
        damaged = IntegrityError(
            f"the store file is damaged{where}: {error}. Run `membrane-es verify` on the store "
            "to find the first bad record; restore data.mdb, with keys.sqlite, from a backup"
        )
        damaged.__cause__ = error
        return damaged
    translated = kind(str(error))
    translated.__cause__ = error
    return translated


# What LMDB reports through the operating system's errors that says nothing of the file's
# contents: a permission, a missing directory, a read-only or exhausted system.
_ENVIRONMENT_ERRNOS = (
    errno.EACCES,
    errno.EPERM,
    errno.ENOENT,
    errno.ENOTDIR,
    errno.EROFS,
    errno.EAGAIN,
    errno.EMFILE,
    errno.ENFILE,
    errno.ENOMEM,
    errno.EBUSY,
    errno.EINVAL,
)


def _environment_problem(error: lmdb.Error) -> bool:
    """Whether an error LMDB has no class of its own for is one of the environment's (an
    operating system error other than I/O), not damage."""
    if type(error) is not lmdb.Error:
        return False
    text = str(error)
    return any(os.strerror(code) in text for code in _ENVIRONMENT_ERRNOS)


def _short_write(error: lmdb.Error, path: str | None) -> bool:
    if path is None or os.strerror(errno.EIO) not in str(error):
        return False
    try:
        stats = os.statvfs(path)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < FULL_BELOW_BYTES


class _Gate:
    """Many readers or one exclusive holder (used for set_mapsize and close).

    LMDB requires that no transaction is open in this process while the map is
    resized or the environment closed; readers hold the gate shared for the few
    microseconds of a read transaction.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._readers = 0
        self._exclusive = False

    def enter(self) -> None:
        with self._lock:
            while self._exclusive:
                self._changed.wait()
            self._readers += 1

    def leave(self) -> None:
        with self._lock:
            self._readers -= 1
            if self._readers == 0 and self._exclusive:
                self._changed.notify_all()

    def __enter__(self) -> None:
        """Hold the gate exclusively."""
        with self._lock:
            while self._exclusive:
                self._changed.wait()
            self._exclusive = True
            while self._readers:
                self._changed.wait()

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._exclusive = False
            self._changed.notify_all()


class _Batch(Generic[T]):
    """One caller's unit of work waiting for (or included in) a group commit."""

    __slots__ = ("work", "channel", "done", "ok", "value")

    def __init__(self, work: Callable[[Txn], T], channel: str | None) -> None:
        self.work = work
        self.channel = channel
        self.done = False
        self.ok = False
        self.value: Any = None

    def outcome(self) -> T:
        if self.ok:
            return self.value
        raise self.value


class _Rollback(Exception):  # noqa: N818 - control flow, never escapes
    """Abort the group's transaction because no batch in it succeeded."""


class _ReadTxn(Generic[X]):
    """Context manager giving a short read transaction; see LMDBEnvironment.reading()."""

    __slots__ = ("_store", "_txn", "_buffers", "_counts")
    _txn: X

    def __init__(self, store: LMDBEnvironment, buffers: bool, counts: bool = True) -> None:
        self._store = store
        self._buffers = buffers
        self._counts = counts  # whether it visits the file (see LMDBEnvironment.touched)

    def __enter__(self) -> X:
        store = self._store
        while True:
            store.gate.enter()
            try:
                if store.closed:
                    raise InterfaceError(f"LMDB store is closed: {store.path}")
                txn = store.env.begin(buffers=True) if self._buffers else store.env.begin()
                self._txn = cast("X", txn)  # the kind reading() or reading_buffers() promised
                return self._txn
            except lmdb.MapResizedError:
                # Another process grew the map past our mapping; adopt its size.
                store.gate.leave()
                store.adopt_map_size()
            except lmdb.Error as e:
                store.gate.leave()
                raise translate_error(e) from e
            except BaseException:
                store.gate.leave()
                raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._txn.abort()
            if self._counts:
                self._store.touched()
        finally:
            self._store.gate.leave()
        if isinstance(exc, lmdb.Error):
            raise translate_error(exc) from exc


class _Listener:
    """Subscriptions of one notification log, and how to read that log's head."""

    __slots__ = ("events", "head", "seen")

    def __init__(self, head: Callable[[], int]) -> None:
        self.events: set[threading.Event] = set()
        self.head = head
        self.seen = 0


class LMDBEnvironment:
    """One shared LMDB environment: reads, group-committed writes, sub-databases.

    Obtain it with :func:`open_environment`; the store is reference counted and the
    environment is closed when the last holder calls :meth:`release`.
    """

    def __init__(
        self,
        path: str,
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        sync: bool = True,
        max_dbs: int = DEFAULT_MAX_DBS,
        max_readers: int = DEFAULT_MAX_READERS,
    ) -> None:
        self.path = path
        self.sync = sync
        try:
            # No writemap: nested (child) transactions, which group commit
            # needs, are not supported with MDB_WRITEMAP.
            self.env = lmdb.open(
                path,
                map_size=map_size,
                subdir=True,
                sync=sync,
                metasync=sync,
                max_dbs=max_dbs,
                max_readers=max_readers,
            )
        except lmdb.Error as e:
            raise translate_error(e) from e
        self.gate = _Gate()
        self.mapped = MappedPages(path)
        self._touches = 0
        self.closed = False
        self.commit_count = 0
        self.batch_count = 0
        self.grow_count = 0
        self._refs = 0
        self._dbs: dict[str, lmdb._Database] = {}
        # Group commit state: queued batches and whether a leader is writing.
        self._cond = threading.Condition()
        self._pending: list[_Batch[Any]] = []
        self._leading = False
        self._leader: int | None = None
        # Subscription wake-ups.
        self._listeners_lock = threading.Lock()
        self._listeners: dict[str, _Listener] = {}
        self._poller: threading.Thread | None = None
        self._poller_stop = threading.Event()

    # Reference counting -------------------------------------------------------------

    def retain(self) -> None:
        """Record one more holder of this store."""
        with _registry_lock:
            if self.closed:
                raise InterfaceError(f"LMDB store is closed: {self.path}")
            self._refs += 1

    def release(self) -> None:
        """Drop one holder; the last one closes the environment."""
        with _registry_lock:
            self._refs -= 1
            if self._refs > 0 or self.closed:
                return
            if _registry.get(self.path, (None, None))[1] is self:
                del _registry[self.path]
            # Closed under the registry lock so that no second Environment on
            # the same files can be opened before this one is gone.
            self._close()

    def _close(self) -> None:
        self._poller_stop.set()
        with self._exclusive_writer(), self.gate:
            if self.closed:
                return
            with self._cond:
                # Fail writes queued behind us; later ones see `closed`.
                self.closed = True
                for batch in self._pending:
                    self._finish(batch, False, InterfaceError("LMDB store closed"))
                self._pending.clear()
            try:
                if not self.sync:
                    # Unsynced commits reached the OS; flush them at shutdown.
                    self.env.sync(True)
            finally:
                self.env.close()

    # Sub-databases ------------------------------------------------------------------

    def open_db(self, name: str, *, create: bool) -> lmdb._Database | None:
        """Return the handle of a named sub-database, or None if it does not exist."""
        db = self._dbs.get(name)
        if db is not None:
            return db
        key = name.encode("utf-8")
        # mdb_dbi_open must not run concurrently with another transaction that
        # opens handles, and creating needs the write lock: be the writer.
        with self._exclusive_writer():
            db = self._dbs.get(name)
            if db is not None:
                return db
            self._check_open()
            for _ in range(64):
                try:
                    # Always a write transaction: a handle opened in a read
                    # transaction is closed again when that transaction ends.
                    with self.env.begin(write=True) as txn:
                        db = self.env.open_db(key, txn=txn, create=create)
                except lmdb.NotFoundError:
                    return None
                except lmdb.MapFullError as e:
                    if not self._grow_map():
                        raise translate_error(e) from e
                    continue
                except lmdb.MapResizedError:
                    self._set_map_size(0)
                    continue
                except lmdb.Error as e:
                    raise translate_error(e) from e
                self._dbs[name] = db
                return db
        raise OperationalError(f"Could not open sub-database {name!r}")

    # Reading ------------------------------------------------------------------------

    def reading(self) -> _ReadTxn[Txn]:
        """Return a context manager for one short read transaction."""
        return _ReadTxn(self, buffers=False)

    def reading_buffers(self) -> _ReadTxn[BufferTxn]:
        """Return a context manager for one short read transaction whose reads return
        memoryviews of the map (no copies), valid only inside it."""
        return _ReadTxn(self, buffers=True)

    def last_txnid(self) -> int:
        """Return the id of the newest transaction, by any process, that readers can see."""
        # Not env.info(): it reads the meta page, which a writer updates before
        # new readers can see its commit, so a head read just after it could
        # still be older than the id it reported. It visits no page of the file, so it
        # counts as no place (a follower polls it every few ms: counted, it would unmap
        # the pages this process's reads use several times a second).
        with _ReadTxn(self, buffers=False, counts=False) as txn:
            return txn.id()

    def touched(self, places: int = 1) -> None:
        """Count places of the file visited, and unmap the pages the process has touched
        once ``RELEASE_EVERY`` were since the last time and the pages it maps are past
        their budget (see :meth:`MappedPages.due`). Called holding the gate (after a
        read) or by a write's work inside its transaction (the map cannot move then: only
        the writer resizes it, between transactions, and closing waits for the writer).
        Counted without a lock: a count lost to a race only moves the next release."""
        self._touches += places
        if self._touches >= RELEASE_EVERY and not self.closed:
            self._touches = 0
            if self.mapped.due():
                self.mapped.release(self.env.info()["map_size"])

    def map_size(self) -> int:
        """Return the current size of the memory map in bytes."""
        self.gate.enter()
        try:
            self._check_open()
            return self.env.info()["map_size"]
        finally:
            self.gate.leave()

    def flush(self) -> None:
        """Make every commit so far durable (they are already, unless opened with
        ``sync=False``)."""
        if self.sync:
            return
        self.gate.enter()
        try:
            self._check_open()
            self.env.sync(True)
        except lmdb.Error as e:
            raise translate_error(e) from e
        finally:
            self.gate.leave()

    # Writing (group commit) ----------------------------------------------------------

    def write(self, work: Callable[[Txn], T], channel: str | None = None) -> T:
        """Run work in a write transaction shared with concurrent callers; return its result.

        The work must be a pure function of the transaction it is given: it can
        run more than once (after the map grows) and must not start other
        transactions. An exception it raises fails this call only. When it
        succeeds, subscriptions listening on channel are woken after commit.
        """
        batch: _Batch[T] = _Batch(work, channel)
        with self._cond:
            if self._leading and self._leader == threading.get_ident():
                raise ProgrammingError("LMDBEnvironment.write() called from inside a write")
            self._check_open()
            self._pending.append(batch)
            while self._leading and not batch.done:
                self._cond.wait()
            if batch.done:
                return batch.outcome()
            # Nobody is writing: lead, taking every batch queued so far.
            self._leading = True
            self._leader = threading.get_ident()
            group, self._pending = self._pending, []
        try:
            outcomes = self._commit_group(group)
        except BaseException as e:
            with self._cond:
                for b in group:
                    if not b.done:
                        self._finish(b, False, e)
                self._end_lead()
            raise
        self.gate.enter()
        try:
            self.touched()
        finally:
            self.gate.leave()
        committed: set[str] = set()
        # The group's outcomes and the end of this lead in one critical section: a write
        # takes the lock once less, and the writers waiting for either are woken once.
        with self._cond:
            try:
                for b, (ok, value) in zip(group, outcomes, strict=True):
                    self._finish(b, ok, value)
                    if ok and b.channel is not None:
                        committed.add(b.channel)
            finally:
                self._end_lead()
        # Read without the lock: a subscription added meanwhile wakes itself once it is
        # listening (see LMDBSubscription), so skipping the wake-up when there are none
        # loses nothing.
        if committed and self._listeners:
            self._wake(committed)
        return batch.outcome()

    def _end_lead(self) -> None:
        """Let the next writer lead (called holding ``_cond``)."""
        self._leading = False
        self._leader = None
        self._cond.notify_all()

    def _commit_group(self, group: list[_Batch[Any]]) -> list[tuple[bool, Any]]:
        """Commit the group (growing the map as needed); returns each batch's outcome."""
        while True:
            try:
                outcomes = self._try_commit(group)
            except lmdb.MapFullError as e:
                if self._grow_map():
                    continue
                outcomes = [(False, translate_error(e, self.path)) for _ in group]
            except lmdb.MapResizedError:
                self._set_map_size(0)
                continue
            except lmdb.Error as e:
                # Nothing was committed, so every batch in the group fails.
                outcomes = [(False, translate_error(e, self.path)) for _ in group]
            break
        return outcomes

    def _try_commit(self, group: list[_Batch[Any]]) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = []
        try:
            with self.env.begin(write=True) as txn:
                if len(group) == 1:
                    # No child transaction needed: on failure the whole
                    # transaction is aborted, which affects only this batch.
                    try:
                        outcomes.append((True, group[0].work(txn)))
                    except (lmdb.MapFullError, lmdb.MapResizedError):
                        raise
                    except Exception as e:
                        outcomes.append((False, e))
                else:
                    for b in group:
                        try:
                            with self.env.begin(write=True, parent=txn) as child:
                                value = b.work(child)
                        except (lmdb.MapFullError, lmdb.MapResizedError):
                            raise
                        except Exception as e:
                            outcomes.append((False, e))
                        else:
                            outcomes.append((True, value))
                if not any(ok for ok, _ in outcomes):
                    raise _Rollback
        except _Rollback:
            self.batch_count += len(group)
            return outcomes
        self.commit_count += 1
        self.batch_count += len(group)
        return outcomes

    @staticmethod
    def _finish(batch: _Batch[Any], ok: bool, value: Any) -> None:
        if isinstance(value, lmdb.Error):
            value = translate_error(value)
        batch.ok = ok
        batch.value = value
        batch.done = True

    def _grow_map(self) -> bool:
        """Double the map; return False if it is already at the limit."""
        current = self.env.info()["map_size"]
        if current >= MAX_MAP_SIZE:
            return False
        self._set_map_size(min(current * 2, MAX_MAP_SIZE))
        self.grow_count += 1
        return True

    def _set_map_size(self, size: int) -> None:
        # Caller is the writer, so no write transaction is open; the gate
        # waits out the read transactions.
        with self.gate:
            self.mapped.moved()
            self.env.set_mapsize(size)

    def adopt_map_size(self) -> None:
        """Take up the map size another process has grown the environment to."""
        with self._exclusive_writer():
            self._check_open()
            self._set_map_size(0)

    class _Writer:
        def __init__(self, store: LMDBEnvironment) -> None:
            self.store = store

        def __enter__(self) -> None:
            store = self.store
            with store._cond:
                if store._leading and store._leader == threading.get_ident():
                    raise ProgrammingError("LMDB store used from inside a write")
                while store._leading:
                    store._cond.wait()
                store._leading = True
                store._leader = threading.get_ident()

        def __exit__(self, *exc: object) -> None:
            store = self.store
            with store._cond:
                store._leading = False
                store._leader = None
                store._cond.notify_all()

    def _exclusive_writer(self) -> LMDBEnvironment._Writer:
        return LMDBEnvironment._Writer(self)

    def _check_open(self) -> None:
        if self.closed:
            raise InterfaceError(f"LMDB store is closed: {self.path}")

    # Subscription wake-ups -----------------------------------------------------------

    def add_listener(self, channel: str, event: threading.Event, head: Callable[[], int]) -> None:
        """Set event whenever the notification log named channel may have grown."""
        with self._listeners_lock:
            listener = self._listeners.get(channel)
            if listener is None:
                listener = self._listeners[channel] = _Listener(head)
            listener.events.add(event)
            if self._poller is None and not self.closed:
                self._poller_stop.clear()
                self._poller = threading.Thread(
                    target=self._poll, name=f"lmdb-poll:{self.path}", daemon=True
                )
                self._poller.start()

    def remove_listener(self, channel: str, event: threading.Event) -> None:
        """Stop setting event (idempotent)."""
        with self._listeners_lock:
            listener = self._listeners.get(channel)
            if listener is None:
                return
            listener.events.discard(event)
            if not listener.events:
                del self._listeners[channel]

    def _wake(self, channels: set[str]) -> None:
        with self._listeners_lock:
            events = [
                e for c in channels if c in self._listeners for e in self._listeners[c].events
            ]
        for event in events:
            event.set()

    def _poll(self) -> None:
        """Wake subscriptions when another process commits to their log."""
        last_txnid = -1
        interval, changed_at = POLL_INTERVAL, time.monotonic()
        while not self._poller_stop.wait(interval):
            with self._listeners_lock:
                if not self._listeners or self.closed:
                    # Decided under the lock add_listener takes, so a listener
                    # added from now on starts a fresh poller.
                    self._poller = None
                    return
                listeners = [(x, list(x.events)) for x in self._listeners.values()]
            try:
                txnid = self.last_txnid()
            except PersistenceError:
                # Store closed underneath us: nothing left to wake.
                break
            if txnid == last_txnid:
                if interval != IDLE_POLL_INTERVAL and time.monotonic() - changed_at > QUIET_AFTER:
                    interval = IDLE_POLL_INTERVAL
                continue
            last_txnid = txnid
            interval, changed_at = POLL_INTERVAL, time.monotonic()
            for listener, events in listeners:
                try:
                    head = listener.head()
                except PersistenceError:
                    continue  # that log's recorder is gone; others still count
                if head > listener.seen:
                    listener.seen = head
                    for event in events:
                        event.set()
        with self._listeners_lock:
            if self._poller is threading.current_thread():
                self._poller = None


# Process-wide registry: LMDB forbids opening one environment twice in a process.
_registry_lock = threading.RLock()
_registry: dict[str, tuple[tuple[int, int], LMDBEnvironment]] = {}


def open_environment(
    path: str,
    *,
    map_size: int = DEFAULT_MAP_SIZE,
    sync: bool = True,
    max_dbs: int = DEFAULT_MAX_DBS,
    max_readers: int = DEFAULT_MAX_READERS,
) -> LMDBEnvironment:
    """Return the process's store for the directory at path, retained once for the caller.

    The first opener's options win; later openers of the same directory share
    that environment. Call ``release()`` once when done.
    """
    os.makedirs(path, exist_ok=True)
    real = os.path.realpath(path)
    st = os.stat(real)
    # A directory deleted and re-created at the same path is a new database.
    identity = (st.st_dev, st.st_ino)
    with _registry_lock:
        entry = _registry.get(real)
        if entry is not None and entry[0] == identity and not entry[1].closed:
            store = entry[1]
        else:
            store = LMDBEnvironment(
                real, map_size=map_size, sync=sync, max_dbs=max_dbs, max_readers=max_readers
            )
            _registry[real] = (identity, store)
        store.retain()
        return store


def _forget_after_fork() -> None:
    # An Environment must never be used across fork(): the child starts afresh.
    global _registry_lock
    _registry_lock = threading.RLock()
    _registry.clear()


os.register_at_fork(after_in_child=_forget_after_fork)

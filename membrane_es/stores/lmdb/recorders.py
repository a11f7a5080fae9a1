"""An eventsourcing persistence module over LMDB.

Select it with ``PERSISTENCE_MODULE=membrane_es.stores.lmdb``. Settings, each
looked up with the application-name prefix first (``MYAPP_LMDB_PATH``):

``LMDB_PATH``
    Directory of the LMDB environment (required). Applications in one process
    that name the same directory share one environment; the first one's
    settings apply.
``LMDB_MAP_SIZE``
    Initial map size in bytes (default 64 MiB); the map doubles when full.
``LMDB_SYNC``
    ``y`` (default): a commit is flushed to disk before it returns.
    ``n``: commits reach the OS only; a machine crash can lose the latest.
``LMDB_MAX_DBS``
    Maximum number of named sub-databases (default 128).
``CREATE_TABLE``
    ``y`` (default) creates the sub-databases when recorders are made.
``LMDB_CHAIN_KEY``
    A key (hex) for the notification log's hash chain: each link is then a keyed
    blake2b MAC, which nobody without the key can recompute. Keep it outside the store.
    A log's first write fixes whether its chain is keyed (and by which key); opening it
    with another key, or none, is an error. Without it, a new store's chain is keyed with
    the chain key its key store holds (see :mod:`membrane_es.stores.key_store`), and a store
    whose chain is keyed with that key opens with it; a store begun unkeyed stays so.
``LMDB_PLAIN_CHAIN``
    ``y``: a new store's chain is plain (unkeyed), as stores made before keyed chains
    were the default have; anyone who can write the log can then recompute it.

Application ``<name>`` gets the sub-databases ``<name>_events`` (aggregate
sequences), ``<name>_notifications`` (the application sequence, hash chained),
``<name>_meta`` (the head of that chain), ``<name>_snapshots`` and
``<name>_tracking``. Concurrent writers in one process share commits (group
commit); notification ids start at 1 and are gap-free in commit order.

Beyond eventsourcing's recorder interface, :meth:`LMDBApplicationRecorder.read_log_rows`
reads the application sequence as raw columns (ids, topics, state bytes), for projections
that replay it in bulk without a ``Notification`` per row.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypeVar, cast

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    InterfaceError,
    Notification,
    ProcessRecorder,
    ProgrammingError,
    StoredEvent,
    Subscription,
    Tracking,
    TrackingRecorder,
)
from eventsourcing.utils import resolve_topic, strtobool

from membrane_es.errors import IntegrityError, KeyStoreError
from membrane_es.stores.chain import (
    PLAIN_CHAIN,
    U64,
    Chain,
    ChainFault,
    ChainReport,
    originator_key,
    span_of,
    version_suffix,
)
from membrane_es.stores.key_store import (
    KEY_STORE_FILE,
    SqliteKeyStore,
    foreign_key_store,
    key_store_file,
    lost_log,
    missing_key_store,
)
from membrane_es.stores.lmdb.environment import (
    DEFAULT_MAP_SIZE,
    DEFAULT_MAX_DBS,
    LMDBEnvironment,
    open_environment,
)
from membrane_es.stores.lmdb.layout import (
    KEY_STORE_KEY,
    LogRows,
    append_events,
    check_log_end,
    clear_log,
    import_unfinished,
    mark_import,
    put_records,
    put_tracking,
    read_chain_mode,
    read_events,
    read_head,
    read_key_store_identity,
    read_log_rows,
    read_notifications,
    read_versions,
    repack,
    stored_hash,
    verify_log,
)
from membrane_es.stores.lmdb.mapped_pages import DATA_FILE
from membrane_es.stores.log_stamp import stamp_of

REPACK_LIMIT = 100_000  # log entries one repack looks at (it is one write transaction)
SUBSCRIPTION_PAGE = 500  # notifications a subscription reads at a time

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from uuid import UUID

    import lmdb
    from eventsourcing.utils import Environment, EnvType

    from membrane_es.stores.lmdb.environment import Txn

    _LogDbs: TypeAlias = tuple[lmdb._Database, lmdb._Database, lmdb._Database]

__all__ = [
    "Chain",
    "ChainFault",
    "ChainReport",
    "Factory",
    "LMDBAggregateRecorder",
    "LMDBApplicationRecorder",
    "LMDBFactory",
    "LMDBProcessRecorder",
    "LMDBRecorder",
    "LMDBEnvironment",
    "LMDBSubscription",
    "LMDBTrackingRecorder",
    "LogRows",
    "open_environment",
    "verify_chain",
    "verify_store",
]

T = TypeVar("T")
R = TypeVar("R", bound="LMDBRecorder")
TLMDBTrackingRecorder = TypeVar("TLMDBTrackingRecorder", bound="LMDBTrackingRecorder")


class LMDBRecorder:
    """Base of the LMDB recorders: a share of a store, and sub-databases named by prefix."""

    def __init__(self, store: LMDBEnvironment, prefix: str) -> None:
        super().__init__()
        store.retain()
        self.store = store
        self.prefix = prefix
        self.tables: list[str] = []
        # Released when the recorder is closed or collected, whichever is first.
        self._release = weakref.finalize(self, store.release)

    def table_name(self, suffix: str) -> str:
        """Return the full name of this recorder's sub-database with the given suffix."""
        return f"{self.prefix}_{suffix}"

    def create_table(self) -> None:
        """Create this recorder's sub-databases if they do not exist."""
        for name in self.tables:
            self.store.open_db(name, create=True)

    def close(self) -> None:
        """Give up this recorder's share of the store; it can't be used afterwards."""
        self._release()

    @property
    def closed(self) -> bool:
        return not self._release.alive

    def _db(self, name: str) -> lmdb._Database | None:
        if not self._release.alive:
            raise InterfaceError(f"LMDB recorder is closed: {self.prefix!r}")
        return self.store.open_db(name, create=False)

    def _require(self, name: str) -> lmdb._Database:
        db = self._db(name)
        if db is None:
            raise ProgrammingError(
                f"LMDB sub-database {name!r} does not exist in {self.store.path} "
                "(create it with create_table(), or set CREATE_TABLE=y)"
            )
        return db


class LMDBAggregateRecorder(LMDBRecorder, AggregateRecorder):
    """Records aggregate sequences (or snapshots) without an application sequence."""

    def __init__(self, store: LMDBEnvironment, prefix: str, purpose: str = "events") -> None:
        super().__init__(store, prefix)
        self.events_table = self.table_name(purpose)
        self.tables.append(self.events_table)

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        if stored_events:
            events_db = self._require(self.events_table)
            events = list(stored_events)
            self.store.write(lambda txn: put_records(txn, events_db, events))
        return None

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        events_db = self._db(self.events_table)
        if events_db is None or (limit is not None and limit <= 0):
            return []
        with self.store.reading() as txn:
            return read_events(txn, events_db, originator_id, gt, lte, desc, limit)

    def has_events(self, originator_id: UUID | str) -> bool:
        """Whether the originator has any event: one key looked up, no event read (what
        the engine asks of every record id a caller gives, before creating it)."""
        events_db = self._db(self.events_table)
        if events_db is None:
            return False
        prefix = originator_key(originator_id)
        with self.store.reading_buffers() as txn:
            cursor = txn.cursor(db=events_db)
            if not cursor.set_range(prefix):
                return False
            found = cursor.key()
            return len(found) == len(prefix) + 8 and found[: len(prefix)] == prefix


class LMDBApplicationRecorder(LMDBAggregateRecorder, ApplicationRecorder):
    """Records aggregate sequences and the hash-chained application sequence; every read
    is checked against the chain (see :mod:`membrane_es.stores.lmdb.layout`)."""

    def __init__(self, store: LMDBEnvironment, prefix: str, chain: Chain = PLAIN_CHAIN) -> None:
        super().__init__(store, prefix)
        self.chain = chain
        self.notifications_table = self.table_name("notifications")
        self.meta_table = self.table_name("meta")
        self.tables += [self.notifications_table, self.meta_table]
        # Subscriptions of this log are woken by commits on this channel.
        self.channel = self.notifications_table
        # The log's three handles, once they all exist: handles are never dropped while the
        # store is open, and looking them up by name on every write costs more than a put.
        self._log_handles: _LogDbs | None = None

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> list[int]:
        if not stored_events:
            return []
        dbs = self._log_dbs()
        events = list(stored_events)
        chain = self.chain
        stamp = stamp_of(kwargs)
        touched = self.store.touched
        return self.store.write(
            lambda txn: append_events(txn, dbs, events, chain, stamp, touched), self.channel
        )

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        events_db = self._db(self.events_table)
        log_db = self._db(self.notifications_table)
        if events_db is None or (limit is not None and limit <= 0):
            return []
        # In place: a packed event is read out of its pack without copying the pack.
        with self.store.reading_buffers() as txn:
            return read_events(
                txn, events_db, originator_id, gt, lte, desc, limit, log_db, self.chain
            )

    def select_events_of(self, originator_ids: Sequence[UUID]) -> list[list[StoredEvent]]:
        """Each originator's events, all of them in version order, read in one transaction
        (a search's results, loaded together); checked against the chain as
        :meth:`select_events` checks them."""
        events_db = self._db(self.events_table)
        log_db = self._db(self.notifications_table)
        if events_db is None:
            return [[] for _ in originator_ids]
        with self.store.reading_buffers() as txn:
            chain = self.chain
            found = [
                read_events(txn, events_db, key, None, None, False, None, log_db, chain)
                for key in originator_ids
            ]
            if len(originator_ids) > 1:
                # Each record read is a place of the file visited (one is counted on exit).
                self.store.touched(len(originator_ids) - 1)
            return found

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> list[Notification]:
        events_db = self._db(self.events_table)
        log_db = self._db(self.notifications_table)
        if events_db is None or log_db is None or limit <= 0:
            return []
        first = 1 if start is None else start if inclusive_of_start else start + 1
        wanted = frozenset(topics)
        meta_db = self._require(self.meta_table)
        with self.store.reading_buffers() as txn:
            found = read_notifications(
                txn, events_db, log_db, first, limit, stop, wanted, self.chain
            )
            if len(found) < limit and not wanted:
                check_log_end(txn, meta_db, found[-1].id + 1 if found else first, stop)
            return found

    def read_log_rows(self, start: int, limit: int, stop: int | None = None) -> LogRows:
        """Return up to limit rows of the notification log with start <= id <= stop, in
        order, as raw columns read in one transaction (for replaying the log in bulk)."""
        events_db = self._db(self.events_table)
        log_db = self._db(self.notifications_table)
        if events_db is None or log_db is None or limit <= 0:
            return LogRows([], [], [], [])
        meta_db = self._require(self.meta_table)
        with self.store.reading_buffers() as txn:
            rows = read_log_rows(txn, events_db, log_db, start, limit, stop, self.chain)
            if len(rows) < limit:
                check_log_end(txn, meta_db, rows.ids[-1] + 1 if rows else max(start, 1), stop)
            return rows

    def max_notification_id(self) -> int | None:
        return self.head_id() or None

    def subscribe(self, gt: int | None = None, topics: Sequence[str] = ()) -> LMDBSubscription:
        return LMDBSubscription(recorder=self, gt=gt, topics=topics)

    def select_states(self, originator_ids: Sequence[UUID | str], version: int) -> list[bytes]:
        """The stored state of each originator's event at ``version``, in order, in one
        read (each checked against the chain); an event that is not there raises
        :class:`~membrane_es.errors.IntegrityError`."""
        if not originator_ids:
            return []
        suffix = version_suffix(version)
        keys = [originator_key(originator_id) + suffix for originator_id in originator_ids]
        events_db = self._require(self.events_table)
        log_db = self._require(self.notifications_table)
        with self.store.reading_buffers() as txn:
            return read_versions(txn, events_db, log_db, keys, self.chain)

    def repack(self, limit: int = REPACK_LIMIT) -> int:
        """Move the large events written alone since the last call (up to ``limit`` log
        entries) into packs, in one commit; returns how many moved (see
        :func:`~membrane_es.stores.lmdb.layout.repack`)."""
        dbs = self._log_dbs()
        touched = self.store.touched
        moved: int = self.store.write(lambda txn: repack(txn, dbs, limit, touched))
        return moved

    def verify(
        self, chunk_size: int = 1000, *, first: int | None = None, last: int | None = None
    ) -> ChainReport:
        """Check the application sequence against its hash chain (``first``/``last``: the
        positions from ``first`` to ``last`` only)."""
        return verify_chain(self, chunk_size=chunk_size, first=first, last=last)

    def sync_log(self) -> None:
        """Make every commit so far durable: a store opened with ``sync=False`` leaves them
        to the operating system (what an erasure must not do before it destroys keys)."""
        self.store.flush()

    def key_store_identity(self) -> bytes | None:
        """The identity of the key store this log is bound to (None: not bound yet)."""
        meta_db = self._db(self.meta_table)
        if meta_db is None:
            return None
        with self.store.reading() as txn:
            return read_key_store_identity(txn, meta_db)

    def bind_key_store(self, identity: bytes) -> None:
        """Record which key store holds this log's keys: from then on, opening the log with
        any other (or none) is refused."""
        meta_db = self._require(self.meta_table)
        self.store.write(lambda txn: txn.put(KEY_STORE_KEY, identity, db=meta_db))

    def import_unfinished(self) -> bool:
        """Whether an import began filling this log and did not end (the log then holds part
        of a file, and is not to be read as a store)."""
        meta_db = self._db(self.meta_table)
        if meta_db is None:
            return False
        with self.store.reading() as txn:
            return import_unfinished(txn, meta_db)

    def mark_import(self, unfinished: bool) -> None:
        """Mark the log as being filled by an import (before its first key or event is
        written), or no longer (after its last)."""
        meta_db = self._require(self.meta_table)
        self.store.write(lambda txn: mark_import(txn, meta_db, unfinished))

    def discard_log(self) -> None:
        """Empty the log and its import mark in one write; the key store binding stays."""
        dbs = self._log_dbs()
        self.store.write(lambda txn: clear_log(txn, dbs))

    def settle_chain(
        self,
        key_file: Path,
        keyed: bool = True,
        required: bool = True,
        open_keys: Callable[[Path], SqliteKeyStore] | None = None,
    ) -> None:
        """Take the chain key from the key store at ``key_file`` when the log's chain is
        keyed with it, or the log is new (its chain is then keyed from its first write);
        with ``keyed`` False, leave the chain as it is (a new log's is then plain).

        A log bound to a key store — or, ``required``, one that holds events — refuses a
        missing key store (:class:`~membrane_es.errors.KeyStoreError`) rather than let one
        be made empty. ``open_keys``: opens the key store, which the caller then keeps
        open (without it, the key store is opened here and closed again).
        """
        meta_db = self._db(self.meta_table)
        head, mode, bound = 0, None, None
        if meta_db is not None:
            with self.store.reading() as txn:
                head, _ = read_head(txn, meta_db)
                mode = read_chain_mode(txn, meta_db)
                bound = read_key_store_identity(txn, meta_db)
        if (bound is not None or (head and required)) and not key_file.is_file():
            raise missing_key_store(key_file, self.store.path)
        if not required and not key_file.is_file():
            return  # a check makes no key store
        unkeyed = not keyed or (head and (mode is None or mode == PLAIN_CHAIN.mode))
        if unkeyed and bound is None:
            return  # begun unkeyed: stays so, and no key store to check
        if open_keys is not None:
            kept = open_keys(key_file)
            identity, chain_key = kept.identity, kept.chain_key
        else:
            keys = SqliteKeyStore(key_file)
            try:
                identity, chain_key = keys.identity, keys.chain_key
            finally:
                keys.close()
        if bound is not None and identity != bound:
            raise foreign_key_store(key_file)
        if unkeyed:
            return
        assert chain_key is not None  # a key store in a file holds one
        chain = Chain(chain_key)
        if not head or chain.mode == mode:
            self.chain = chain
        # else: keyed with a key kept outside the store; check_chain asks for it

    def check_chain(self) -> None:
        """Refuse a chain key the log was not made with (or a missing one)."""
        meta_db = self._db(self.meta_table)
        if meta_db is None:
            return
        with self.store.reading() as txn:
            head, _ = read_head(txn, meta_db)
            mode = read_chain_mode(txn, meta_db)
        if head:
            self.chain.check_mode(mode)

    def hash_at(self, notification_id: int) -> bytes:
        """The chain hash notification ``notification_id`` holds (what a checkpoint taken
        there is tied to); :class:`~membrane_es.errors.IntegrityError` if it is missing."""
        log_db = self._require(self.notifications_table)
        with self.store.reading() as txn:
            return stored_hash(txn, log_db, notification_id)

    def head_id(self) -> int:
        """The id of the log's newest notification (0 for an empty log)."""
        meta_db = self._db(self.meta_table)
        if meta_db is None:
            return 0
        with self.store.reading() as txn:
            return read_head(txn, meta_db)[0]

    def _log_dbs(self) -> _LogDbs:
        handles = self._log_handles
        if handles is not None and self._release.alive:
            return handles
        handles = (
            self._require(self.events_table),
            self._require(self.notifications_table),
            self._require(self.meta_table),
        )
        self._log_handles = handles
        return handles


class LMDBSubscription(Subscription[LMDBApplicationRecorder]):
    """Iterates over an application sequence, blocking at its end until more is committed
    (woken by the store on each commit to the log, this process's or another's)."""

    def __init__(
        self,
        recorder: LMDBApplicationRecorder,
        gt: int | None = None,
        topics: Sequence[str] = (),
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._log = recorder
        self._after = gt or 0
        self._wanted = list(topics)
        self._ready: deque[Notification] = deque()
        self._stopped = False
        # Set by the store when the log may have grown; set now, so the first read is at once.
        self._woken = threading.Event()
        self._woken.set()
        recorder.store.add_listener(recorder.channel, self._woken, recorder.head_id)

    def stop(self) -> None:
        super().stop()
        self._stopped = True
        self._woken.set()  # a reader blocked at the log's end sees the stop
        self._log.store.remove_listener(self._log.channel, self._woken)

    def __next__(self) -> Notification:
        ready = self._ready
        while not ready and not self._stopped:
            # Cleared before the read: a commit after it sets it again, so none is missed.
            self._woken.clear()
            found = self._log.select_notifications(
                start=self._after,
                limit=SUBSCRIPTION_PAGE,
                topics=self._wanted,
                inclusive_of_start=False,
            )
            if found:
                ready.extend(found)
                self._after = found[-1].id
            else:
                self._woken.wait()
        if self._stopped:
            raise StopIteration
        return ready.popleft()


class LMDBTrackingRecorder(LMDBRecorder, TrackingRecorder):
    """Records how far upstream application sequences have been processed.

    Materialised views subclass it: they list their own sub-databases in
    ``view_tables``, get them with :meth:`view_db`, and change them with
    :meth:`write_tracked` so that a change and its tracking record commit together.
    """

    view_tables: ClassVar[tuple[str, ...]] = ()

    def __init__(self, store: LMDBEnvironment, prefix: str) -> None:
        super().__init__(store, prefix)
        self.tracking_table = self.table_name("tracking")
        self.tables.append(self.tracking_table)
        self.tables += [self.table_name(suffix) for suffix in self.view_tables]

    def insert_tracking(self, tracking: Tracking) -> None:
        tracking_db = self._require(self.tracking_table)
        self.store.write(lambda txn: put_tracking(txn, tracking_db, tracking))

    def max_tracking_id(self, application_name: str) -> int | None:
        tracking_db = self._db(self.tracking_table)
        if tracking_db is None:
            return None
        with self.store.reading() as txn:
            value = txn.get(application_name.encode("utf-8"), db=tracking_db)
        return None if value is None else int(U64.unpack(value)[0])

    def view_db(self, suffix: str) -> lmdb._Database:
        """Return the view's sub-database with the given suffix."""
        return self._require(self.table_name(suffix))

    def write_tracked(self, tracking: Tracking | None, update: Callable[[Txn], T]) -> T:
        """Apply update and record tracking in one transaction; return update's result.

        update must only use the transaction it is given: it may run more than
        once, and calling recorder methods from it would deadlock.
        """
        tracking_db = self._require(self.tracking_table)

        def work(txn: Txn) -> T:
            if tracking is not None:
                put_tracking(txn, tracking_db, tracking)
            return update(txn)

        return self.store.write(work)

    def read(self, query: Callable[[Txn], T]) -> T:
        """Return the result of query run in one short read transaction.

        query must only use the transaction it is given.
        """
        with self.store.reading() as txn:
            return query(txn)


class LMDBProcessRecorder(LMDBTrackingRecorder, LMDBApplicationRecorder, ProcessRecorder):
    """Records new events together with the tracking record of what caused them."""

    def __init__(self, store: LMDBEnvironment, prefix: str, chain: Chain = PLAIN_CHAIN) -> None:
        super().__init__(store, prefix)
        self.chain = chain

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> list[int]:
        tracking: Tracking | None = kwargs.get("tracking")
        if tracking is None:
            return super().insert_events(stored_events, **kwargs)
        tracking_db = self._require(self.tracking_table)
        events = list(stored_events)
        dbs = self._log_dbs() if events else None
        stamp = stamp_of(kwargs)

        def work(txn: Txn) -> list[int]:
            put_tracking(txn, tracking_db, tracking)
            if dbs is None:
                return []
            return append_events(txn, dbs, events, self.chain, stamp, self.store.touched)

        # An empty event list still records the tracking (a skipped event).
        return self.store.write(work, self.channel if events else None)


def verify_chain(
    recorder: LMDBApplicationRecorder,
    chunk_size: int = 1000,
    *,
    first: int | None = None,
    last: int | None = None,
) -> ChainReport:
    """Walk a recorder's notification log and report the first broken link, if any."""
    dbs = (
        recorder._db(recorder.events_table),
        recorder._db(recorder.notifications_table),
        recorder._db(recorder.meta_table),
    )
    keyed = recorder.chain.mode != PLAIN_CHAIN.mode
    if None in dbs:
        span_of(first, last, 0)  # nothing written: any range is past the head
        return ChainReport(checked=0, keyed=keyed)
    return verify_log(recorder.store, cast("_LogDbs", dbs), chunk_size, recorder.chain, first, last)


def verify_store(
    path: str,
    application_name: str,
    chain_key: bytes | None = None,
    key_file: Path | None = None,
    *,
    first: int | None = None,
    last: int | None = None,
) -> ChainReport:
    """Verify the notification log of the named application in the LMDB directory at path.

    Without ``chain_key``, a chain keyed with the key the store's key store (``key_file``;
    by default ``keys.sqlite`` in the directory) holds is checked with that key. A store
    file too damaged to open or read is reported (fault ``corrupted``), and a missing key
    store (fault ``keys``), not raised.
    """
    try:
        store = open_environment(path)
        try:
            recorder = LMDBApplicationRecorder(store, application_name.lower(), Chain(chain_key))
        finally:
            store.release()
        try:
            keys = key_file or Path(path) / KEY_STORE_FILE
            recorder.settle_chain(keys, keyed=chain_key is None, required=False)
            return recorder.verify(first=first, last=last)
        finally:
            recorder.close()
    except KeyStoreError as error:
        return ChainReport(0, ChainFault.KEYS, None, str(error))
    except IntegrityError as error:
        return ChainReport(0, ChainFault.CORRUPTED, error.notification_id, str(error))


class LMDBFactory(InfrastructureFactory[LMDBTrackingRecorder]):
    """Constructs LMDB recorders for an application from its environment."""

    LMDB_PATH = "LMDB_PATH"
    LMDB_MAP_SIZE = "LMDB_MAP_SIZE"
    LMDB_SYNC = "LMDB_SYNC"
    LMDB_MAX_DBS = "LMDB_MAX_DBS"
    LMDB_CHAIN_KEY = "LMDB_CHAIN_KEY"
    LMDB_PLAIN_CHAIN = "LMDB_PLAIN_CHAIN"
    CREATE_TABLE = "CREATE_TABLE"

    aggregate_recorder_class: type[LMDBAggregateRecorder] = LMDBAggregateRecorder
    application_recorder_class: type[LMDBApplicationRecorder] = LMDBApplicationRecorder
    tracking_recorder_class: type[LMDBTrackingRecorder] = LMDBTrackingRecorder
    process_recorder_class: type[LMDBProcessRecorder] = LMDBProcessRecorder

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        path = self.env.get(self.LMDB_PATH)
        if not path:
            msg = f"LMDB directory not given in environment variable '{self.LMDB_PATH}'"
            raise OSError(msg)
        self.path: str = path
        self.map_size = self._env_int(self.LMDB_MAP_SIZE, DEFAULT_MAP_SIZE)
        self.max_dbs = self._env_int(self.LMDB_MAX_DBS, DEFAULT_MAX_DBS)
        self.sync = strtobool(self.env.get(self.LMDB_SYNC) or "yes")
        given = self._chain_key()
        self.chain = Chain(given)
        # Without a key of its own, the chain's key comes from the key store (see
        # LMDBApplicationRecorder.settle_chain), unless a plain chain is asked for.
        self._key_file = key_store_file(self.env)
        self._keyed_by_store = given is None and not strtobool(
            self.env.get(self.LMDB_PLAIN_CHAIN) or "no"
        )
        self._store: LMDBEnvironment | None = None
        self._release: weakref.finalize[Any, Any] | None = None
        self._recorders: weakref.WeakSet[LMDBRecorder] = weakref.WeakSet()
        # The key store, once settle_chain has opened it: handed to the application
        # (take_key_store) rather than opened a second time.
        self._key_store: SqliteKeyStore | None = None

    def _open_key_store(self, path: Path) -> SqliteKeyStore:
        if self._key_store is None:
            self._key_store = SqliteKeyStore(path)
        return self._key_store

    def take_key_store(self) -> SqliteKeyStore | None:
        """The key store this factory opened to settle the chain, for the application to
        keep (and close); None if it opened none."""
        store, self._key_store = self._key_store, None
        return store

    def _env_int(self, key: str, default: int) -> int:
        value = self.env.get(key)
        if not value:
            return default
        try:
            return int(value)
        except ValueError:
            msg = f"LMDB environment value for key '{key}' is not an integer: {value!r}"
            raise OSError(msg) from None

    def _chain_key(self) -> bytes | None:
        value = self.env.get(self.LMDB_CHAIN_KEY)
        if not value:
            return None
        try:
            return bytes.fromhex(value)
        except ValueError:
            msg = f"LMDB environment value for key '{self.LMDB_CHAIN_KEY}' is not hex"
            raise OSError(msg) from None

    @property
    def store(self) -> LMDBEnvironment:
        """The shared store, opened on first use (factories used only for mappers never are).

        A key store is made after the log it serves: one found where no log is (``data.mdb``
        deleted) belongs to a log that is gone, and no new one is made beside it
        (:class:`~membrane_es.errors.KeyStoreError`; nothing is created)."""
        if self._store is None:
            key_file = self._key_file
            if (
                key_file is not None
                and key_file.is_file()
                and not (Path(self.path) / DATA_FILE).is_file()
            ):
                raise lost_log(key_file, self.path)
            self._store = open_environment(
                self.path, map_size=self.map_size, sync=self.sync, max_dbs=self.max_dbs
            )
            self._release = weakref.finalize(self, self._store.release)
        return self._store

    def env_create_table(self) -> bool:
        return strtobool(self.env.get(self.CREATE_TABLE) or "yes")

    def aggregate_recorder(self, purpose: str = "events") -> LMDBAggregateRecorder:
        prefix = self.env.name.lower() or "stored"
        return self._prepare(type(self).aggregate_recorder_class(self.store, prefix, purpose))

    def application_recorder(self) -> LMDBApplicationRecorder:
        prefix = self.env.name.lower() or "stored"
        topic = self.env.get(self.APPLICATION_RECORDER_TOPIC)
        cls = resolve_topic(topic) if topic else type(self).application_recorder_class
        assert issubclass(cls, LMDBApplicationRecorder), cls
        recorder = self._prepare(cls(self.store, prefix, self.chain))
        if self._key_file is not None:
            recorder.settle_chain(
                self._key_file, self._keyed_by_store, open_keys=self._open_key_store
            )
        recorder.check_chain()
        return recorder

    def tracking_recorder(
        self, tracking_recorder_class: type[TLMDBTrackingRecorder] | None = None
    ) -> TLMDBTrackingRecorder:
        prefix = self.env.name.lower() or "notification"
        if tracking_recorder_class is None:
            topic = self.env.get(self.TRACKING_RECORDER_TOPIC)
            tracking_recorder_class = cast(
                "type[TLMDBTrackingRecorder]",
                resolve_topic(topic) if topic else type(self).tracking_recorder_class,
            )
        assert issubclass(tracking_recorder_class, LMDBTrackingRecorder), tracking_recorder_class
        return self._prepare(tracking_recorder_class(self.store, prefix))

    def process_recorder(self) -> LMDBProcessRecorder:
        prefix = self.env.name.lower() or "stored"
        topic = self.env.get(self.PROCESS_RECORDER_TOPIC)
        cls = resolve_topic(topic) if topic else type(self).process_recorder_class
        assert issubclass(cls, LMDBProcessRecorder), cls
        recorder = self._prepare(cls(self.store, prefix, self.chain))
        if self._key_file is not None:
            recorder.settle_chain(
                self._key_file, self._keyed_by_store, open_keys=self._open_key_store
            )
        recorder.check_chain()
        return recorder

    def _prepare(self, recorder: R) -> R:
        self._recorders.add(recorder)
        if self.env_create_table():
            recorder.create_table()
        return recorder

    def close(self) -> None:
        """Close this factory's recorders and give up its share of the store."""
        try:
            kept = self.take_key_store()  # if the application did not take it
            if kept is not None:
                kept.close()
        finally:
            for recorder in list(self._recorders):
                recorder.close()
            if self._release is not None:
                self._release()


Factory = LMDBFactory

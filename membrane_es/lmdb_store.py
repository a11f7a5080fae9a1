"""An eventsourcing persistence module over LMDB.

Select it with ``PERSISTENCE_MODULE=membrane_es.lmdb_store``. Settings, each
looked up with the application-name prefix first (``MYAPP_LMDB_PATH``):

``LMDB_PATH``
    Directory of the LMDB environment (required). Applications in one process
    that name the same directory share one environment.
``LMDB_MAP_SIZE``
    Initial map size in bytes (default 64 MiB); the map doubles when full.
``LMDB_SYNC``
    ``y`` (default): every commit is flushed to disk before it returns.
    ``n``: commits reach the OS only; a machine crash can lose the latest.
``LMDB_MAX_DBS``
    Maximum number of named sub-databases (default 128).
``CREATE_TABLE``
    ``y`` (default) creates the sub-databases when recorders are made.

Each application ``<name>`` gets the sub-databases ``<name>_events`` (the
aggregate sequences), ``<name>_notifications`` (the application sequence, hash
chained), ``<name>_meta`` (the head of that chain), ``<name>_snapshots`` and
``<name>_tracking``.
"""

from __future__ import annotations

import hashlib
import struct
import weakref
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast
from uuid import UUID

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    DataError,
    InfrastructureFactory,
    IntegrityError,
    InterfaceError,
    InternalError,
    ListenNotifySubscription,
    Notification,
    ProcessRecorder,
    ProgrammingError,
    StoredEvent,
    Tracking,
    TrackingRecorder,
)
from eventsourcing.utils import resolve_topic, strtobool

from membrane_es._lmdb_env import DEFAULT_MAP_SIZE, DEFAULT_MAX_DBS, LMDBStore, open_store

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import lmdb
    from eventsourcing.utils import Environment, EnvType

    from membrane_es._lmdb_env import Txn

__all__ = [
    "ChainFault",
    "ChainReport",
    "Factory",
    "LMDBAggregateRecorder",
    "LMDBApplicationRecorder",
    "LMDBFactory",
    "LMDBProcessRecorder",
    "LMDBRecorder",
    "LMDBStore",
    "LMDBSubscription",
    "LMDBTrackingRecorder",
    "open_store",
    "verify_chain",
    "verify_store",
]

T = TypeVar("T")
R = TypeVar("R", bound="LMDBRecorder")
TLMDBTrackingRecorder = TypeVar("TLMDBTrackingRecorder", bound="LMDBTrackingRecorder")

# Storage format ---------------------------------------------------------------------
#
# events         key: originator key ‖ u64(version + 2**63)
#                value: u64(notification id, 0 if none) ‖ u32(len topic) ‖ topic ‖ state
# notifications  key: u64(notification id)
#                value: chain hash (32 bytes) ‖ events key
# meta           b"head" → u64(last notification id) ‖ chain hash of that row
# tracking       key: application name (UTF-8) → u64(notification id)
#
# The originator key carries a type tag so ids come back as the type they went in
# as, and a length for strings so that one originator's keys are contiguous.

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_ROW = struct.Struct(">QI")
_UUID_TAG = 1
_STR_TAG = 2
_VERSION_BIAS = 1 << 63  # big-endian keys then sort negative versions first
_HASH_SIZE = 32
_GENESIS = bytes(_HASH_SIZE)
_HEAD_KEY = b"head"


def _originator_key(originator_id: UUID | str) -> bytes:
    if isinstance(originator_id, UUID):
        return bytes((_UUID_TAG,)) + originator_id.bytes
    if isinstance(originator_id, str):
        raw = originator_id.encode("utf-8")
        return bytes((_STR_TAG,)) + _U32.pack(len(raw)) + raw
    raise DataError(f"Originator id must be a UUID or str: {originator_id!r}")


def _decode_originator(key: bytes) -> UUID | str:
    if key[0] == _UUID_TAG:
        return UUID(bytes=key[1:17])
    (length,) = _U32.unpack_from(key, 1)
    return key[5 : 5 + length].decode("utf-8")


def _version_suffix(version: int) -> bytes:
    try:
        return _U64.pack(version + _VERSION_BIAS)
    except struct.error:
        raise DataError(f"Originator version out of range: {version}") from None


def _version_of(key: bytes) -> int:
    (biased,) = _U64.unpack_from(key, len(key) - 8)
    return int(biased) - _VERSION_BIAS


def _decode_row(value: bytes) -> tuple[int, str, bytes]:
    notification_id, topic_length = _ROW.unpack_from(value)
    end = _ROW.size + topic_length
    return notification_id, value[_ROW.size : end].decode("utf-8"), value[end:]


def chain_hash(
    previous: bytes, notification_id: int, event_key: bytes, topic: bytes, state: bytes
) -> bytes:
    """Return the hash chaining one notification to the previous one."""
    # Every field before the state is self-delimiting, so the input is unambiguous.
    return hashlib.blake2b(
        previous + _U64.pack(notification_id) + event_key + _U32.pack(len(topic)) + topic + state,
        digest_size=_HASH_SIZE,
    ).digest()


# Write steps, run by the store inside a (possibly shared) write transaction --------


def _put_records(txn: Txn, events_db: lmdb._Database, events: Sequence[StoredEvent]) -> None:
    for event in events:
        key = _originator_key(event.originator_id) + _version_suffix(event.originator_version)
        topic = event.topic.encode("utf-8")
        value = _ROW.pack(0, len(topic)) + topic + event.state
        if not txn.put(key, value, overwrite=False, db=events_db):
            raise IntegrityError(_conflict(event))


def _append_events(
    txn: Txn,
    dbs: tuple[lmdb._Database, lmdb._Database, lmdb._Database],
    events: Sequence[StoredEvent],
) -> list[int]:
    events_db, log_db, meta_db = dbs
    head = txn.get(_HEAD_KEY, db=meta_db)
    if head is None:
        last, previous = 0, _GENESIS
    else:
        (last,) = _U64.unpack_from(head)
        previous = head[8 : 8 + _HASH_SIZE]
    notification_ids = []
    for event in events:
        # Ids come from the head inside the write transaction: LMDB has one
        # writer, so they are gap-free and in commit order.
        last += 1
        key = _originator_key(event.originator_id) + _version_suffix(event.originator_version)
        topic = event.topic.encode("utf-8")
        if not txn.put(
            key, _ROW.pack(last, len(topic)) + topic + event.state, overwrite=False, db=events_db
        ):
            raise IntegrityError(_conflict(event))
        previous = chain_hash(previous, last, key, topic, event.state)
        if not txn.put(_U64.pack(last), previous + key, append=True, db=log_db):
            raise IntegrityError(f"Notification id {last} already used")
        notification_ids.append(last)
    if notification_ids:
        txn.put(_HEAD_KEY, _U64.pack(last) + previous, db=meta_db)
    return notification_ids


def _put_tracking(txn: Txn, tracking_db: lmdb._Database, tracking: Tracking) -> None:
    key = tracking.application_name.encode("utf-8")
    current = txn.get(key, db=tracking_db)
    if current is not None:
        (current_id,) = _U64.unpack(current)
        if current_id >= tracking.notification_id:
            raise IntegrityError(
                f"Tracking notification ID {tracking.notification_id} not greater than "
                f"current max tracking ID {current_id} for {tracking.application_name!r}"
            )
    txn.put(key, _U64.pack(tracking.notification_id), db=tracking_db)


def _conflict(event: StoredEvent) -> str:
    return (
        f"Event already recorded: originator {event.originator_id!r} "
        f"version {event.originator_version}"
    )


# Recorders ------------------------------------------------------------------------


class LMDBRecorder:
    """Base of the LMDB recorders: a share of a store and sub-databases named by prefix."""

    def __init__(self, store: LMDBStore, prefix: str) -> None:
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
        """Give up this recorder's share of the store."""
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

    def __init__(self, store: LMDBStore, prefix: str, purpose: str = "events") -> None:
        super().__init__(store, prefix)
        self.events_table = self.table_name(purpose)
        self.tables.append(self.events_table)

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        if not stored_events:
            return None
        events_db = self._require(self.events_table)
        events = list(stored_events)
        self.store.write(lambda txn: _put_records(txn, events_db, events))
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
        prefix = _originator_key(originator_id)
        size = len(prefix) + 8
        results: list[StoredEvent] = []
        with self.store.reading() as txn:
            cursor = txn.cursor(db=events_db)
            if not desc:
                start = prefix if gt is None else prefix + _version_suffix(gt + 1)
                if not cursor.set_range(start):
                    return results
                rows = cursor.iternext()
            else:
                end = prefix + (b"\xff" * 8 if lte is None else _version_suffix(lte))
                if cursor.set_range(end):
                    positioned = cursor.key() == end or cursor.prev()
                else:
                    positioned = cursor.last()
                if not positioned:
                    return results
                rows = cursor.iterprev()
            for key, value in rows:
                if len(key) != size or not key.startswith(prefix):
                    break
                version = _version_of(key)
                if (lte is not None and version > lte) or (gt is not None and version <= gt):
                    break
                _, topic, state = _decode_row(value)
                results.append(StoredEvent(originator_id, version, topic, state))
                if limit is not None and len(results) >= limit:
                    break
        return results


class LMDBApplicationRecorder(LMDBAggregateRecorder, ApplicationRecorder):
    """Records aggregate sequences and a hash-chained application sequence."""

    def __init__(self, store: LMDBStore, prefix: str) -> None:
        super().__init__(store, prefix)
        self.notifications_table = self.table_name("notifications")
        self.meta_table = self.table_name("meta")
        self.tables += [self.notifications_table, self.meta_table]
        # Subscriptions of this log are woken by commits on this channel.
        self.channel = self.notifications_table

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> list[int]:
        if not stored_events:
            return []
        dbs = self._log_dbs()
        events = list(stored_events)
        return self.store.write(lambda txn: _append_events(txn, dbs, events), self.channel)

    def _log_dbs(self) -> tuple[lmdb._Database, lmdb._Database, lmdb._Database]:
        return (
            self._require(self.events_table),
            self._require(self.notifications_table),
            self._require(self.meta_table),
        )

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
        results: list[Notification] = []
        with self.store.reading() as txn:
            cursor = txn.cursor(db=log_db)
            if not cursor.set_range(_U64.pack(max(first, 1))):
                return results
            for key, value in cursor.iternext():
                (notification_id,) = _U64.unpack(key)
                if stop is not None and notification_id > stop:
                    break
                event_key = value[_HASH_SIZE:]
                row = txn.get(event_key, db=events_db)
                if row is None:
                    raise InternalError(
                        f"Notification {notification_id} refers to a missing event "
                        f"row in {self.events_table!r}; run verify()"
                    )
                _, topic, state = _decode_row(row)
                if wanted and topic not in wanted:
                    continue
                results.append(
                    Notification(
                        id=notification_id,
                        originator_id=_decode_originator(event_key),
                        originator_version=_version_of(event_key),
                        topic=topic,
                        state=state,
                    )
                )
                if len(results) >= limit:
                    break
        return results

    def max_notification_id(self) -> int | None:
        return self._head_id() or None

    def _head_id(self) -> int:
        meta_db = self._db(self.meta_table)
        if meta_db is None:
            return 0
        with self.store.reading() as txn:
            head = txn.get(_HEAD_KEY, db=meta_db)
        return 0 if head is None else int(_U64.unpack_from(head)[0])

    def subscribe(self, gt: int | None = None, topics: Sequence[str] = ()) -> LMDBSubscription:
        return LMDBSubscription(recorder=self, gt=gt, topics=topics)

    def verify(self, chunk_size: int = 1000) -> ChainReport:
        """Check the application sequence against its hash chain."""
        return verify_chain(self, chunk_size=chunk_size)


class LMDBSubscription(ListenNotifySubscription[LMDBApplicationRecorder]):
    """Iterates over an application sequence, blocking at its end until more is committed."""

    def __init__(
        self,
        recorder: LMDBApplicationRecorder,
        gt: int | None = None,
        topics: Sequence[str] = (),
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        recorder.store.add_listener(recorder.channel, self._has_been_notified, recorder._head_id)
        if self._has_been_stopped:
            self._unlisten()
        else:
            # A commit between the pull thread's first read and add_listener
            # would otherwise go unnoticed until the next one.
            self._has_been_notified.set()

    def stop(self) -> None:
        super().stop()
        self._unlisten()

    def _unlisten(self) -> None:
        self._recorder.store.remove_listener(self._recorder.channel, self._has_been_notified)


class LMDBTrackingRecorder(LMDBRecorder, TrackingRecorder):
    """Records how far an upstream application sequence has been processed.

    Materialised views subclass it: list extra sub-databases in ``view_tables``,
    get them with :meth:`view_db`, and change them with :meth:`write_tracked`
    so that the change and its tracking record commit together.
    """

    view_tables: ClassVar[tuple[str, ...]] = ()

    def __init__(self, store: LMDBStore, prefix: str) -> None:
        super().__init__(store, prefix)
        self.tracking_table = self.table_name("tracking")
        self.tables.append(self.tracking_table)
        self.tables += [self.table_name(suffix) for suffix in self.view_tables]

    def insert_tracking(self, tracking: Tracking) -> None:
        tracking_db = self._require(self.tracking_table)
        self.store.write(lambda txn: _put_tracking(txn, tracking_db, tracking))

    def max_tracking_id(self, application_name: str) -> int | None:
        tracking_db = self._db(self.tracking_table)
        if tracking_db is None:
            return None
        with self.store.reading() as txn:
            value = txn.get(application_name.encode("utf-8"), db=tracking_db)
        return None if value is None else int(_U64.unpack(value)[0])

    def view_db(self, suffix: str) -> lmdb._Database:
        """Return the view's sub-database with the given suffix."""
        return self._require(self.table_name(suffix))

    def write_tracked(self, tracking: Tracking | None, update: Callable[[Txn], T]) -> T:
        """Apply update and record tracking in one transaction; return update's result.

        update receives the write transaction and must only use it (it may run
        more than once, and must not call other recorder methods).
        """
        tracking_db = self._require(self.tracking_table)

        def work(txn: Txn) -> T:
            if tracking is not None:
                _put_tracking(txn, tracking_db, tracking)
            return update(txn)

        return self.store.write(work)

    def read(self, query: Callable[[Txn], T]) -> T:
        """Run query in one short read transaction and return its result."""
        with self.store.reading() as txn:
            return query(txn)


class LMDBProcessRecorder(LMDBTrackingRecorder, LMDBApplicationRecorder, ProcessRecorder):
    """Records new events together with the tracking record of what caused them."""

    def __init__(self, store: LMDBStore, prefix: str) -> None:
        super().__init__(store, prefix)

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> list[int]:
        tracking: Tracking | None = kwargs.get("tracking")
        if tracking is None:
            return super().insert_events(stored_events, **kwargs)
        tracking_db = self._require(self.tracking_table)
        events = list(stored_events)
        dbs = self._log_dbs() if events else None

        def work(txn: Txn) -> list[int]:
            _put_tracking(txn, tracking_db, tracking)
            return _append_events(txn, dbs, events) if dbs is not None else []

        return self.store.write(work, self.channel if events else None)


# Hash-chain verification ---------------------------------------------------------------


class ChainFault(StrEnum):
    """What is wrong at the first bad position of a notification log."""

    ALTERED = "altered"
    MISSING = "missing"
    REORDERED = "reordered"
    UNLOGGED = "unlogged"


@dataclass(frozen=True)
class ChainReport:
    """The outcome of verifying a notification log: OK, or its first fault."""

    checked: int
    fault: ChainFault | None = None
    notification_id: int | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.fault is None

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return f"OK: {self.checked} notifications verified"
        return f"{self.fault}: notification {self.notification_id}: {self.detail}"


def verify_chain(recorder: LMDBApplicationRecorder, chunk_size: int = 1000) -> ChainReport:
    """Walk a recorder's notification log and report the first broken link, if any."""
    store = recorder.store
    events_db = recorder._db(recorder.events_table)
    log_db = recorder._db(recorder.notifications_table)
    meta_db = recorder._db(recorder.meta_table)
    if events_db is None or log_db is None or meta_db is None:
        return ChainReport(checked=0)
    with store.reading() as txn:
        head = txn.get(_HEAD_KEY, db=meta_db)
    head_id = 0 if head is None else int(_U64.unpack_from(head)[0])
    head_hash = _GENESIS if head is None else head[8:]
    expected, previous = 1, _GENESIS
    # One short read transaction per chunk, so a long log doesn't pin old pages.
    while expected <= head_id:
        with store.reading() as txn:
            cursor = txn.cursor(db=log_db)
            if not cursor.set_range(_U64.pack(expected)):
                return ChainReport(
                    expected - 1,
                    ChainFault.MISSING,
                    expected,
                    f"log ends at {expected - 1} but its head is {head_id}",
                )
            for count, (key, value) in enumerate(cursor.iternext(), start=1):
                (notification_id,) = _U64.unpack(key)
                if notification_id > head_id:
                    break
                if notification_id != expected:
                    return ChainReport(
                        expected - 1,
                        ChainFault.MISSING,
                        expected,
                        f"no row for notification {expected} (next row is {notification_id})",
                    )
                stored_hash, event_key = value[:_HASH_SIZE], value[_HASH_SIZE:]
                row = txn.get(event_key, db=events_db)
                if row is None:
                    return ChainReport(
                        expected - 1,
                        ChainFault.MISSING,
                        expected,
                        "the event row it refers to is missing",
                    )
                recorded_id, topic, state = _decode_row(row)
                if recorded_id != notification_id:
                    return ChainReport(
                        expected - 1,
                        ChainFault.REORDERED,
                        expected,
                        f"holds the event recorded as notification {recorded_id}",
                    )
                computed = chain_hash(
                    previous, notification_id, event_key, topic.encode("utf-8"), state
                )
                if computed != stored_hash:
                    return ChainReport(
                        expected - 1,
                        ChainFault.ALTERED,
                        expected,
                        "content does not match the hash chain",
                    )
                previous = stored_hash
                expected += 1
                if count >= chunk_size:
                    break
    if previous != head_hash:
        return ChainReport(head_id, ChainFault.ALTERED, head_id, "log head does not match")
    with store.reading() as txn:
        head = txn.get(_HEAD_KEY, db=meta_db)
        entries = txn.stat(events_db)["entries"]
    logged = 0 if head is None else int(_U64.unpack_from(head)[0])
    if entries > logged:
        return ChainReport(
            head_id,
            ChainFault.UNLOGGED,
            None,
            f"{entries - logged} event rows are not in the notification log",
        )
    return ChainReport(head_id)


def verify_store(path: str, application_name: str) -> ChainReport:
    """Verify the notification log of the named application in the LMDB directory at path."""
    store = open_store(path)
    try:
        recorder = LMDBApplicationRecorder(store, application_name.lower())
        try:
            return recorder.verify()
        finally:
            recorder.close()
    finally:
        store.release()


# Factory ----------------------------------------------------------------------------


class LMDBFactory(InfrastructureFactory[LMDBTrackingRecorder]):
    """Constructs LMDB recorders for an application from its environment."""

    LMDB_PATH = "LMDB_PATH"
    LMDB_MAP_SIZE = "LMDB_MAP_SIZE"
    LMDB_SYNC = "LMDB_SYNC"
    LMDB_MAX_DBS = "LMDB_MAX_DBS"
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
        self._store: LMDBStore | None = None
        self._release: weakref.finalize[Any, Any] | None = None
        self._recorders: weakref.WeakSet[LMDBRecorder] = weakref.WeakSet()

    def _env_int(self, key: str, default: int) -> int:
        value = self.env.get(key)
        if not value:
            return default
        try:
            return int(value)
        except ValueError:
            msg = f"LMDB environment value for key '{key}' is not an integer: {value!r}"
            raise OSError(msg) from None

    @property
    def store(self) -> LMDBStore:
        """The shared store, opened on first use (mapper-only factories never open it)."""
        if self._store is None:
            self._store = open_store(
                self.path, map_size=self.map_size, sync=self.sync, max_dbs=self.max_dbs
            )
            self._release = weakref.finalize(self, self._store.release)
        return self._store

    def env_create_table(self) -> bool:
        return strtobool(self.env.get(self.CREATE_TABLE) or "yes")

    def _prepare(self, recorder: R) -> R:
        self._recorders.add(recorder)
        if self.env_create_table():
            recorder.create_table()
        return recorder

    def aggregate_recorder(self, purpose: str = "events") -> LMDBAggregateRecorder:
        prefix = self.env.name.lower() or "stored"
        return self._prepare(type(self).aggregate_recorder_class(self.store, prefix, purpose))

    def application_recorder(self) -> LMDBApplicationRecorder:
        prefix = self.env.name.lower() or "stored"
        topic = self.env.get(self.APPLICATION_RECORDER_TOPIC)
        cls = resolve_topic(topic) if topic else type(self).application_recorder_class
        assert issubclass(cls, LMDBApplicationRecorder), cls
        return self._prepare(cls(self.store, prefix))

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
        assert tracking_recorder_class is not None
        assert issubclass(tracking_recorder_class, LMDBTrackingRecorder), tracking_recorder_class
        return self._prepare(tracking_recorder_class(self.store, prefix))

    def process_recorder(self) -> LMDBProcessRecorder:
        prefix = self.env.name.lower() or "stored"
        topic = self.env.get(self.PROCESS_RECORDER_TOPIC)
        cls = resolve_topic(topic) if topic else type(self).process_recorder_class
        assert issubclass(cls, LMDBProcessRecorder), cls
        return self._prepare(cls(self.store, prefix))

    def close(self) -> None:
        """Close this factory's recorders and give up its share of the store."""
        for recorder in list(self._recorders):
            recorder.close()
        if self._release is not None:
            self._release()


Factory = LMDBFactory

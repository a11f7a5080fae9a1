"""How events, the notification log and tracking are laid out in LMDB, and checked.

Package-private support for :mod:`membrane_es.stores.lmdb.recorders`. Sub-databases:

events         key: originator key ‖ u64(version + 2**63)
               value: u64(notification id, 0 if none) ‖ u32(len topic) ‖ topic ‖ state
                  or, for a packed event, u64(notification id) ‖ u32(2**31 | topic number)
                  ‖ u64(pack id) ‖ u32(offset of its state in the pack) ‖ u32(len state)
               and, per originator of the log, its head (see :mod:`membrane_es.stores.lmdb.heads`)
               and the packs: key b"\x00" ‖ u64(pack id) → u16(topics) ‖ (u16(len topic) ‖
               topic)… ‖ the state of each event packed in it, one after the other (the id:
               the first one's notification)
notifications  key: u64(notification id)
               value: chain hash (32 bytes) ‖ events key
meta           b"head" → u64(last notification id) ‖ chain hash of that row
               b"chain" → b"plain", or b"keyed" ‖ the key's fingerprint (16 bytes)
               b"keys" → the identity of the store's key store (16 bytes), once bound
               b"time" → i64(newest event time, µs since the epoch), when saves give times
               b"records" → u64(records created in the log: its ``Created`` events)
               b"heads" → u64(how many heads the events sub-database holds)
               b"packs" → u64(how many packs the events sub-database holds)
               b"packed" → u64(the last notification :func:`repack` has looked at)
               b"import" → b"" while an import fills the log (see :func:`clear_log`)
tracking       key: application name (UTF-8) → u64(notification id)

The originator key carries a type tag so that ids come back as the type they
went in as, and a length for strings so that one originator's keys are
contiguous. The chain hash of a notification is
blake2b-256(previous hash ‖ id ‖ events key ‖ topic ‖ state), keyed with the chain key in a
keyed store (blake2b's own keyed mode: a MAC, so nobody without the key can recompute it).

Events too large to share a page are packed (see :mod:`membrane_es.stores.lmdb.packs`).

Every read checks what it returns against the chain: an event read by its originator is
hashed with its log entry's predecessor and compared with the hash its log entry holds, and a
page of the log is hashed link by link. A mismatch, a missing row, a version gap or a read
that stops before its originator's latest logged version raises
:class:`~membrane_es.errors.IntegrityError` naming the notification.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from eventsourcing.persistence import IntegrityError as ConcurrentWrite
from eventsourcing.persistence import (
    Notification,
    StoredEvent,
    Tracking,
)

import membrane_es.stores.lmdb.heads as heads
from membrane_es.errors import IntegrityError
from membrane_es.stores.chain import (
    GENESIS,
    HASH_SIZE,
    PLAIN_CHAIN,
    Chain,
    ChainFault,
    ChainReport,
    check_span,
    decode_originator,
    originator_key,
    span_of,
    version_of,
    version_suffix,
)
from membrane_es.stores.event_times import EventTimeBehind
from membrane_es.stores.lmdb.packs import (
    INLINE_LIMIT,
    PACKED,
    PACKED_KEY,
    REPACK_EVERY,
    ROW,
    U64,
    MissingPackError,
    RowReader,
    altered,
    large_rows,
    pack_count,
    write_packs,
)
from membrane_es.stores.log_stamp import UNSTAMPED, LogStamp
from membrane_es.stores.record_numbers import INITIAL_VERSION, check_numbers, creations

if TYPE_CHECKING:
    from collections.abc import Sequence

    import lmdb

    from membrane_es.stores.lmdb.environment import BufferTxn, LMDBEnvironment, Txn

HEAD_KEY = b"head"
CHAIN_KEY = b"chain"
KEY_STORE_KEY = b"keys"
TIME_KEY = b"time"
RECORDS_KEY = b"records"
IMPORT_KEY = b"import"
_I64 = struct.Struct(">q")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# How many log entries a read may scan to name the notification of a missing event row.
_GAP_SCAN = 10_000


def read_chain_mode(txn: Txn, meta_db: lmdb._Database) -> bytes | None:
    """The chain mode the log recorded (None: not recorded; a plain log)."""
    return txn.get(CHAIN_KEY, db=meta_db)


def read_key_store_identity(txn: Txn, meta_db: lmdb._Database) -> bytes | None:
    """The identity of the key store the log was bound to (None: not bound yet)."""
    return txn.get(KEY_STORE_KEY, db=meta_db)


def stored_hash(txn: Txn | BufferTxn, log_db: lmdb._Database, notification_id: int) -> bytes:
    """The chain hash notification ``notification_id`` holds (the genesis value for 0)."""
    if notification_id == 0:
        return GENESIS
    entry = txn.get(U64.pack(notification_id), db=log_db)
    if entry is None:
        raise IntegrityError(
            f"notification {notification_id} is missing from the log", notification_id
        )
    return bytes(entry[:HASH_SIZE])


def check_event(
    txn: Txn | BufferTxn,
    log_db: lmdb._Database,
    chain: Chain,
    notification_id: int,
    event_key: bytes,
    topic: bytes,
    state: bytes,
) -> None:
    """Raise :class:`~membrane_es.errors.IntegrityError` unless the event read by its
    originator is the one its log entry chains."""
    entry = txn.get(U64.pack(notification_id), db=log_db)
    if entry is None or entry[HASH_SIZE:] != event_key:
        raise altered(notification_id)
    previous = stored_hash(txn, log_db, notification_id - 1)
    if chain.link(previous, notification_id, event_key, topic, state) != entry[:HASH_SIZE]:
        raise altered(notification_id)


def read_head(txn: Txn, meta_db: lmdb._Database) -> tuple[int, bytes]:
    """Return the last notification id (0 if none) and its chain hash."""
    head = txn.get(HEAD_KEY, db=meta_db)
    if head is None:
        return 0, GENESIS
    return int(U64.unpack_from(head)[0]), head[8 : 8 + HASH_SIZE]


def _conflict(event: StoredEvent) -> str:
    return (
        f"Event already recorded: originator {event.originator_id!r} "
        f"version {event.originator_version}"
    )


# Writes: each runs inside a (possibly shared) write transaction and raises to undo.

Touched = Callable[[int], None]


def nowhere(places: int) -> None:
    """A ``touched`` that counts nothing (no map to give pages back to)."""


def put_records(txn: Txn, events_db: lmdb._Database, events: Sequence[StoredEvent]) -> None:
    """Write events that are not part of a notification log (snapshots)."""
    for event in events:
        key = originator_key(event.originator_id) + version_suffix(event.originator_version)
        topic = event.topic.encode("utf-8")
        value = ROW.pack(0, len(topic)) + topic + event.state
        if not txn.put(key, value, overwrite=False, db=events_db):
            raise ConcurrentWrite(_conflict(event))


def mark_import(txn: Txn, meta_db: lmdb._Database, unfinished: bool) -> None:
    """Mark the log as being filled by an import (``unfinished``), or no longer."""
    if unfinished:
        txn.put(IMPORT_KEY, b"", db=meta_db)
    else:
        txn.delete(IMPORT_KEY, db=meta_db)


def import_unfinished(txn: Txn, meta_db: lmdb._Database) -> bool:
    """Whether an import began filling the log and did not end."""
    return txn.get(IMPORT_KEY, db=meta_db) is not None


def clear_log(txn: Txn, dbs: tuple[lmdb._Database, lmdb._Database, lmdb._Database]) -> None:
    """Empty the log: every event, head and pack, every notification, and what ``meta`` says
    of them (head, chain mode, time, counts, the import mark); only the key store binding
    stays. What an import that did not finish wrote goes, for it to start over."""
    events_db, log_db, meta_db = dbs
    bound = txn.get(KEY_STORE_KEY, db=meta_db)
    for db in dbs:
        txn.drop(db, delete=False)
    if bound is not None:
        txn.put(KEY_STORE_KEY, bound, db=meta_db)


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def append_events(
    txn: Txn,
    dbs: tuple[lmdb._Database, lmdb._Database, lmdb._Database],
    events: Sequence[StoredEvent],
    chain: Chain = PLAIN_CHAIN,
    stamp: LogStamp = UNSTAMPED,
    touched: Touched = nowhere,
) -> list[int]:
    """Write events and append them to the hash-chained log; return their ids.

    ``touched(1)`` is called after each event is written: the places of the file it visited
    (its row and its head, under a random id) may be unmapped between two (see
    :meth:`~membrane_es.stores.lmdb.environment.LMDBEnvironment.touched`).

    The save's ``stamp`` is checked and kept (see :class:`~membrane_es.stores.log_stamp.LogStamp`):
    event times are refused with :class:`EventTimeBehind` unless the first is later than the
    newest event time already in the log (another process's clock may be ahead), so event
    times follow log order across processes; an imported time is not checked, but the log's
    time moves up to it, so the next write is checked against those events; record numbers
    are refused with :class:`~membrane_es.stores.record_numbers.RecordNumberBehind` unless
    the first is one more than the count of records in the log (see
    :mod:`membrane_es.stores.record_numbers`).
    Each originator's head is kept with the log; a version at or below it is refused (its
    row was deleted: see :mod:`membrane_es.stores.lmdb.heads`).
    """
    events_db, log_db, meta_db = dbs
    times, numbers, imported = stamp.event_times, stamp.record_numbers, stamp.imported_time
    known_heads = heads.index_log(txn, events_db, log_db, meta_db)
    new_heads = 0
    _count_records(txn, events_db, meta_db, events, numbers)
    if times is not None:
        first_time = _micros(times[0])
        # One event's save gives its time twice: converted once.
        last_time = first_time if times[1] is times[0] else _micros(times[1])
        newest = txn.get(TIME_KEY, db=meta_db)
        if newest is not None:
            (log_time,) = _I64.unpack(newest)
            if first_time <= log_time:
                raise EventTimeBehind(_EPOCH + timedelta(microseconds=log_time))
        txn.put(TIME_KEY, _I64.pack(last_time), db=meta_db)
    elif imported is not None:
        newest = txn.get(TIME_KEY, db=meta_db)
        if newest is None or _I64.unpack(newest)[0] < _micros(imported):
            txn.put(TIME_KEY, _I64.pack(_micros(imported)), db=meta_db)
    last, previous = read_head(txn, meta_db)
    if last == 0 and events:
        txn.put(CHAIN_KEY, chain.mode, db=meta_db)  # the first write fixes the chain's mode
        txn.put(PACKED_KEY, U64.pack(0), db=meta_db)  # repacked from here (see repack)
    notification_ids = []
    before = last
    keys = [originator_key(e.originator_id) + version_suffix(e.originator_version) for e in events]
    topics = [event.topic.encode("utf-8") for event in events]
    large = large_rows(keys, topics, events)
    # A pack holds two or more events: a single event's save has none to write.
    pointers = (
        write_packs(txn, events_db, meta_db, last + 1, keys, topics, events, large=large)
        if len(events) > 1
        else {}
    )
    for index, event in enumerate(events):
        # Ids come from the head inside the write transaction: LMDB has one
        # writer, so they are gap-free and in commit order.
        last += 1
        key, topic = keys[index], topics[index]
        pointer = pointers.get(index)
        if pointer is None:
            row = ROW.pack(last, len(topic)) + topic + event.state
        else:
            row = ROW.pack(last, PACKED | pointer[0]) + pointer[1]
        if not txn.put(key, row, overwrite=False, db=events_db):
            raise ConcurrentWrite(_conflict(event))
        notification_key = U64.pack(last)
        new_heads += heads.advance(txn, events_db, key, notification_key)
        previous = chain.link(previous, last, key, topic, event.state)
        if not txn.put(notification_key, previous + key, append=True, db=log_db):
            raise ConcurrentWrite(f"Notification id {last} already used")
        notification_ids.append(last)
        touched(1)
    if notification_ids:
        txn.put(HEAD_KEY, U64.pack(last) + previous, db=meta_db)
        _advance_repack(txn, dbs, before, last, len(large) == 1, touched)
    if new_heads:
        txn.put(heads.COUNT_KEY, U64.pack(known_heads + new_heads), db=meta_db)
    return notification_ids


def _advance_repack(
    txn: Txn,
    dbs: tuple[lmdb._Database, lmdb._Database, lmdb._Database],
    before: int,
    last: int,
    leaves_row: bool,
    touched: Touched = nowhere,
) -> None:
    """After a commit appended notifications ``before + 1`` to ``last``: when everything up
    to ``before`` was looked at and the commit leaves no large event in a row of its own
    (``leaves_row``: a lone one, which only a repack packs), move the repack mark to ``last``
    without reading the commit's rows back (a read would map pages the writer never needs
    again); else repack once ``REPACK_EVERY`` notifications have followed the mark."""
    _, _, meta_db = dbs
    packed = txn.get(PACKED_KEY, db=meta_db)
    if packed is None:
        return  # a log from before repacking: nothing marks where to start
    done = int(U64.unpack(packed)[0])
    if done == before and not leaves_row:
        txn.put(PACKED_KEY, U64.pack(last), db=meta_db)
    elif last - done >= REPACK_EVERY:
        repack(txn, dbs, 4 * REPACK_EVERY, touched)


def repack(
    txn: Txn,
    dbs: tuple[lmdb._Database, lmdb._Database, lmdb._Database],
    limit: int,
    touched: Touched = nowhere,
) -> int:
    """Move the large events appended alone since the last repack (at most ``limit`` log
    entries are looked at) into packs; returns how many moved. Their bytes are unchanged
    (the chain, checked as they are read, vouches for them); each row then keeps where its
    event lies, as a row packed when written does. A row that is missing or damaged is left
    as it is: reads and :func:`verify_log` report it, and writes go on. ``touched(1)`` is
    called for each log entry looked at (see :func:`append_events`)."""
    events_db, log_db, meta_db = dbs
    last, _ = read_head(txn, meta_db)
    stored = txn.get(PACKED_KEY, db=meta_db)
    done = 0 if stored is None else int(U64.unpack(stored)[0])
    if done >= last:
        return 0
    stop = min(last, done + limit)
    cursor = txn.cursor(db=log_db)
    found: list[tuple[int, bytes, bytes, bytes]] = []  # notification, key, topic, state
    if cursor.set_range(U64.pack(done + 1)):
        for key, value in cursor.iternext():
            (notification_id,) = U64.unpack(key)
            if notification_id > stop:
                break
            touched(1)
            event_key = bytes(value[HASH_SIZE:])
            row = txn.get(event_key, db=events_db)
            if row is None or len(row) < ROW.size:
                continue  # damage is left where it is, for reads and verify() to report
            recorded_id, length = ROW.unpack_from(row)
            if length & PACKED or len(event_key) + len(row) <= INLINE_LIMIT:
                continue
            if recorded_id != notification_id or ROW.size + length > len(row):
                continue
            end = ROW.size + length
            found.append((notification_id, event_key, bytes(row[ROW.size : end]), row[end:]))
    moved = 0
    if len(found) >= 2:
        keys = [event_key for _, event_key, _, _ in found]
        topics = [topic for _, _, topic, _ in found]
        events = [StoredEvent("", 0, "", state) for _, _, _, state in found]
        # Pack ids are the first packed event's notification: never one a commit packed.
        pointers = write_packs(
            txn, events_db, meta_db, 0, keys, topics, events, [n for n, *_ in found]
        )
        for index, (notification_id, event_key, _, _) in enumerate(found):
            number, pointer = pointers[index]
            txn.put(event_key, ROW.pack(notification_id, PACKED | number) + pointer, db=events_db)
            moved += 1
    txn.put(PACKED_KEY, U64.pack(stop), db=meta_db)
    return moved


def _count_records(
    txn: Txn,
    events_db: lmdb._Database,
    meta_db: lmdb._Database,
    events: Sequence[StoredEvent],
    numbers: tuple[int, int] | None,
) -> None:
    """Check the save's record numbers against the log's count, and count its records."""
    stored = txn.get(RECORDS_KEY, db=meta_db)
    if stored is None:  # a log from before record numbers: counted once, here
        count = sum(
            1
            for key in txn.cursor(db=events_db).iternext(keys=True, values=False)
            if version_of(key) == INITIAL_VERSION
        )
    else:
        (count,) = U64.unpack(stored)
    created = creations(event.originator_version for event in events)
    after = check_numbers(count, numbers, created)
    if after != count or stored is None:
        txn.put(RECORDS_KEY, U64.pack(after), db=meta_db)


def put_tracking(txn: Txn, tracking_db: lmdb._Database, tracking: Tracking) -> None:
    """Record tracking unless its id is not above the one already recorded."""
    key = tracking.application_name.encode("utf-8")
    current = txn.get(key, db=tracking_db)
    if current is not None:
        (current_id,) = U64.unpack(current)
        if current_id >= tracking.notification_id:
            raise ConcurrentWrite(
                f"Tracking notification ID {tracking.notification_id} not greater than "
                f"current max tracking ID {current_id} for {tracking.application_name!r}"
            )
    txn.put(key, U64.pack(tracking.notification_id), db=tracking_db)


# Reads -------------------------------------------------------------------------------


def read_events(
    txn: Txn | BufferTxn,
    events_db: lmdb._Database,
    originator_id: UUID | str,
    gt: int | None,
    lte: int | None,
    desc: bool,
    limit: int | None,
    log_db: lmdb._Database | None = None,
    chain: Chain = PLAIN_CHAIN,
) -> list[StoredEvent]:
    """Return one originator's events with gt < version <= lte, in version order.

    With ``log_db`` (an application sequence), each event is checked against the chain, and
    a version missing between two that were read raises, naming its notification, and so
    does a missing version after the last one read (a deleted latest event: the originator's
    head names it), unless ``limit`` cut the read short.
    """
    prefix = originator_key(originator_id)
    size = len(prefix) + 8
    results: list[StoredEvent] = []
    cursor = txn.cursor(db=events_db)
    if not desc:
        start = prefix if gt is None else prefix + version_suffix(gt + 1)
        if not cursor.set_range(start):
            return results
        rows = cursor.iternext()
    else:
        end = prefix + (b"\xff" * 8 if lte is None else version_suffix(lte))
        if cursor.set_range(end):
            positioned = cursor.key() == end or cursor.prev()
        else:
            positioned = cursor.last()
        if not positioned:
            return results
        rows = cursor.iterprev()
    # Versions start at 1, without gaps.
    expected = None if desc else INITIAL_VERSION if gt is None else gt + 1
    last_id = 0
    reader = RowReader(txn, events_db)
    for found, value in rows:
        if len(found) != size or found[: len(prefix)] != prefix:
            break
        key = bytes(found)
        version = version_of(key)
        if (lte is not None and version > lte) or (gt is not None and version <= gt):
            break
        notification_id, topic, state = reader.parts(value)
        if log_db is not None and notification_id:
            if expected is not None and version != expected:
                raise _gap(txn, log_db, prefix + version_suffix(expected), last_id)
            check_event(txn, log_db, chain, notification_id, key, topic, state)
            last_id = notification_id
        if expected is not None:
            expected = version + 1
        results.append(StoredEvent(originator_id, version, topic.decode("utf-8"), state))
        if limit is not None and len(results) >= limit:
            break
    if log_db is not None and (desc or len(results) != limit):
        # The newest version read (desc: the first), else the one the range starts after.
        newest = results[0 if desc else -1].originator_version if results else (gt or 0)
        if lte is None or newest < lte:
            _check_tail(txn, events_db, log_db, prefix, newest, last_id)
    return results


def read_versions(
    txn: BufferTxn,
    events_db: lmdb._Database,
    log_db: lmdb._Database,
    keys: list[bytes],
    chain: Chain = PLAIN_CHAIN,
) -> list[bytes]:
    """The states of the events at these events keys (originator key ‖ version suffix), in
    order, each checked against the chain; a key with no row raises."""
    found = txn.cursor(db=events_db).getmulti(keys)  # a key not found is left out
    reader = RowReader(txn, events_db)
    states = []
    for index, (found_key, row) in enumerate(found):
        key = keys[index]
        if found_key != key:
            break
        notification_id, topic, state = reader.parts(row)
        if notification_id:
            check_event(txn, log_db, chain, notification_id, key, topic, state)
        states.append(state)
    if len(states) != len(keys):
        missing = keys[len(states)]
        raise IntegrityError(
            f"event version {version_of(missing)} of {decode_originator(missing)} is missing "
            "from the store; run verify()"
        )
    return states


def _check_tail(
    txn: Txn | BufferTxn,
    events_db: lmdb._Database,
    log_db: lmdb._Database,
    prefix: bytes,
    newest: int,
    last_id: int,
) -> None:
    """Raise if the log holds a later version of the originator than the newest read."""
    head = heads.head_of(txn, events_db, prefix)
    if head is None or head[0] <= newest:
        return
    version, notification_id = head
    if version == newest + 1:  # the latest event itself is gone: the heads name it
        raise IntegrityError(
            f"notification {notification_id} refers to a missing event row; run verify()",
            notification_id,
        )
    raise _gap(txn, log_db, prefix + version_suffix(newest + 1), last_id)


def _gap(
    txn: Txn | BufferTxn, log_db: lmdb._Database, missing: bytes, after: int
) -> IntegrityError:
    """The error for an event row that is gone: its log entry (found by a bounded scan from
    the notification before it) names its notification."""
    cursor = txn.cursor(db=log_db)
    if cursor.set_range(U64.pack(after + 1)):
        for count, (key, value) in enumerate(cursor.iternext()):
            if value[HASH_SIZE:] == missing:
                (notification_id,) = U64.unpack(bytes(key))
                return IntegrityError(
                    f"notification {notification_id} refers to a missing event row; run verify()",
                    notification_id,
                )
            if count >= _GAP_SCAN:
                break
    version = version_of(missing)
    return IntegrityError(f"event version {version} is missing from the store; run verify()")


def read_notifications(
    txn: Txn | BufferTxn,
    events_db: lmdb._Database,
    log_db: lmdb._Database,
    first: int,
    limit: int,
    stop: int | None,
    topics: frozenset[str],
    chain: Chain = PLAIN_CHAIN,
) -> list[Notification]:
    """Return up to limit notifications with first <= id <= stop, optionally of topics,
    each checked against the chain."""
    results: list[Notification] = []
    cursor = txn.cursor(db=log_db)
    first = max(first, 1)
    if not cursor.set_range(U64.pack(first)):
        return results
    previous = stored_hash(txn, log_db, first - 1)
    expected = first
    reader = RowReader(txn, events_db)
    for key, value in cursor.iternext():
        (notification_id,) = U64.unpack(key)
        if stop is not None and notification_id > stop:
            break
        if notification_id != expected:
            raise IntegrityError(f"notification {expected} is missing from the log", expected)
        expected += 1
        stored, event_key = bytes(value[:HASH_SIZE]), bytes(value[HASH_SIZE:])
        row = txn.get(event_key, db=events_db)
        if row is None:
            raise IntegrityError(
                f"notification {notification_id} refers to a missing event row; run verify()",
                notification_id,
            )
        recorded_id, raw, state = reader.parts(row)
        if (
            recorded_id != notification_id
            or chain.link(previous, notification_id, event_key, raw, state) != stored
        ):
            raise altered(notification_id)
        previous = stored
        topic = raw.decode("utf-8")
        if topics and topic not in topics:
            continue
        results.append(
            Notification(
                id=notification_id,
                originator_id=decode_originator(event_key),
                originator_version=version_of(event_key),
                topic=topic,
                state=state,
            )
        )
        if len(results) >= limit:
            break
    return results


@dataclass(frozen=True, slots=True)
class LogRows:
    """Consecutive rows of a notification log, column by column.

    What a projection replaying the log in bulk needs, without a ``Notification`` and two
    ``UUID`` objects per row: index ``i`` of every column is one row. Originator ids and
    versions are decoded from ``event_keys`` only when asked for.
    """

    ids: list[int]
    event_keys: list[bytes]
    topics: list[str]
    states: list[bytes]

    def __len__(self) -> int:
        return len(self.ids)

    def originator_id(self, index: int) -> UUID | str:
        """The originator id of row ``index``."""
        return decode_originator(self.event_keys[index])

    def originator_version(self, index: int) -> int:
        """The originator version of row ``index``."""
        return version_of(self.event_keys[index])


def read_log_rows(
    txn: BufferTxn,
    events_db: lmdb._Database,
    log_db: lmdb._Database,
    first: int,
    limit: int,
    stop: int | None,
    chain: Chain = PLAIN_CHAIN,
) -> LogRows:
    """Return up to limit rows with first <= id <= stop, in log order, as columns, each
    checked against the chain.

    Event rows sort by originator, not by log order, so they are looked up, all of a page's
    in one call. In a transaction with buffers, rows are read in place and each state copied
    out once.
    """
    rows = LogRows([], [], [], [])
    first = max(first, 1)
    if stop is not None:
        limit = min(limit, stop - first + 1)  # ids are distinct: no more rows than that
    cursor = txn.cursor(db=log_db)
    if limit <= 0 or not cursor.set_range(U64.pack(first)):
        return rows
    keys = rows.event_keys
    hashes: list[bytes] = []
    for value in cursor.iternext(keys=False):
        hashes.append(bytes(value[:HASH_SIZE]))
        keys.append(bytes(value[HASH_SIZE:]))
        if len(keys) >= limit:
            break
    found = txn.cursor(db=events_db).getmulti(keys)  # a key not found is left out
    if len(found) != len(keys):
        raise _missing_row(txn, events_db, log_db, first)
    ids, topics, states = rows.ids, rows.topics, rows.states
    unpack = ROW.unpack_from
    link = chain.link
    previous = stored_hash(txn, log_db, first - 1)
    expected = first
    # A page has few distinct topics: decode each once. Keys are bytes, looked up with the
    # row's memoryview (which hashes and compares as its bytes), so no copy per row.
    names: dict[bytes | memoryview, str] = {}
    reader = RowReader(txn, events_db)
    for index, (_, row) in enumerate(found):
        notification_id, topic_length = unpack(row)
        if stop is not None and notification_id > stop:
            del keys[len(ids) :]
            break
        if topic_length & PACKED:
            _, raw, state = reader.parts(row)
        else:
            end = ROW.size + topic_length
            raw = bytes(row[ROW.size : end])
            state = bytes(row[end:])
        # The row must be the one its log entry chains, at its place in the log.
        if (
            notification_id != expected
            or link(previous, expected, keys[index], raw, state) != hashes[index]
        ):
            raise altered(expected)
        previous = hashes[index]
        expected += 1
        topic = names.get(raw)
        if topic is None:
            topic = names[raw] = raw.decode("utf-8")
        ids.append(notification_id)
        topics.append(topic)
        states.append(state)
    return rows


def check_log_end(
    txn: Txn | BufferTxn, meta_db: lmdb._Database, next_id: int, stop: int | None
) -> None:
    """A read that ran out of log entries at ``next_id`` must have reached the head (or
    ``stop``): a log that ends before its head lost its tail."""
    head_value = txn.get(HEAD_KEY, db=meta_db)
    head = 0 if head_value is None else int(U64.unpack_from(head_value)[0])
    end = head if stop is None else min(stop, head)
    if next_id <= end:
        raise IntegrityError(
            f"notification {next_id} is missing from the log (it ends before its head, "
            f"{head}); run verify()",
            next_id,
        )


def _missing_row(
    txn: BufferTxn, events_db: lmdb._Database, log_db: lmdb._Database, first: int
) -> IntegrityError:
    """The error for the first notification from ``first`` on whose event row is missing."""
    cursor = txn.cursor(db=log_db)
    if cursor.set_range(U64.pack(max(first, 1))):
        for key, value in cursor.iternext():
            if txn.get(value[HASH_SIZE:], db=events_db) is None:
                (notification_id,) = U64.unpack(key)
                return IntegrityError(
                    f"notification {notification_id} refers to a missing event row; run verify()",
                    notification_id,
                )
    return IntegrityError("a notification refers to a missing event row; run verify()")


# Verification ------------------------------------------------------------------------


def _misplaced(
    txn: Txn | BufferTxn, log_db: lmdb._Database, event_key: bytes, recorded_id: int
) -> tuple[ChainFault, str]:
    """What it means that a log entry's event row was recorded under another notification.

    When that notification refers to the same row, the row is its own: this entry's event was
    deleted and its version written again later (by a store that did not refuse it). Else the
    entries were reordered.
    """
    owner = txn.get(U64.pack(recorded_id), db=log_db)
    if owner is not None and owner[HASH_SIZE:] == event_key:
        return (
            ChainFault.MISSING,
            f"the event row it refers to is missing (its version was written again by "
            f"notification {recorded_id})",
        )
    return ChainFault.REORDERED, f"holds the event recorded as notification {recorded_id}"


def verify_log(
    store: LMDBEnvironment,
    dbs: tuple[lmdb._Database, lmdb._Database, lmdb._Database],
    chunk_size: int = 1000,
    chain: Chain = PLAIN_CHAIN,
    first: int | None = None,
    last: int | None = None,
) -> ChainReport:
    """Walk a notification log up to its head and report the first broken link, if any;
    a store file too damaged to read is reported, not raised. ``first``/``last``: only the
    positions from ``first`` to ``last`` (see :func:`~membrane_es.stores.chain.span_of`)."""
    check_span(first, last)
    expected = [first or 1]
    try:
        return _walk(store, dbs, chunk_size, chain, expected, first, last)
    except IntegrityError as error:
        where = error.notification_id or expected[0]
        return ChainReport(where - (first or 1), ChainFault.CORRUPTED, where, str(error))


def _walk(
    store: LMDBEnvironment,
    dbs: tuple[lmdb._Database, lmdb._Database, lmdb._Database],
    chunk_size: int,
    chain: Chain,
    position: list[int],
    first: int | None,
    last: int | None,
) -> ChainReport:
    events_db, log_db, meta_db = dbs
    with store.reading() as txn:
        head_id, head_hash = read_head(txn, meta_db)
        mode = read_chain_mode(txn, meta_db)
        start, end = span_of(first, last, head_id)
        whole = first is None and last is None
        # A range links to the hash the log keeps of the notification before it.
        before = txn.get(U64.pack(start - 1), db=log_db) if start > 1 else None
    keyed = chain.mode != PLAIN_CHAIN.mode
    shown = (0, 0) if whole else (start, end)  # the report's range (0, 0: the whole log)
    if head_id and (mode or PLAIN_CHAIN.mode) != chain.mode:
        detail = "the chain's mode or key does not match the one given"
        return ChainReport(
            0, ChainFault.ALTERED, None, detail, keyed, first=shown[0], last=shown[1]
        )
    expected, previous = start, GENESIS

    def fault(kind: ChainFault, detail: str) -> ChainReport:
        return ChainReport(
            expected - start, kind, expected, detail, keyed, first=shown[0], last=shown[1]
        )

    if start > 1:
        if before is None:
            expected = start - 1
            return fault(ChainFault.MISSING, "the notification before the range is missing")
        previous = bytes(before[:HASH_SIZE])
    # One short read transaction per chunk, so a long walk doesn't pin old pages.
    while expected <= end:
        position[0] = expected
        with store.reading_buffers() as view:
            reader = RowReader(view, events_db)
            cursor = view.cursor(db=log_db)
            if not cursor.set_range(U64.pack(expected)):
                return fault(ChainFault.MISSING, f"log ends before its head ({head_id})")
            for count, (key, value) in enumerate(cursor.iternext(), start=1):
                (notification_id,) = U64.unpack(key)
                if notification_id > end:
                    break
                if notification_id != expected:
                    return fault(ChainFault.MISSING, f"next row is {notification_id}")
                stored, event_key = bytes(value[:HASH_SIZE]), bytes(value[HASH_SIZE:])
                row = view.get(event_key, db=events_db)
                if row is None:
                    return fault(ChainFault.MISSING, "the event row it refers to is missing")
                try:
                    recorded_id, topic, state = reader.parts(row)
                except MissingPackError as error:
                    return fault(ChainFault.MISSING, str(error))
                except IntegrityError as error:
                    return fault(ChainFault.ALTERED, str(error))
                if recorded_id != notification_id:
                    return fault(*_misplaced(view, log_db, event_key, recorded_id))
                if chain.link(previous, expected, event_key, topic, state) != stored:
                    return fault(ChainFault.ALTERED, "content does not match the hash chain")
                previous = stored
                expected += 1
                position[0] = expected
                if count >= chunk_size:
                    break
    if not whole:
        if end == head_id and previous != head_hash:
            return ChainReport(
                end - start + 1,
                ChainFault.ALTERED,
                head_id,
                "log head does not match",
                keyed,
                first=start,
                last=end,
            )
        # Rows outside the log are a fact of the whole store, which a range does not check.
        head = previous.hex() if end == head_id else ""
        return ChainReport(end - start + 1, keyed=keyed, head=head, first=start, last=end)
    if previous != head_hash:
        return ChainReport(head_id, ChainFault.ALTERED, head_id, "log head does not match", keyed)
    with store.reading() as txn:
        # Rows and log entries commit together, so in one snapshot they match.
        logged, _ = read_head(txn, meta_db)
        entries = txn.stat(events_db)["entries"] - (heads.count(txn, meta_db) or 0)
        entries -= pack_count(txn, meta_db)
    if entries > logged:
        return ChainReport(
            head_id,
            ChainFault.UNLOGGED,
            None,
            f"{entries - logged} event rows are not in the notification log",
            keyed,
        )
    return ChainReport(head_id, keyed=keyed, head=previous.hex())

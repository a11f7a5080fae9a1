"""Packs: events too large to share an LMDB page with another, written side by side.

Package-private support for :mod:`membrane_es.stores.lmdb.layout`, which owns the rest of the
layout; the row layout lives here because a row may point into a pack.

Packs exist because LMDB gives a value longer than about half a page (an event carrying a
vector: a 384-dimension one makes it about 2.4 kB) overflow pages of its own: 4 kB on disk for
every such event. When one commit appends two or more such events, their states are written
one after the other into packs of up to ``PACK_LIMIT`` bytes (whole pages then, but for one
partial page a pack), each topic once per pack, and each row keeps only where its state lies
and its topic's number in the pack. The chain hashes the topic and state wherever they lie,
so a pack changed or lost is caught as an altered or missing event. A commit with one large
event (a single write) stores it in its row; later, ``repack`` (in
:mod:`membrane_es.stores.lmdb.layout`) moves such rows into packs: every ``REPACK_EVERY``
notifications, in the write that reaches that many, and when the read views are
checkpointed. An event's bytes never change: only where they lie does.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

from eventsourcing.persistence import IntegrityError as ConcurrentWrite
from eventsourcing.persistence import StoredEvent

from membrane_es.errors import IntegrityError

if TYPE_CHECKING:
    import lmdb

    from membrane_es.stores.lmdb.environment import BufferTxn, Txn

U64 = struct.Struct(">Q")
# An events row: u64(notification id) ‖ u32(len topic, or PACKED | topic number) ‖ …
ROW = struct.Struct(">QI")
PACKED = 1 << 31  # in a row's topic length: its topic and state are in a pack
_POINTER = struct.Struct(">QII")  # a packed row's pack id, its state's offset and length
_U16 = struct.Struct(">H")
PACK_PREFIX = b"\x00"  # pack keys: before every originator's (type tags 1 and 2)
PACKS_KEY = b"packs"  # in the meta sub-database
PACKED_KEY = b"packed"  # in the meta sub-database
# A row whose key and value together exceed this is packed: beyond about half a 4 kB page
# LMDB gives it overflow pages of its own, and from about a quarter page (an event with a
# 384-dimension half-precision vector: about 1.6 kB) a B-tree leaf, about 70 % full, leaves
# a third of the row's size unused beside it.
INLINE_LIMIT = 1000
PACK_LIMIT = 256 * 1024  # bytes of topics and states in one pack
# A write repacks what single commits left unpacked once this many notifications followed
# the last repack: so the overflow pages it frees are reused by the writes that come next,
# and a store written one event at a time grows by about the packed size.
REPACK_EVERY = 64


def altered(notification_id: int) -> IntegrityError:
    return IntegrityError(
        f"notification {notification_id} does not match the hash chain (altered or reordered);"
        " run verify()",
        notification_id,
    )


def pack_key(pack_id: int) -> bytes:
    return PACK_PREFIX + U64.pack(pack_id)


def is_pack(key: bytes) -> bool:
    return key[:1] == PACK_PREFIX


class RowReader:
    """Reads events rows, packed or not, in one transaction; keeps the pack it read last
    (a read in log order finds most events in the pack of the one before)."""

    __slots__ = ("_txn", "_events_db", "_pack_id", "_pack", "_topics")

    def __init__(self, txn: Txn | BufferTxn, events_db: lmdb._Database) -> None:
        self._txn = txn
        self._events_db = events_db
        self._pack_id = -1
        self._pack: bytes | memoryview = b""
        self._topics: list[bytes] = []

    def parts(self, value: bytes | memoryview) -> tuple[int, bytes, bytes]:
        """(notification id, topic, state) of the row ``value``."""
        notification_id, length = ROW.unpack_from(value)
        if not length & PACKED:
            end = ROW.size + length
            return notification_id, bytes(value[ROW.size : end]), bytes(value[end:])
        pack_id, offset, size = _POINTER.unpack_from(value, ROW.size)
        if pack_id != self._pack_id:
            pack = self._txn.get(pack_key(pack_id), db=self._events_db)
            if pack is None:
                raise MissingPackError(
                    f"notification {notification_id} refers to a missing pack ({pack_id}); "
                    "run verify()",
                    notification_id,
                )
            try:
                self._topics = _pack_topics(pack)
            except struct.error:
                raise altered(notification_id) from None
            self._pack_id, self._pack = pack_id, pack
        pack, number = self._pack, length & ~PACKED
        if offset + size > len(pack) or number >= len(self._topics):
            raise altered(notification_id)
        return notification_id, self._topics[number], bytes(pack[offset : offset + size])


class MissingPackError(IntegrityError):
    """An event row refers to a pack that is not there."""


def _pack_topics(pack: bytes | memoryview) -> list[bytes]:
    """The topics a pack's rows refer to by number."""
    (count,) = _U16.unpack_from(pack)
    topics, at = [], _U16.size
    for _ in range(count):
        (length,) = _U16.unpack_from(pack, at)
        at += _U16.size
        topics.append(bytes(pack[at : at + length]))
        at += length
    return topics


def large_rows(keys: list[bytes], topics: list[bytes], events: Sequence[StoredEvent]) -> list[int]:
    """The indexes of the events too large for a row beside another (packed when a commit
    holds two or more of them; a lone one stays in its row until a repack)."""
    return [
        index
        for index, event in enumerate(events)
        if len(keys[index]) + ROW.size + len(topics[index]) + len(event.state) > INLINE_LIMIT
    ]


def write_packs(
    txn: Txn,
    events_db: lmdb._Database,
    meta_db: lmdb._Database,
    first_id: int,
    keys: list[bytes],
    topics: list[bytes],
    events: Sequence[StoredEvent],
    ids: list[int] | None = None,
    large: list[int] | None = None,
) -> dict[int, tuple[int, bytes]]:
    """Write the packs of these events (the first to be notification ``first_id``, or each
    the one ``ids`` gives) if two or more are too large for a row beside another; return the
    topic number and the pointer of each packed one. ``large``: :func:`large_rows` of these
    events, when the caller has it already."""
    if large is None:
        large = large_rows(keys, topics, events)
    if len(large) < 2:
        return {}
    pointers: dict[int, tuple[int, bytes]] = {}
    groups: list[list[int]] = [[]]
    size = 0
    for index in large:
        length = len(topics[index]) + len(events[index].state)
        if size and size + length > PACK_LIMIT:
            groups.append([])
            size = 0
        groups[-1].append(index)
        size += length
    for group in groups:
        pack_id = first_id + group[0] if ids is None else ids[group[0]]
        numbers = {topic: n for n, topic in enumerate(dict.fromkeys(topics[i] for i in group))}
        parts = [_U16.pack(len(numbers))]
        for topic in numbers:
            parts += (_U16.pack(len(topic)), topic)
        offset = sum(map(len, parts))
        for index in group:
            state = events[index].state
            pointers[index] = (numbers[topics[index]], _POINTER.pack(pack_id, offset, len(state)))
            parts.append(state)
            offset += len(state)
        if not txn.put(pack_key(pack_id), b"".join(parts), overwrite=False, db=events_db):
            raise ConcurrentWrite(f"Pack {pack_id} already written")
    stored = txn.get(PACKS_KEY, db=meta_db)
    packs = 0 if stored is None else int(U64.unpack(stored)[0])
    txn.put(PACKS_KEY, U64.pack(packs + len(groups)), db=meta_db)
    return pointers


def pack_count(txn: Txn, meta_db: lmdb._Database) -> int:
    """How many packs the events sub-database holds."""
    stored = txn.get(PACKS_KEY, db=meta_db)
    return 0 if stored is None else int(U64.unpack(stored)[0])

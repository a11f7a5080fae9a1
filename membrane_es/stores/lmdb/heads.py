"""Each originator's latest logged event: what makes a deleted *latest* event noticeable.

Package-private support for :mod:`membrane_es.stores.lmdb.layout`. A deleted event row between two
others shows as a version gap when the originator is read; a deleted latest row leaves no
later row behind it, so the read would silently return the older state, and the next write
would take the deleted version's number again (hiding the deletion from all but a walk of the
log). So the store keeps, for every originator in the notification log, its latest version
and that event's notification, written in the same transaction as the log, in the events
sub-database itself:

events         key: originator key ‖ ``HEAD_SUFFIX`` (9 bytes of 0xff)
               value: u64(version + 2**63) ‖ u64(notification id)
meta           b"heads" → u64(how many such keys the events sub-database holds)

The head's key is one byte longer than an event's, so a reader of versions (which takes only
keys exactly one version suffix long) stops at it, and it sorts after every version of its
originator: it usually sits on the page the originator's newest event was just written to, so
keeping it seldom dirties a page a commit would not write anyway.

A read that stops before the head raises :class:`~membrane_es.errors.IntegrityError` naming the
missing event's notification; a write of a version at or below the head (whose row, then, is
gone) is refused naming the notification that holds it. A log written before heads were kept
is indexed once, under the write lock, at its next write (the meta count marks it done); until
then its reads go unchecked for a missing latest event (a walk with ``verify()`` still finds
it).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from membrane_es.errors import IntegrityError

if TYPE_CHECKING:
    import lmdb

    from membrane_es.stores.lmdb.environment import BufferTxn, Txn

HEAD_SUFFIX = b"\xff" * 9
COUNT_KEY = b"heads"  # in the meta sub-database
_U64 = struct.Struct(">Q")
_HASH_SIZE = 32  # a log entry's chain hash, before its events key
_SUFFIX = 8  # the version part that ends an events key


def head_key(prefix: bytes) -> bytes:
    """The key of the head of the originator whose keys start with ``prefix``."""
    return prefix + HEAD_SUFFIX


def is_head(key: bytes) -> bool:
    return key.endswith(HEAD_SUFFIX)


def count(txn: Txn, meta_db: lmdb._Database) -> int | None:
    """How many heads the events sub-database holds; None for a log not yet indexed."""
    stored = txn.get(COUNT_KEY, db=meta_db)
    return None if stored is None else int(_U64.unpack(stored)[0])


def index_log(
    txn: Txn, events_db: lmdb._Database, log_db: lmdb._Database, meta_db: lmdb._Database
) -> int:
    """Index the heads of a log written before they were kept (once); returns the count."""
    known = count(txn, meta_db)
    if known is not None:
        return known
    heads: dict[bytes, bytes] = {}
    # Log order is each originator's version order, so the last entry seen is its head.
    for notification_key, entry in txn.cursor(db=log_db).iternext():
        event_key = entry[_HASH_SIZE:]
        heads[event_key[:-_SUFFIX]] = event_key[-_SUFFIX:] + notification_key
    for prefix, value in heads.items():
        txn.put(head_key(prefix), value, db=events_db)
    txn.put(COUNT_KEY, _U64.pack(len(heads)), db=meta_db)
    return len(heads)


def advance(txn: Txn, events_db: lmdb._Database, event_key: bytes, notification_key: bytes) -> bool:
    """Make a newly written event its originator's head (True: its first); refuse a version
    not above the head.

    Called after the event's row was written without overwriting, so a version at or below
    the head means that row had been deleted: its number belongs to a notification already.
    """
    prefix, suffix = event_key[:-_SUFFIX], event_key[-_SUFFIX:]
    key = head_key(prefix)
    head = txn.get(key, db=events_db)
    if head is not None and suffix <= head[:_SUFFIX]:  # biased big-endian: bytes order
        version, latest = _version(suffix), _notification(head)
        if suffix == head[:_SUFFIX]:
            raise IntegrityError(
                f"notification {latest} holds version {version} of this originator, whose "
                "event row is missing: refusing to reuse the version; run verify()",
                latest,
            )
        raise IntegrityError(
            f"version {version} of this originator was logged before its latest event "
            f"(notification {latest}) and its event row is missing: refusing to reuse the "
            "version; run verify()"
        )
    txn.put(key, suffix + notification_key, db=events_db)
    return head is None


def head_of(
    txn: Txn | BufferTxn, events_db: lmdb._Database, prefix: bytes
) -> tuple[int, int] | None:
    """The latest logged (version, notification id) of the originator whose keys start with
    ``prefix``; None when no head is kept for it."""
    head = txn.get(head_key(prefix), db=events_db)
    if head is None:
        return None
    return _version(head), _notification(head)


def _version(value: bytes | memoryview) -> int:
    return int.from_bytes(value[:_SUFFIX], "big") - (1 << 63)


def _notification(head: bytes | memoryview) -> int:
    return int.from_bytes(head[_SUFFIX : 2 * _SUFFIX], "big")

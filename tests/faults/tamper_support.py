"""Editing a closed store's files the way an attacker or a failing disk would."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lmdb

from membrane_es.stores.chain import HASH_SIZE, U64, Chain
from membrane_es.stores.lmdb.heads import COUNT_KEY, head_key, is_head
from membrane_es.stores.lmdb.layout import HEAD_KEY
from membrane_es.stores.lmdb.packs import RowReader

APP = "memory"


@contextmanager
def raw_store(path: Path) -> Iterator[tuple[lmdb.Environment, lmdb.Transaction]]:
    env = lmdb.open(str(path), max_dbs=128, subdir=True)
    try:
        with env.begin(write=True) as txn:
            yield env, txn
    finally:
        env.close()


def _dbs(env: lmdb.Environment, txn: lmdb.Transaction) -> tuple[object, object, object]:
    return tuple(
        env.open_db(f"{APP}_{name}".encode(), txn=txn, create=False)
        for name in ("events", "notifications", "meta")
    )


def event_key_of(path: Path, notification_id: int) -> bytes:
    with raw_store(path) as (env, txn):
        _, log, _ = _dbs(env, txn)
        return bytes(txn.get(U64.pack(notification_id), db=log)[HASH_SIZE:])


def change_a_byte(path: Path, notification_id: int) -> None:
    """Flip one byte of the event's state (its content), nothing else."""
    with raw_store(path) as (env, txn):
        events, log, _ = _dbs(env, txn)
        key = txn.get(U64.pack(notification_id), db=log)[HASH_SIZE:]
        row = bytearray(txn.get(key, db=events))
        row[-3] ^= 0x01
        txn.put(key, bytes(row), db=events)


def delete_event(path: Path, notification_id: int) -> None:
    with raw_store(path) as (env, txn):
        events, log, _ = _dbs(env, txn)
        key = txn.get(U64.pack(notification_id), db=log)[HASH_SIZE:]
        txn.delete(key, db=events)


def swap_events(path: Path, first: int, second: int) -> None:
    """Exchange two notifications' places in the log."""
    with raw_store(path) as (env, txn):
        _, log, _ = _dbs(env, txn)
        a, b = txn.get(U64.pack(first), db=log), txn.get(U64.pack(second), db=log)
        txn.put(U64.pack(first), b, db=log)
        txn.put(U64.pack(second), a, db=log)


def truncate_tail(path: Path, count: int) -> int:
    """Remove the last ``count`` notifications and their events; returns the first removed."""
    with raw_store(path) as (env, txn):
        events, log, meta = _dbs(env, txn)
        (head,) = U64.unpack_from(txn.get(HEAD_KEY, db=meta))
        for notification_id in range(head - count + 1, head + 1):
            key = txn.get(U64.pack(notification_id), db=log)[HASH_SIZE:]
            txn.delete(key, db=events)
            txn.delete(U64.pack(notification_id), db=log)
        return int(head) - count + 1


def rewrite_and_rechain(path: Path, notification_id: int, chain: Chain) -> None:
    """What an attacker who knows how the chain is made does: alter an event, then recompute
    every link from it to the head (with ``chain``: the plain one, or a guessed key)."""
    change_a_byte(path, notification_id)
    with raw_store(path) as (env, txn):
        events, log, meta = _dbs(env, txn)
        (head,) = U64.unpack_from(txn.get(HEAD_KEY, db=meta))
        previous = (
            bytes(32)
            if notification_id == 1
            else bytes(txn.get(U64.pack(notification_id - 1), db=log)[:HASH_SIZE])
        )
        rows = RowReader(txn, events)
        for n in range(notification_id, head + 1):
            key = bytes(txn.get(U64.pack(n), db=log)[HASH_SIZE:])
            _, topic, state = rows.parts(txn.get(key, db=events))
            previous = chain.link(previous, n, key, topic, state)
            txn.put(U64.pack(n), previous + key, db=log)
        txn.put(HEAD_KEY, U64.pack(head) + previous, db=meta)


def drop_head(path: Path, notification_id: int) -> None:
    """Delete the head kept for the originator of a notification's event (what an attacker
    who knows the store's layout removes along with the event)."""
    with raw_store(path) as (env, txn):
        events, log, _ = _dbs(env, txn)
        key = txn.get(U64.pack(notification_id), db=log)[HASH_SIZE:]
        assert txn.delete(head_key(key[:-8]), db=events)


def unindex_heads(path: Path) -> None:
    """Make the store look written before heads were kept: no head keys, no count."""
    with raw_store(path) as (env, txn):
        events, _, meta = _dbs(env, txn)
        doomed = [bytes(k) for k in txn.cursor(db=events).iternext(values=False) if is_head(k)]
        assert doomed
        for key in doomed:
            txn.delete(key, db=events)
        assert txn.delete(COUNT_KEY, db=meta)

"""Several processes opening one new key store file at the same moment all succeed.

A new file is switched to WAL mode under an exclusive lock that SQLite does not wait for, so
processes starting a store together used to fail with "database is locked"."""

from __future__ import annotations

import multiprocessing
import sqlite3
from contextlib import closing
from multiprocessing.synchronize import Barrier
from pathlib import Path

from membrane_es.stores.key_store import SqliteKeyStore

PROCESSES = 4
ROUNDS = 6


def _open_when_all_ready(path: str, ready: Barrier, identities: multiprocessing.Queue) -> None:
    ready.wait()
    store = SqliteKeyStore(Path(path))
    identities.put(store.identity)
    store.close()


def test_processes_opening_one_new_key_store_together_share_it(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for round_ in range(ROUNDS):
        path = tmp_path / f"keys-{round_}.sqlite"
        ready = context.Barrier(PROCESSES)
        identities: multiprocessing.Queue = context.Queue()
        workers = [
            context.Process(target=_open_when_all_ready, args=(str(path), ready, identities))
            for _ in range(PROCESSES)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert [worker.exitcode for worker in workers] == [0] * PROCESSES
        seen = {identities.get(timeout=5) for _ in workers}
        assert len(seen) == 1  # one store: every process read the identity the first one made
        reopened = SqliteKeyStore(path)
        assert reopened.identity in seen
        reopened.close()
        with closing(sqlite3.connect(path)) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

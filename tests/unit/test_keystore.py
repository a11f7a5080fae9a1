"""The key store: keys issued from a durable pool, found again (by another process too),
destroyed for good, and a store for every kind of log."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from membrane_es import KeyStoreError, MembraneError
from membrane_es.stores.key_store import (
    FIRST_POOL,
    KEY_STORE_FILE,
    KEY_STORE_PATH,
    POOL_SIZE,
    READ_AHEAD,
    SqliteKeyStore,
    open_key_store,
)


def _files_hold(directory: Path, needle: bytes) -> bool:
    return any(needle in p.read_bytes() for p in directory.iterdir() if p.is_file())


def test_keys_are_durable_found_by_another_store_and_destroyed_for_good(tmp_path: Path) -> None:
    path = tmp_path / KEY_STORE_FILE
    keys = SqliteKeyStore(path)
    issued = [keys.issue() for _ in range(3)]
    other = SqliteKeyStore(path)  # another process on the same file
    assert [other.get(key_id) for key_id, _ in issued] == [key for _, key in issued]
    assert _files_hold(tmp_path, issued[0][1])

    keys.destroy([issued[0][0], issued[0][0], b"never-issued"])

    assert keys.get(issued[0][0]) is None
    assert keys.cipher(issued[0][0]) is None
    assert SqliteKeyStore(path).get(issued[0][0]) is None
    assert keys.get(issued[1][0]) == issued[1][1]
    other.close()
    keys.close()
    assert not _files_hold(tmp_path, issued[0][1])
    assert _files_hold(tmp_path, issued[1][1])


def test_ids_follow_issue_order_and_unused_pool_keys_go_on_close(tmp_path: Path) -> None:
    path = tmp_path / KEY_STORE_FILE
    keys = SqliteKeyStore(path)
    ids = [keys.issue()[0] for _ in range(2 * POOL_SIZE + 2)]  # pools growing to full size
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    keys.close()
    reopened = SqliteKeyStore(path)
    (count,) = reopened._db.execute("SELECT count(*) FROM data_keys").fetchone()
    assert count == len(ids)
    assert reopened.get(ids[0]) is not None
    reopened.close()


def test_pools_start_small_and_double_up_to_their_full_size(tmp_path: Path) -> None:
    keys = SqliteKeyStore(tmp_path / KEY_STORE_FILE)

    def stored() -> int:
        (count,) = keys._db.execute("SELECT count(*) FROM data_keys").fetchone()
        return int(count)

    keys.issue()
    assert stored() == FIRST_POOL  # a store that writes once makes a few keys
    for _ in range(FIRST_POOL):
        keys.issue()
    assert stored() == FIRST_POOL * 3  # the second pool is twice the first
    while stored() < 4 * POOL_SIZE:
        keys.issue()
    # the pools stop growing at POOL_SIZE: the last one made is full size, no larger
    sizes, made = [], 0
    size = FIRST_POOL
    while made < stored():
        sizes.append(size)
        made += size
        size = min(size * 2, POOL_SIZE)
    assert made == stored() and sizes[-1] == POOL_SIZE
    keys.close()


def test_each_kind_of_log_gets_a_key_store_that_outlives_the_process(tmp_path: Path) -> None:
    store = str(tmp_path)
    lmdb = open_key_store({"PERSISTENCE_MODULE": "membrane_es.stores.lmdb", "LMDB_PATH": store})
    assert isinstance(lmdb, SqliteKeyStore) and lmdb.path == tmp_path / KEY_STORE_FILE
    lmdb.close()
    elsewhere = tmp_path / "keys-elsewhere.sqlite"
    moved = open_key_store(
        {
            "PERSISTENCE_MODULE": "membrane_es.stores.lmdb",
            "LMDB_PATH": "x",
            KEY_STORE_PATH: str(elsewhere),
        }
    )
    assert isinstance(moved, SqliteKeyStore) and moved.path == elsewhere
    moved.close()
    database = tmp_path / "events.db"
    sqlite = open_key_store(
        {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(database)}
    )
    assert isinstance(sqlite, SqliteKeyStore) and sqlite.path == tmp_path / "events.db-keys.sqlite"
    sqlite.close()
    memory = open_key_store({"PERSISTENCE_MODULE": "eventsourcing.popo"})
    assert isinstance(memory, SqliteKeyStore) and memory.path is None
    memory.close()
    with pytest.raises(MembraneError, match=KEY_STORE_PATH):
        open_key_store({"PERSISTENCE_MODULE": "somewhere.else"})


def test_reads_in_issue_order_read_ahead_and_random_reads_do_not(tmp_path: Path) -> None:
    path = tmp_path / KEY_STORE_FILE
    writer = SqliteKeyStore(path)
    issued = [writer.issue() for _ in range(600)]
    fetched: list[int] = []

    class Counting(SqliteKeyStore):
        def _fetch_run(self, key_id: bytes, limit: int) -> list[tuple[bytes, bytes]]:
            run = super()._fetch_run(key_id, limit)
            fetched.append(len(run))
            return run

    in_order = Counting(path)  # a rebuild: every key, in the order they were issued
    assert [in_order.get(key_id) for key_id, _ in issued] == [key for _, key in issued]
    assert len(fetched) < 20 and max(fetched) == READ_AHEAD  # runs grow to the read-ahead
    fetched.clear()
    scattered = Counting(path)  # record loads here and there: a key or two per miss
    for key_id, key in issued[::37]:
        assert scattered.get(key_id) == key
    assert max(fetched) <= 2


def test_a_file_that_is_not_a_key_store_is_named(tmp_path: Path) -> None:
    path = tmp_path / KEY_STORE_FILE
    path.write_bytes(b"garbage\n" * 100)
    with pytest.raises(KeyStoreError, match="is not a readable key store") as raised:
        SqliteKeyStore(path)
    assert raised.value.key_file == str(path)
    assert "file is not a database" in str(raised.value)
    assert path.read_bytes() == b"garbage\n" * 100  # left as it was


def test_every_key_is_destroyed_at_once(tmp_path: Path) -> None:
    keys = SqliteKeyStore(tmp_path / KEY_STORE_FILE)
    assert not keys.holds_keys()
    issued = keys.issue()
    keys.adopt([(b"adopted-key-id-1", b"k" * 32)])
    assert keys.holds_keys()
    keys.destroy_all()
    assert not keys.holds_keys()
    assert keys.get(issued[0]) is None and keys.get(b"adopted-key-id-1") is None
    assert keys.issue()[0] != issued[0]  # the pool went too: a fresh key, durable
    keys.close()
    assert not _files_hold(tmp_path, issued[1])


def test_prefetch_brings_scattered_keys_in_one_lookup_and_never_a_withheld_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / KEY_STORE_FILE
    writer = SqliteKeyStore(path)
    issued = [writer.issue() for _ in range(400)]
    lookups: list[int] = []

    class Counting(SqliteKeyStore):
        def _fetch_run(self, key_id: bytes, limit: int) -> list[tuple[bytes, bytes]]:
            lookups.append(limit)
            return super()._fetch_run(key_id, limit)

        def _fetch_ids(self, key_ids: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
            lookups.append(len(key_ids))
            return super()._fetch_ids(key_ids)

    reader = Counting(path)
    scattered = issued[::3]  # 134 keys: more than one page of the query would be cut into
    reader.withhold([scattered[0][0]])  # one being destroyed
    reader.prefetch([key_id for key_id, _ in scattered] + [b"never-issued", scattered[1][0]])
    # one lookup: the other 133 and the unknown id; not the withheld one, nor a duplicate
    assert lookups == [len(scattered)]
    assert [reader.get(key_id) for key_id, _ in scattered[1:]] == [k for _, k in scattered[1:]]
    assert reader.get(scattered[0][0]) is None
    assert reader.get(b"never-issued") is None
    assert len(lookups) == 2  # only the unknown id was looked up again
    reader.prefetch([key_id for key_id, _ in scattered[1:]])  # all cached: no lookup
    assert len(lookups) == 2
    reader.close()
    writer.close()

"""Per-record data keys, kept apart from the log: what makes erasure possible on an
append-only store (crypto-shredding).

Every record's content is sealed under its own 256-bit key (:mod:`membrane_es.sealing`); the
key lives here, not in the log. Forgetting a record destroys its key, after which the sealed
bytes in the log — and in every backup of the log — are noise.

Keys are made ahead of need, a pool at a time in one durable write, and handed out from
memory: creating a record costs no extra sync. A key made but never used (the process ended
first) is harmless. Each key has a 16-byte id, a time prefix then random bytes, so processes
sharing a store never collide. Reads look a key up once and keep its bytes in a bounded cache
(not its cipher: one holds about 2.4 kB of OpenSSL state, so a cipher is made per use, at
about the cost of one decryption); a miss reads ahead only while reads follow the order the
keys were issued in (a rebuild reading the log).

Forgetting destroys keys in three steps a crash can come between (see
:mod:`membrane_es.commands.erasure`): the keys to destroy are first *doomed* — noted durably,
with the records they seal — then the ``Forgotten`` events are saved, then the keys are
destroyed and, once no copy of them is left, their notes removed. A note still here names an
erasure that was cut short; the engine finishes it when it opens the store
(:meth:`MemoryApplication.settle_erasures
<membrane_es.wiring.application.MemoryApplication.settle_erasures>`) and ``verify`` reports it.

A key store kept in a file also holds two facts made with it: its identity, which the log it
serves records (a log opened with a missing or foreign key store is refused: see
:mod:`membrane_es.wiring.key_binding`), and the key of the log's hash chain for a store not given
one of its own (see :mod:`membrane_es.stores.lmdb.recorders`).

Two stores:

* :class:`SqliteKeyStore`, a SQLite file beside the LMDB log (``keys.sqlite`` in the store
  directory), or in memory for in-memory stores. Destroying a key must leave no copy in the
  file's bytes: ``secure_delete`` zeroes the deleted row and any page freed, and the
  write-ahead log, which held the key when it was written, is checkpointed and truncated to
  nothing before :meth:`KeyStore.destroy` returns.
* :class:`PostgresKeyStore`, a ``memory_keys`` table in the store's schema (every process
  writing the log must reach the keys). A destroyed key's row is deleted and the table
  rewritten (``VACUUM FULL``, by the erasure that destroys it), so no live or dead tuple
  holds it; PostgreSQL's write-ahead log segments, replicas and base backups taken before
  keep it until they are recycled, which is the operator's retention to bound. The unused
  keys of a pool, deleted when the store closes, seal nothing: their rows are deleted and
  left to autovacuum, with no rewrite (which would lock the table at every close).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from membrane_es.errors import KeyStoreError, MembraneError, StorageFullError

KEY_BYTES = 32  # AES-256
KEY_ID_BYTES = 16
POOL_SIZE = 4096  # the most keys made per durable write (one sync; 192 kB)
# The first pool's size, doubled at each refill up to POOL_SIZE: a store that writes a few
# records between its open and close (a tenant among thousands) makes a few keys, not 4,096
# made, written and deleted again at close; one that writes many soon makes them in bulk.
FIRST_POOL = 16
CACHE_SIZE = 8_192  # keys kept in memory (about 1.4 MB: bytes and their dict entries)
READ_AHEAD = 256  # the most keys read at once on a cache miss (a read of the log in order)
DESTROY_PAGE = 10_000  # keys deleted in one write by destroy_all
FETCH_PAGE = 500  # ids asked for in one query by prefetch (under SQLite's variable limit)
KEY_STORE_FILE = "keys.sqlite"


KEY_STORE_PATH = "KEY_STORE_PATH"  # setting: where an LMDB store's keys live, if not beside it
IDENTITY_BYTES = 16
CHAIN_KEY_BYTES = 32


def key_store_file(env: Mapping[str, str]) -> Path | None:
    """The file holding the keys of the store these settings open (None: a table beside a
    PostgreSQL log, or memory)."""
    module = env.get("PERSISTENCE_MODULE", "") or "eventsourcing.popo"
    path = env.get(KEY_STORE_PATH) or ""
    if path:
        return Path(path)
    lmdb_path = env.get("LMDB_PATH") or ""
    if lmdb_path:
        return Path(lmdb_path) / KEY_STORE_FILE
    if "sqlite" in module and "postgres" not in module:
        database = env.get("SQLITE_DBNAME") or ""
        if database and ":memory:" not in database and "mode=memory" not in database:
            return Path(f"{database}-keys.sqlite")
    return None


def open_key_store(
    env: Mapping[str, str],
    connections: Callable[[], AbstractContextManager[Any]] | None = None,
) -> KeyStore:
    """The key store of the store these eventsourcing settings open: ``keys.sqlite`` in the
    LMDB directory (or at ``KEY_STORE_PATH``), a table beside a PostgreSQL log, a file beside
    an eventsourcing SQLite database, or memory for a store that lives in memory.
    ``connections``: the PostgreSQL log's pool (a connection for a ``with`` block), which its
    key store then shares rather than holding a connection of its own."""
    module = env.get("PERSISTENCE_MODULE", "") or "eventsourcing.popo"
    path = key_store_file(env)
    if path is not None:
        return SqliteKeyStore(path)
    if "postgres" in module:
        return PostgresKeyStore(env, connections)
    if "sqlite" in module or module.endswith("popo"):
        return SqliteKeyStore(None)
    raise MembraneError(
        f"no key store for persistence module {module!r}: set {KEY_STORE_PATH} to a file "
        "beside the log (records' content keys must outlive the process)"
    )


def missing_key_store(key_file: Path, store: str) -> KeyStoreError:
    """The error for a log whose key store is not there."""
    return KeyStoreError(
        str(key_file),
        f"the key store {key_file} is missing: the log in {store} is sealed under its keys. "
        f"Restore {key_file.name} from the backup taken with the log (a store is data.mdb "
        f"and {KEY_STORE_FILE} together); without it, no record's content can be read",
    )


def foreign_key_store(key_file: Path | str) -> KeyStoreError:
    """The error for a log opened with a key store made for another log."""
    return KeyStoreError(
        str(key_file),
        f"{key_file} is not this store's key store (it was made for another store): restore "
        "the key store backed up with this log; no record's content can be read without it",
    )


def lost_log(key_file: Path | str, store: str) -> KeyStoreError:
    """The error for a key store whose log is gone: ``data.mdb`` missing or emptied beside a
    key store that holds a log's keys (a new log must not start on them)."""
    name = Path(key_file).name
    return KeyStoreError(
        str(key_file),
        f"the key store {key_file} belongs to a log that is no longer in {store} (data.mdb is "
        f"missing or empty): restore data.mdb from the backup taken with it (a store is data.mdb "
        f"and {KEY_STORE_FILE} together); to start a new store there instead, move {name} away",
    )


def damaged_key_store(key_file: Path | str, error: sqlite3.Error) -> KeyStoreError:
    """The error for a key store file SQLite cannot read (damaged, or not a database)."""
    return KeyStoreError(
        str(key_file),
        f"{key_file} is not a readable key store (SQLite: {error}): it is damaged, or another "
        "kind of file. Restore the key store backed up with the log; no record's content can "
        "be read without it",
    )


@dataclass(frozen=True, slots=True)
class DoomedKey:
    """A key a ``forget`` set out to destroy and has not yet destroyed for good."""

    key_id: bytes
    record_id: str  # the record whose content it seals
    erasure: str  # the record ``forget`` was asked for (this one, or the one it goes with)


class KeyStore:
    """Issues, finds and destroys data keys; the storage is a subclass's.

    A key store kept in a file of its own also holds two facts made with it: its
    ``identity`` (random bytes the log it serves records, so that a store opened with a
    missing or foreign key store is refused rather than read as blank) and a ``chain_key``
    (the key of the log's hash chain, for a store not given one of its own). A key store
    with no file of its own (a table beside the log) has neither: None.
    """

    identity: bytes | None = None
    chain_key: bytes | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: list[tuple[bytes, bytes]] = []
        self._pool_size = FIRST_POOL  # keys the next refill makes
        self._issued_until = 0  # the time prefix the next pool's ids start from, at least
        # key id -> key, oldest first (evicted in O(1)); written under the lock, read without
        self._cache: OrderedDict[bytes, bytes] = OrderedDict()
        # Read-ahead that adapts to the access pattern: a miss reads ``_run`` keys, doubled
        # (up to READ_AHEAD) while the keys read ahead are being asked for — a rebuild reading
        # the log in order — and back to one when they are not: a random record load then
        # costs one key lookup, not 256 keys read and cached to no use.
        self._run = 1
        self._ahead = (b"", b"")  # ids read ahead by the last miss: above the first, to the last
        self._hits = 0  # of those, asked for since (a heuristic count: no lock)
        # Keys this process no longer hands out, though the storage may still hold them: those
        # being destroyed, and those of erasures whose events are saved (see :meth:`withhold`).
        self._withheld: set[bytes] = set()

    # --- what the engine uses --------------------------------------------------------------

    def issue(self) -> tuple[bytes, bytes]:
        """A fresh ``(key id, key)``, already durable in the store."""
        with self._lock:
            if not self._pool:
                # Ids in issue order (a time prefix, then random bytes): the keys of records
                # written one after another sit together in the store, so a read of the log
                # in order finds each run of keys with one lookup (see :meth:`get`).
                count = self._pool_size
                start = max(time.time_ns(), self._issued_until)
                # One read of the system's randomness for the whole pool, cut in pieces.
                random_part = KEY_ID_BYTES - 8
                piece = random_part + KEY_BYTES
                noise = os.urandom(count * piece)
                made = [
                    (
                        (start + i).to_bytes(8, "big") + noise[at : at + random_part],
                        noise[at + random_part : at + piece],
                    )
                    for i, at in enumerate(range(0, count * piece, piece))
                ]
                self._insert(made)
                self._pool_size = min(count * 2, POOL_SIZE)
                self._issued_until = start + count
                self._pool = made[::-1]
            key_id, key = self._pool.pop()
            self._remember(key_id, key)
            return key_id, key

    def get(self, key_id: bytes) -> bytes | None:
        """The key with this id, or None if it was destroyed or withheld (or never made
        here)."""
        if self._withheld and key_id in self._withheld:
            return None
        known = self._cache.get(key_id)
        if known is not None:
            first, last = self._ahead
            if first < key_id <= last:
                self._hits += 1
            return known
        # A miss may read ahead: this key and the ones issued after it, which seal the
        # records that follow in the log (a rebuild reads them next).
        with self._lock:
            used = self._hits >= self._run // 2
            self._run = min(self._run * 2, READ_AHEAD) if used else 1
            self._hits = 0
            run_length = self._run
        run = self._fetch_run(key_id, run_length)
        with self._lock:
            for found_id, key in run:
                self._remember(found_id, key)
            if run:
                self._ahead = (run[0][0], run[-1][0])
        return run[0][1] if run and run[0][0] == key_id else None

    def prefetch(self, key_ids: Iterable[bytes]) -> None:
        """Bring these keys into the cache with one lookup: a read about to open several
        records' boxes (a search's results, scattered over the store) would otherwise look
        each one up alone. Keys withheld or already cached are not asked for; keys not found
        are left for :meth:`get` to report."""
        cache = self._cache
        withheld = self._withheld
        wanted = [
            key_id
            for key_id in dict.fromkeys(key_ids)
            if key_id not in cache and key_id not in withheld
        ]
        if len(wanted) < 2:
            return  # one key: get()'s own lookup is as cheap
        found = self._fetch_ids(wanted)
        with self._lock:
            for key_id, key in found:
                if key_id not in self._withheld:  # again: a destroy may have begun meanwhile
                    self._remember(key_id, key)

    def cipher(self, key_id: bytes) -> AESGCM | None:
        """The AES-GCM cipher of the key with this id, or None if the key was destroyed.
        Made anew on each call (about 2 µs): each holds about 2.4 kB of OpenSSL state."""
        key = self.get(key_id)
        return None if key is None else AESGCM(key)

    def holds_keys(self) -> bool:
        """Whether any key is kept here (one made for a record, or waiting in a pool)."""
        return bool(self._fetch_run(b"", 1))

    def destroy_all(self) -> None:
        """Destroy every key kept here, a page at a time (what an import that did not
        finish adopted, discarded with the part of the log it wrote: see
        :meth:`~membrane_es.wiring.application.MemoryApplication.discard_unfinished_import`)."""
        with self._lock:
            self._pool.clear()
            self._cache.clear()
            while run := self._fetch_run(b"", DESTROY_PAGE):
                self._delete([key_id for key_id, _ in run])

    def adopt(self, keys: Sequence[tuple[bytes, bytes]]) -> None:
        """Keep ``(key id, key)`` pairs made by another store (an import of its log),
        durable before this returns."""
        if keys:
            with self._lock:
                self._insert(list(keys))

    def destroy(self, key_ids: Iterable[bytes]) -> None:
        """Destroy these keys for good (ids of keys already gone are ignored), then drop the
        notes that doomed them. Withheld first: if the storage fails (a full disk), this
        process hands them out no more, and their notes stay for a later call to finish."""
        wanted = list(dict.fromkeys(key_ids))
        if not wanted:
            return
        self.withhold(wanted)
        with self._lock:
            self._delete(wanted)
            # Only now: a crash before the delete left no copy (the log emptied) keeps the
            # notes, and finishing then runs the delete again.
            self._undoom(wanted)

    def doom(self, erasure: str, keys: Mapping[str, bytes]) -> None:
        """Note, durably, that ``forget(erasure)`` is about to destroy these keys (record id
        → key id), before its ``Forgotten`` events are saved; :meth:`destroy` drops the notes.
        A key doomed again is noted for the latest erasure."""
        rows = [(key_id, record_id, erasure) for record_id, key_id in keys.items()]
        if rows:
            with self._lock:
                self._doom(rows)

    def doomed(self) -> list[DoomedKey]:
        """The keys doomed and not yet destroyed for good: erasures cut short (or under
        way in another process), by erasure, in the order their keys were issued."""
        return [
            DoomedKey(bytes(key_id), str(record_id), str(erasure))
            for key_id, record_id, erasure in self._doomed()
        ]

    def withhold(self, key_ids: Iterable[bytes]) -> None:
        """Hand these keys out no more in this process (:meth:`get` answers None), whether
        or not the storage still holds them: a record forgotten in the log stays unreadable
        here while its key waits to be destroyed."""
        with self._lock:
            for key_id in key_ids:
                self._withheld.add(key_id)
                self._cache.pop(key_id, None)

    def drop_cache(self) -> None:
        """Forget the keys read so far: the next read of each asks the storage, where another
        process may have destroyed it since."""
        with self._lock:
            self._cache.clear()

    def holds(self, key_id: bytes) -> bool:
        """Whether the storage still holds this key (withheld or not)."""
        run = self._fetch_run(key_id, 1)
        return bool(run) and run[0][0] == key_id

    def close(self) -> None:
        """Release the store; unused pool keys are destroyed (they seal nothing)."""
        with self._lock:
            unused = [key_id for key_id, _ in self._pool]
            self._pool.clear()
            self._cache.clear()
            try:
                if unused:
                    # They seal nothing: deleted, not scrubbed (no sync of the file's log, no
                    # rewrite of a table), which is what an erasure's keys need.
                    self._delete(unused, erase=False)
            except (StorageFullError, sqlite3.OperationalError):
                # On a full disk, or with readers holding the key store's log, they stay:
                # a key that seals nothing is harmless.
                pass
            finally:
                self._close()

    def _remember(self, key_id: bytes, key: bytes) -> None:
        cache = self._cache
        if key_id not in cache and len(cache) >= CACHE_SIZE:
            cache.popitem(last=False)  # the oldest in
        cache[key_id] = key

    # --- storage ----------------------------------------------------------------------------

    def _insert(self, keys: Sequence[tuple[bytes, bytes]]) -> None:
        raise NotImplementedError

    def _fetch_run(self, key_id: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` (id, key) pairs in id order, from ``key_id`` on."""
        raise NotImplementedError

    def _fetch_ids(self, key_ids: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
        """The (id, key) pairs of these ids that are kept, in any order."""
        raise NotImplementedError

    def _delete(self, key_ids: Sequence[bytes], *, erase: bool = True) -> None:
        """Delete these keys; with ``erase`` (keys that sealed records), leave no copy of
        them in the storage's files either."""
        raise NotImplementedError

    def _doom(self, rows: Sequence[tuple[bytes, str, str]]) -> None:
        """Note (key id, record id, erasure) rows, durable before this returns."""
        raise NotImplementedError

    def _doomed(self) -> list[tuple[bytes, str, str]]:
        raise NotImplementedError

    def _undoom(self, key_ids: Sequence[bytes]) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError


@contextmanager
def _disk_full_is_storage_full(path: Path | None) -> Iterator[None]:
    """SQLite's "database or disk is full" as :class:`StorageFullError` (nothing written)."""
    try:
        yield
    except sqlite3.OperationalError as error:
        if getattr(error, "sqlite_errorcode", None) != sqlite3.SQLITE_FULL:
            raise
        raise StorageFullError(
            errno.ENOSPC, f"no space left for the key store {path}: {error}"
        ) from error


# What SQLite says of a file it cannot read as a database.
_DAMAGED = frozenset({sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT})


# How long an open waits for another process's switch of a new key store file to WAL: the
# connection's own busy timeout, which SQLite does not apply to that switch.
_WAL_SWITCH_SECONDS = 30.0


def _use_write_ahead_log(db: sqlite3.Connection) -> None:
    """Put the key store file in WAL mode, waiting while another process does the same.

    Switching a new file to WAL takes an exclusive lock, and SQLite answers "database is
    locked" at once (not after the busy timeout) when several processes open one new store at
    the same moment; the file is read in WAL mode as soon as one of them succeeds."""
    deadline = time.monotonic() + _WAL_SWITCH_SECONDS
    pause = 0.002
    while True:
        try:
            (mode,) = db.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() != "wal":
                (mode,) = db.execute("PRAGMA journal_mode = WAL").fetchone()
            if str(mode).lower() == "wal":
                return
            # A file whose mode could not be changed yet answers with its old mode.
            if time.monotonic() >= deadline:
                raise sqlite3.OperationalError(f"the key store stayed in {mode} journal mode")
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            if time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


@contextmanager
def _damage_is_key_store_error(path: Path | None) -> Iterator[None]:
    """SQLite's "file is not a database" and "database disk image is malformed" as
    :class:`KeyStoreError` naming the file (what a damaged or foreign file in the key
    store's place gives)."""
    try:
        yield
    except sqlite3.DatabaseError as error:
        if getattr(error, "sqlite_errorcode", None) not in _DAMAGED:
            raise
        raise damaged_key_store(path or ":memory:", error) from error


class SqliteKeyStore(KeyStore):
    """Keys in a SQLite file (or in memory when ``path`` is None). A file SQLite cannot read
    (damaged, or something else in its place) is a :class:`KeyStoreError` naming it."""

    def __init__(self, path: Path | None = None) -> None:
        super().__init__()
        self.path = path
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path),
            check_same_thread=False,
            isolation_level=None,
            timeout=30,
        )
        self._db_lock = threading.Lock()
        try:
            with _damage_is_key_store_error(path):
                self._prepare(path)
        except BaseException:
            self._db.close()
            raise

    def _prepare(self, path: Path | None) -> None:
        """Set the connection up, make the tables if missing, and read the key store's facts."""
        with self._db_lock:
            self._db.execute("PRAGMA secure_delete = ON")
            if path is not None:
                _use_write_ahead_log(self._db)
                # Always synced, even for a store opened with ``sync=False``: a key must reach
                # the disk before any event sealed under it can (one sync per pool of keys).
                self._db.execute("PRAGMA synchronous = FULL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS data_keys (id BLOB PRIMARY KEY, key BLOB NOT NULL)"
                " WITHOUT ROWID"
            )
            self.identity, self.chain_key = self._facts(path)

    def _facts(self, path: Path | None) -> tuple[bytes, bytes]:
        """The key store's identity and chain key, made the first time it is opened (a key
        store written before it held them gets them then; one made concurrently by another
        process keeps the first ones written)."""
        with _disk_full_is_storage_full(path):
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS store_facts"
                " (name TEXT PRIMARY KEY, value BLOB NOT NULL)"
            )
            found = dict(self._db.execute("SELECT name, value FROM store_facts").fetchall())
            if "identity" not in found or "chain_key" not in found:
                with self._immediate():
                    self._db.executemany(
                        "INSERT OR IGNORE INTO store_facts (name, value) VALUES (?, ?)",
                        [
                            ("identity", os.urandom(IDENTITY_BYTES)),
                            ("chain_key", os.urandom(CHAIN_KEY_BYTES)),
                        ],
                    )
                found = dict(self._db.execute("SELECT name, value FROM store_facts").fetchall())
        return bytes(found["identity"]), bytes(found["chain_key"])

    def _insert(self, keys: Sequence[tuple[bytes, bytes]]) -> None:
        with self._db_lock, _disk_full_is_storage_full(self.path), self._immediate():
            self._db.executemany("INSERT INTO data_keys (id, key) VALUES (?, ?)", keys)

    def _fetch_run(self, key_id: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        with self._db_lock, _damage_is_key_store_error(self.path):
            rows = self._db.execute(
                "SELECT id, key FROM data_keys WHERE id >= ? ORDER BY id LIMIT ?", (key_id, limit)
            ).fetchall()
        return [(bytes(found), bytes(key)) for found, key in rows]

    def _fetch_ids(self, key_ids: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
        rows: list[tuple[bytes, bytes]] = []
        with self._db_lock, _damage_is_key_store_error(self.path):
            for at in range(0, len(key_ids), FETCH_PAGE):
                page = key_ids[at : at + FETCH_PAGE]
                marks = ",".join("?" * len(page))
                rows += self._db.execute(
                    f"SELECT id, key FROM data_keys WHERE id IN ({marks})", page
                ).fetchall()
        return [(bytes(found), bytes(key)) for found, key in rows]

    def _delete(self, key_ids: Sequence[bytes], *, erase: bool = True) -> None:
        with self._db_lock, _disk_full_is_storage_full(self.path):
            with self._immediate():
                self._db.executemany("DELETE FROM data_keys WHERE id = ?", [(k,) for k in key_ids])
            if erase and self.path is not None:
                # The deleted rows' pages were written zeroed to the write-ahead log; copy them
                # over the database file and empty the log, which still held the keys as they
                # were first written. A reader in another process can hold the checkpoint
                # back, so this retries until it is complete.
                for _ in range(100):
                    busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                    if not busy:
                        break
                    threading.Event().wait(0.01)
                else:
                    raise sqlite3.OperationalError(
                        f"{self.path}: the key store's log could not be emptied (busy readers)"
                    )

    # Made by the first erasure (an open writes nothing for it, even on a full disk).
    _DOOMED = (
        "CREATE TABLE IF NOT EXISTS doomed_keys"
        " (id BLOB PRIMARY KEY, record_id TEXT NOT NULL, erasure TEXT NOT NULL) WITHOUT ROWID"
    )

    def _doom(self, rows: Sequence[tuple[bytes, str, str]]) -> None:
        with self._db_lock, _disk_full_is_storage_full(self.path), self._immediate():
            self._db.execute(self._DOOMED)
            self._db.executemany(
                "INSERT OR REPLACE INTO doomed_keys (id, record_id, erasure) VALUES (?, ?, ?)",
                rows,
            )

    def _doomed(self) -> list[tuple[bytes, str, str]]:
        with self._db_lock:
            if not self._has_doomed_keys():
                return []
            rows: list[tuple[bytes, str, str]] = self._db.execute(
                "SELECT id, record_id, erasure FROM doomed_keys ORDER BY erasure, id"
            ).fetchall()
        return rows

    def _undoom(self, key_ids: Sequence[bytes]) -> None:
        with self._db_lock, _disk_full_is_storage_full(self.path):
            if self._has_doomed_keys():
                with self._immediate():
                    self._db.executemany(
                        "DELETE FROM doomed_keys WHERE id = ?", [(k,) for k in key_ids]
                    )

    def _has_doomed_keys(self) -> bool:
        found = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'doomed_keys'"
        ).fetchone()
        return found is not None

    @contextmanager
    def _immediate(self) -> Iterator[None]:
        """One write transaction, rolled back if the block raises."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def _close(self) -> None:
        with self._db_lock:
            self._db.close()


class PostgresKeyStore(KeyStore):
    """Keys in the ``memory_keys`` table of a PostgreSQL schema, reached through the store's
    own connection pool when it is given one (``connections``: a connection for the length
    of a ``with`` block), else through a connection of the key store's own."""

    TABLE = "memory_keys"
    DOOMED_TABLE = "memory_doomed_keys"  # the keys an erasure has yet to destroy (see doom)

    def __init__(
        self,
        settings: Mapping[str, str],
        connections: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        super().__init__()
        from psycopg import sql
        from psycopg.rows import tuple_row

        self._own: Any = None
        if connections is None:
            from membrane_es.stores.postgres.database import open_connection

            self._own = open_connection(dict(settings))
            connections = self._own_connection
        self._db_lock = threading.Lock()
        self._connections = connections
        self._rows = tuple_row  # the pool's connections give dicts; this code reads tuples
        schema = settings.get("POSTGRES_SCHEMA") or "public"
        self._table = sql.Identifier(schema, self.TABLE)
        self._doomed_table = sql.Identifier(schema, self.DOOMED_TABLE)
        self._sql = sql
        self._create_table()

    @contextmanager
    def _own_connection(self) -> Iterator[Any]:
        with self._db_lock:  # one connection, one user at a time
            yield self._own

    @contextmanager
    def _cursor(self, *, transaction: bool = False) -> Iterator[Any]:
        with self._connections() as connection:
            if transaction:
                with connection.transaction():
                    yield connection.cursor(row_factory=self._rows)
            else:
                yield connection.cursor(row_factory=self._rows)

    def _create_table(self) -> None:
        """Make the keys' table if it is missing: checked first, so the open of an existing
        store runs no DDL (which takes locks and writes the catalogue)."""
        from psycopg import errors

        with self._cursor() as cursor:
            name = self._table.as_string(cursor.connection)
            row = cursor.execute("SELECT to_regclass(%s)", (name,)).fetchone()
            if row is not None and row[0] is not None:
                return
            create = self._sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (id bytea PRIMARY KEY, key bytea NOT NULL)"
            ).format(self._table)
            try:
                cursor.execute(create)
            except (errors.UniqueViolation, errors.DuplicateTable):
                pass  # another process made it in the meantime

    def _insert(self, keys: Sequence[tuple[bytes, bytes]]) -> None:
        statement = self._sql.SQL("INSERT INTO {} (id, key) VALUES (%s, %s)").format(self._table)
        with self._cursor(transaction=True) as cursor:
            cursor.executemany(statement, keys)

    def _fetch_run(self, key_id: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        statement = self._sql.SQL(
            "SELECT id, key FROM {} WHERE id >= %s ORDER BY id LIMIT %s"
        ).format(self._table)
        with self._cursor() as cursor:
            rows = cursor.execute(statement, (key_id, limit)).fetchall()
        return [(bytes(found), bytes(key)) for found, key in rows]

    def _fetch_ids(self, key_ids: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
        statement = self._sql.SQL("SELECT id, key FROM {} WHERE id = ANY(%s)").format(self._table)
        with self._cursor() as cursor:
            rows = cursor.execute(statement, (list(key_ids),)).fetchall()
        return [(bytes(found), bytes(key)) for found, key in rows]

    def _delete(self, key_ids: Sequence[bytes], *, erase: bool = True) -> None:
        statement = self._sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(self._table)
        with self._cursor() as cursor:
            cursor.execute(statement, (list(key_ids),))
            if erase:
                # An erasure's keys: deleted tuples stay in the table's pages until it is
                # rewritten. Not for a pool's unused keys at close (they seal nothing): a
                # rewrite takes the table's exclusive lock, and a daemon closes stores all
                # day; the space they took is autovacuum's to reuse.
                cursor.execute(self._sql.SQL("VACUUM FULL {}").format(self._table))

    def _doom(self, rows: Sequence[tuple[bytes, str, str]]) -> None:
        # Made by the first erasure: an open creates nothing for it.
        create = self._sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id bytea PRIMARY KEY, record_id text NOT NULL,"
            " erasure text NOT NULL)"
        ).format(self._doomed_table)
        insert = self._sql.SQL(
            "INSERT INTO {} (id, record_id, erasure) VALUES (%s, %s, %s)"
            " ON CONFLICT (id) DO UPDATE SET record_id = EXCLUDED.record_id,"
            " erasure = EXCLUDED.erasure"
        ).format(self._doomed_table)
        with self._cursor(transaction=True) as cursor:
            cursor.execute(create)
            cursor.executemany(insert, rows)

    def _doomed(self) -> list[tuple[bytes, str, str]]:
        select = self._sql.SQL("SELECT id, record_id, erasure FROM {} ORDER BY erasure, id").format(
            self._doomed_table
        )
        with self._cursor() as cursor:
            if not self._has_doomed_keys(cursor):
                return []
            rows = cursor.execute(select).fetchall()
        return [
            (bytes(key_id), str(record_id), str(erasure)) for key_id, record_id, erasure in rows
        ]

    def _undoom(self, key_ids: Sequence[bytes]) -> None:
        statement = self._sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(self._doomed_table)
        with self._cursor() as cursor:
            if self._has_doomed_keys(cursor):
                cursor.execute(statement, (list(key_ids),))

    def _has_doomed_keys(self, cursor: Any) -> bool:
        name = self._doomed_table.as_string(cursor.connection)
        row = cursor.execute("SELECT to_regclass(%s)", (name,)).fetchone()
        return row is not None and row[0] is not None

    def _close(self) -> None:
        # A pool given is the store's, closed with it.
        if self._own is not None:
            with self._db_lock:
                self._own.close()

"""A lost key store is never silent.

A store is its log (``data.mdb``) and its key store (``keys.sqlite``) together. Opening a log
whose key store is missing, or is another store's, raises :class:`KeyStoreError` (an
:class:`IntegrityError`) naming the file to restore, and creates nothing; ``verify`` says so
(exit 2), and counts records whose keys are missing apart from records erased by ``forget``.
A store written before logs named their key store opens, and is bound to its key store then,
when that key store holds its keys.

The other way round, a lost log is never silent either: ``data.mdb`` deleted or emptied beside
a key store that holds keys is refused the same way (the log those keys were made for is
gone), not read as a new, empty store; and a key store SQLite cannot read (damaged, or
another kind of file in its place) is a :class:`KeyStoreError` naming it (``verify``: exit 2).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import sqlite3
from pathlib import Path

import pytest

from membrane_es import IntegrityError, KeyStoreError, Membrane, TrustContext
from membrane_es.cli import main
from membrane_es.stores.lmdb.layout import KEY_STORE_KEY
from tests.faults.tamper_support import raw_store

FULL = TrustContext(max_sensitivity="hyper")
KEY_FILES = ("keys.sqlite", "keys.sqlite-wal", "keys.sqlite-shm")


def _make_store(path: Path, env: dict[str, str] | None = None) -> list[str]:
    """Three records, the first one forgotten; returns their ids."""
    with Membrane.open(path, embedder=None, env=env) as memory:
        captured = [memory.capture_memory(f"note {n} about the garden") for n in range(3)]
        ids = [capture.primary_record.id for capture in captured]
        memory.forget(ids[0], "tester", "asked to")
    return ids


def _remove_key_store(path: Path) -> None:
    for name in KEY_FILES:
        (path / name).unlink(missing_ok=True)


def _as_written_before_binding(path: Path) -> None:
    """What a store of the previous version holds: a log naming no key store, a key store
    without its identity, and a plain chain."""
    with raw_store(path) as (env, txn):
        meta = env.open_db(b"memory_meta", txn=txn, create=False)
        assert txn.delete(KEY_STORE_KEY, db=meta)
    with sqlite3.connect(path / "keys.sqlite") as keys:
        keys.execute("DROP TABLE store_facts")


def _verify(path: Path) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["verify", str(path)])
    return code, out.getvalue()


def test_a_missing_key_store_is_refused_naming_it(tmp_path: Path) -> None:
    _make_store(tmp_path)
    _remove_key_store(tmp_path)
    with pytest.raises(KeyStoreError, match="keys.sqlite is missing") as raised:
        Membrane.open(tmp_path, embedder=None)
    assert isinstance(raised.value, IntegrityError)
    assert raised.value.key_file == str(tmp_path / "keys.sqlite")
    assert "Restore keys.sqlite" in str(raised.value)
    assert not (tmp_path / "keys.sqlite").exists()  # no empty key store made in its place
    code, report = _verify(tmp_path)
    assert code == 2 and report.startswith("keys") and "keys.sqlite is missing" in report


def test_another_stores_key_store_is_refused(tmp_path: Path) -> None:
    mine, other = tmp_path / "mine", tmp_path / "other"
    _make_store(mine)
    _make_store(other)
    _remove_key_store(mine)
    shutil.copy(other / "keys.sqlite", mine / "keys.sqlite")
    with pytest.raises(KeyStoreError, match="not this store's key store"):
        Membrane.open(mine, embedder=None)
    code, report = _verify(mine)
    assert code == 2 and "not this store's key store" in report


def test_verify_counts_forgotten_records_apart_from_lost_keys(tmp_path: Path) -> None:
    ids = _make_store(tmp_path)
    report = Membrane.verify_store(tmp_path)
    assert report.ok and report.keyed
    assert (report.forgotten, report.unsealable) == (1, 0)
    assert "1 record forgotten" in str(report)
    with Membrane.open(tmp_path, embedder=None) as memory:
        key_id = memory.application.content_key(ids[1])
    with sqlite3.connect(tmp_path / "keys.sqlite") as keys:  # one key lost, not forgotten
        keys.execute("DELETE FROM data_keys WHERE id = ?", (key_id,))
    report = Membrane.verify_store(tmp_path)
    assert not report.ok and report.fault == "unsealable"
    assert (report.forgotten, report.unsealable) == (1, 1)
    code, printed = _verify(tmp_path)
    assert code == 2 and "1 records cannot be unsealed" in printed


def test_a_store_from_before_binding_opens_and_is_bound(tmp_path: Path) -> None:
    ids = _make_store(tmp_path, env={"LMDB_PLAIN_CHAIN": "y"})
    _as_written_before_binding(tmp_path)
    with Membrane.open(tmp_path, embedder=None, read_only=True) as memory:
        assert memory.application.recorder.key_store_identity() is None  # forensics: no write
    with Membrane.open(tmp_path, embedder=None) as memory:
        assert memory.application.recorder.key_store_identity() == memory.application.keys.identity
        assert memory.retrieve_by_id(ids[1], trust=FULL).payload is not None
        assert not memory.verify().keyed  # begun plain, it stays so
    _remove_key_store(tmp_path)  # bound now: a lost key store is refused
    with pytest.raises(KeyStoreError, match="missing"):
        Membrane.open(tmp_path, embedder=None)


def test_a_store_from_before_binding_refuses_a_key_store_without_its_keys(
    tmp_path: Path,
) -> None:
    """The case of a partial backup: the log, and a key store made afresh beside it."""
    _make_store(tmp_path, env={"LMDB_PLAIN_CHAIN": "y"})
    _as_written_before_binding(tmp_path)
    _remove_key_store(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    with Membrane.open(elsewhere, embedder=None):
        pass
    shutil.copy(elsewhere / "keys.sqlite", tmp_path / "keys.sqlite")
    with pytest.raises(KeyStoreError, match="holds none of this log's keys"):
        Membrane.open(tmp_path, embedder=None)
    report = Membrane.verify_store(tmp_path)
    assert not report.ok and report.fault == "unsealable" and report.unsealable == 2


def test_a_key_store_kept_elsewhere_is_named_to_verify(tmp_path: Path) -> None:
    store, keys = tmp_path / "store", tmp_path / "vault" / "keys.sqlite"
    keys.parent.mkdir()
    _make_store(store, env={"KEY_STORE_PATH": str(keys)})
    assert Membrane.verify_store(store).fault == "keys"  # not where it would be by default
    report = Membrane.verify_store(store, key_store=keys)
    assert report.ok and report.keyed and report.forgotten == 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["verify", str(store), "--key-store", str(keys)]) == 0
    assert out.getvalue().startswith("OK")


# The log lost beside its key store --------------------------------------------------------


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("loss", ["emptied", "deleted"])
def test_a_lost_log_beside_its_key_store_is_refused(tmp_path: Path, loss: str) -> None:
    _make_store(tmp_path)
    data = tmp_path / "data.mdb"
    if loss == "emptied":
        data.write_bytes(b"")
    else:
        data.unlink()
    with pytest.raises(KeyStoreError, match="belongs to a log that is no longer in") as raised:
        Membrane.open(tmp_path, embedder=None)
    assert raised.value.key_file == str(tmp_path / "keys.sqlite")
    assert "restore data.mdb" in str(raised.value)
    before = _files(tmp_path)
    code, _, error = _cli("capture", str(tmp_path), "--text", "a new note")
    assert code == 1 and error.startswith("error: the key store") and "no longer" in error
    code, _, error = _cli("list", str(tmp_path))  # a read makes no store: none is there
    assert code == 1
    assert ("no store at" if loss == "deleted" else "belongs to a log that is no longer") in error
    assert _files(tmp_path).keys() == before.keys()  # no log made beside the old keys
    assert (tmp_path / "data.mdb").exists() is (loss == "emptied")

    report = Membrane.verify_store(tmp_path)
    assert not report.ok and report.fault == "keys" and "no longer in" in report.detail
    code, printed = _verify(tmp_path)
    assert code == 2 and printed.startswith("keys: the key store")


def test_a_new_store_and_one_whose_only_write_was_rolled_back_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Membrane.open(tmp_path, embedder=None):
        pass
    with Membrane.open(tmp_path, embedder=None) as memory:  # a new store opens again
        recorder = memory.application.recorder

        def refused(*args: object, **kwargs: object) -> None:
            raise OSError("the write is refused")

        with monkeypatch.context() as patch:  # the record's key is made, its event not kept
            patch.setattr(recorder, "insert_events", refused)
            with pytest.raises(OSError, match="refused"):
                memory.capture_memory("a note that is never written")
        assert memory.application.recorder.max_notification_id() is None
    with sqlite3.connect(tmp_path / "keys.sqlite") as keys:
        assert keys.execute("SELECT count(*) FROM data_keys").fetchone()[0] >= 1
    with Membrane.open(tmp_path, embedder=None) as memory:  # keys, an empty log: its own
        memory.capture_memory("a note after all")
    assert Membrane.verify_store(tmp_path).ok


# A key store SQLite cannot read ----------------------------------------------------------


def test_a_key_store_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    store, elsewhere = tmp_path / "store", tmp_path / "afile"
    _make_store(store)
    elsewhere.write_text("garbage\n")
    report = Membrane.verify_store(store, key_store=elsewhere)
    assert not report.ok and report.fault == "keys" and "not a readable key store" in report.detail
    code, printed = _verify_with(store, "--key-store", str(elsewhere))
    assert code == 2 and printed.startswith(f"keys: {elsewhere} is not a readable key store")

    (store / "keys.sqlite").write_text("garbage\n")
    for name in ("keys.sqlite-wal", "keys.sqlite-shm"):
        (store / name).unlink(missing_ok=True)
    with pytest.raises(KeyStoreError, match="not a readable key store") as raised:
        Membrane.open(store, embedder=None)
    assert raised.value.key_file == str(store / "keys.sqlite")
    code, _, error = _cli("list", str(store))
    assert code == 1 and "not a readable key store" in error and "DatabaseError" not in error
    code, printed = _verify(store)
    assert code == 2 and printed.startswith("keys: ") and "file is not a database" in printed


def _verify_with(path: Path, *options: str) -> tuple[int, str]:
    code, printed, _ = _cli("verify", str(path), *options)
    return code, printed

"""A ``forget`` cut short — its process killed, its disk full, Ctrl-C — at each of its steps
(see :mod:`membrane_es.commands.erasure`): the keys doomed, the ``Forgotten`` events saved,
the keys destroyed, their notes dropped. After each: what an open, the reads, ``verify`` and a
second ``forget`` do. Content asked to be forgotten never reads again once the events that
say so are saved, and ``verify`` never advises what would bring it back.

A kill is a real one: a child process is stopped with ``os._exit`` at the step (no close, no
checkpoint). A full disk or Ctrl-C is the step raising, in this process, which goes on.
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from membrane_es import ForgottenError, Membrane, StorageFullError
from membrane_es.cli import main
from membrane_es.stores.key_store import KEY_STORE_FILE, SqliteKeyStore
from tests.unit.builders import FULL_TRUST, semantic

SECRET = "Zanzibarquux"
FACT = {"subject": SECRET, "predicate": "deploy_target_for", "object": "staging"}
KILLED = 70

# Run in a child process: open the store, arm the kill at one step, forget.
KILL_AT = f"""
import os, sys
from membrane_es import Membrane
from membrane_es.wiring.application import MemoryApplication
from membrane_es.stores.key_store import SqliteKeyStore

store, record_id, step = sys.argv[1:4]

def then_die(original):
    def wrapped(*args, **kwargs):
        original(*args, **kwargs)
        os._exit({KILLED})
    return wrapped

def die(*args, **kwargs):
    os._exit({KILLED})

memory = Membrane.open(store, embedder=None)
if step == "doomed":
    SqliteKeyStore._doom = then_die(SqliteKeyStore._doom)
elif step == "saved":
    MemoryApplication.save = then_die(MemoryApplication.save)
elif step == "destroyed":
    SqliteKeyStore._undoom = die  # the keys are gone; their notes are not dropped
memory.forget(record_id, "dpo", "erasure request")
os._exit(0)
"""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "store"


def _fill(store: Path) -> tuple[list[str], dict[str, bytes]]:
    """A captured fact (its episode, the entity and the fact derived from it alone: three
    records one forget takes), checkpointed with its words in the text index; returns the
    ids (the episode first) and each record's key."""
    with Membrane.open(store, embedder=None) as memory:
        captured = memory.capture_memory(FACT, source_kind="observation")
        ids = [captured.primary_record.id, *(r.id for r in captured.created_records)]
        memory.create_record(semantic("api", "runs_on", "port 8080"))
        app = memory.application
        keys = {}
        for record_id in ids:
            key_id = app.content_key(record_id)
            assert key_id is not None
            key = app.keys.get(key_id)
            assert key is not None
            keys[record_id] = key
        memory.checkpoint()
    return ids, keys


def _kill_during_forget(store: Path, record_id: str, step: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", KILL_AT, str(store), record_id, step],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == KILLED, done.stderr


def _verify(store: Path) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["verify", str(store)])
    return code, out.getvalue()


def _files_holding(store: Path, needle: bytes) -> list[str]:
    return [
        str(path.relative_to(store))
        for path in sorted(store.rglob("*"))
        if path.is_file() and needle in path.read_bytes()
    ]


def _readable(memory: Membrane, ids: list[str]) -> bool:
    """Whether any read shows the forgotten content: by id, in history, by its words."""
    shown = [memory.retrieve_by_id(record_id, trust=FULL_TRUST) for record_id in ids]
    shown += [memory.history(record_id, trust=FULL_TRUST) for record_id in ids]
    shown += memory.retrieve(SECRET, trust=FULL_TRUST, include_retracted=True).records
    return SECRET.lower() in repr(shown).lower()


def _doomed(store: Path) -> list[str]:
    keys = SqliteKeyStore(store / KEY_STORE_FILE)
    try:
        return [doomed.record_id for doomed in keys.doomed()]
    finally:
        keys.close()


# Killed ----------------------------------------------------------------------------------


def test_killed_once_its_keys_are_doomed_nothing_is_erased_and_forget_again_erases(
    store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ids, _ = _fill(store)
    _kill_during_forget(store, ids[0], "doomed")

    assert sorted(_doomed(store)) == sorted(ids)
    code, report = _verify(store)
    assert code == 2 and report.startswith("interrupted")
    assert f"a forget of {ids[0]} was cut short before its Forgotten events were saved" in report
    assert "run forget again" in report and "restore" not in report
    with caplog.at_level(logging.WARNING, logger="membrane_es"):
        memory = Membrane.open(store, embedder=None)
    with memory:
        assert f"a forget of {ids[0]} was cut short" in caplog.text
        assert _readable(memory, ids)  # nothing was erased: it reads as before

        forgotten = memory.forget(ids[0], "dpo", "erasure request")

        assert forgotten[0] == ids[0] and sorted(forgotten) == sorted(ids)
        assert not _readable(memory, ids)
    assert _doomed(store) == []
    code, report = _verify(store)
    assert code == 0 and "3 records forgotten" in report


def test_killed_once_its_events_are_saved_the_next_open_destroys_the_keys(
    store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ids, keys = _fill(store)
    _kill_during_forget(store, ids[0], "saved")

    assert sorted(_doomed(store)) == sorted(ids)
    assert _files_holding(store, keys[ids[0]]) == [KEY_STORE_FILE]
    code, report = _verify(store)
    assert code == 2 and report.startswith("interrupted")
    assert "cut short after its Forgotten events were saved" in report
    assert all(record_id in report for record_id in ids)
    assert f"membrane-es stats {store}" in report and "restore" not in report
    # read-only: the keys are withheld, not destroyed, and nothing reads
    with Membrane.open(store, embedder=None, read_only=True) as memory:
        assert not _readable(memory, ids)
    assert _files_holding(store, keys[ids[0]]) == [KEY_STORE_FILE]

    with caplog.at_level(logging.WARNING, logger="membrane_es"):
        memory = Membrane.open(store, embedder=None)
    with memory:
        assert "is finished: the keys of" in caplog.text
        assert not _readable(memory, ids)
        with pytest.raises(ForgottenError):  # finished: nothing is left to do
            memory.forget(ids[0], "dpo", "erasure request")
        assert [h.event for h in memory.history(ids[0], trust=FULL_TRUST)][-1] == "Forgotten"
    assert _doomed(store) == []
    for key in keys.values():
        assert _files_holding(store, key) == []
    assert _files_holding(store, SECRET.encode()) == []  # the checkpoint let go of its words
    code, report = _verify(store)
    assert code == 0 and "3 records forgotten" in report


def test_killed_once_its_keys_are_destroyed_the_next_open_drops_the_notes(store: Path) -> None:
    ids, keys = _fill(store)
    _kill_during_forget(store, ids[0], "destroyed")

    assert sorted(_doomed(store)) == sorted(ids)
    for key in keys.values():
        assert _files_holding(store, key) == []
    code, report = _verify(store)  # reported until the notes go: the open finishes
    assert code == 2 and "cut short after its Forgotten events were saved" in report
    with Membrane.open(store, embedder=None) as memory:
        assert not _readable(memory, ids)
    assert _doomed(store) == []
    assert _verify(store)[0] == 0


def test_the_store_an_earlier_release_left_is_named_and_forget_again_completes_it(
    store: Path,
) -> None:
    """What a forget cut short by a release that destroyed the keys first leaves: keys gone,
    no ``Forgotten`` event, no note. ``verify`` names the records and says to forget them
    again, not to restore the key store from a backup (which would bring them back)."""
    ids, _ = _fill(store)
    with Membrane.open(store, embedder=None) as memory:
        app = memory.application
        key_ids = [app.content_key(record_id) for record_id in ids]
        app.keys.destroy([key_id for key_id in key_ids if key_id is not None])

    code, report = _verify(store)
    assert code == 2 and report.startswith("unsealable")
    assert all(record_id in report for record_id in ids)
    assert "run forget again for them" in report
    assert "do not restore keys.sqlite from a backup, which would bring the content back" in report
    with Membrane.open(store, embedder=None) as memory:
        assert memory.retrieve_by_id(ids[0], trust=FULL_TRUST).payload is None
        # its words are still in the views: no event has told them to let go
        assert ids[0] in [r.id for r in memory.retrieve(SECRET, trust=FULL_TRUST).records]

        assert sorted(memory.forget(ids[0], "dpo", "erasure request")) == sorted(ids)

        assert not _readable(memory, ids)
    assert _verify(store)[0] == 0
    assert _files_holding(store, SECRET.encode()) == []


# Raised (a full disk, Ctrl-C), in a process that goes on ---------------------------------------


@pytest.mark.parametrize("error", [StorageFullError(28, "disk full"), KeyboardInterrupt()])
def test_raised_before_the_events_are_saved_nothing_is_erased(
    store: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    ids, _ = _fill(store)
    with Membrane.open(store, embedder=None) as memory:

        def fail(*args: object, **kwargs: object) -> None:
            raise error

        with monkeypatch.context() as patched:
            patched.setattr(memory.application, "save", fail)
            with pytest.raises(type(error)):
                memory.forget(ids[0], "dpo", "erasure request")

        assert _readable(memory, ids)
        assert sorted(memory.forget(ids[0], "dpo", "erasure request")) == sorted(ids)
        assert not _readable(memory, ids)
    assert _verify(store)[0] == 0


def test_raised_while_the_keys_are_doomed_nothing_is_written(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, _ = _fill(store)
    with Membrane.open(store, embedder=None) as memory:
        before = memory.event_count()

        def full(*args: object, **kwargs: object) -> None:
            raise StorageFullError(28, "disk full")

        with monkeypatch.context() as patched:
            patched.setattr(SqliteKeyStore, "_doom", full)
            with pytest.raises(StorageFullError):
                memory.forget(ids[0], "dpo", "erasure request")

        assert memory.event_count() == before and _readable(memory, ids)
    assert _doomed(store) == [] and _verify(store)[0] == 0


def _forget_with_a_full_key_store(memory: Membrane, record_id: str) -> list[bytes]:
    """Forget, the key store failing to delete the keys (its disk full); returns the keys'
    ids."""
    app = memory.application
    key_ids = [app.content_key(record_id)]

    def full(*args: object, **kwargs: object) -> None:
        raise StorageFullError(28, "no space left for the key store")

    original = SqliteKeyStore._delete
    SqliteKeyStore._delete = full  # type: ignore[method-assign]
    try:
        with pytest.raises(StorageFullError):
            memory.forget(record_id, "dpo", "erasure request")
    finally:
        SqliteKeyStore._delete = original  # type: ignore[method-assign]
    key_ids += [app.content_key(doomed.record_id) for doomed in app.keys.doomed()]
    return [key_id for key_id in dict.fromkeys(key_ids) if key_id is not None]


def test_raised_while_the_keys_are_destroyed_nothing_reads_and_forget_again_finishes(
    store: Path,
) -> None:
    ids, keys = _fill(store)
    with Membrane.open(store, embedder=None) as memory:
        keystore = memory.application.keys
        key_ids = _forget_with_a_full_key_store(memory, ids[0])
        assert len(key_ids) == len(ids)

        # saved: every read redacts; the keys are still on disk, but withheld here
        assert not _readable(memory, ids)
        assert all(keystore.holds(key_id) and keystore.get(key_id) is None for key_id in key_ids)

        forgotten = memory.forget(ids[0], "dpo", "erasure request")  # the keys left

        assert forgotten[0] == ids[0] and sorted(forgotten) == sorted(ids)
        assert not any(keystore.holds(key_id) for key_id in key_ids)
        with pytest.raises(ForgottenError):  # nothing is left to do
            memory.forget(ids[0], "dpo", "erasure request")
    for key in keys.values():
        assert _files_holding(store, key) == []
    assert _doomed(store) == [] and _verify(store)[0] == 0


@pytest.mark.parametrize("read_only", [False, True])
def test_an_export_never_carries_a_key_a_cut_short_forget_left(
    store: Path, read_only: bool
) -> None:
    ids, keys = _fill(store)
    with Membrane.open(store, embedder=None) as memory:
        _forget_with_a_full_key_store(memory, ids[0])
        if not read_only:
            exported = io.BytesIO()
            memory.export_log(exported)  # destroys them first, as an open would
            assert _doomed(store) == []
    if read_only:
        with Membrane.open(store, embedder=None, read_only=True) as memory:
            exported = io.BytesIO()
            memory.export_log(exported)  # withholds them
        assert sorted(_doomed(store)) == sorted(ids)
    written = exported.getvalue()
    assert written.count(b'"kind":"key"') == 1  # the record kept
    assert not any(base64.b64encode(key) in written for key in keys.values())


def test_a_log_not_synced_at_each_commit_is_synced_before_the_keys_go(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``sync=False`` a power cut could lose the events after the keys were destroyed:
    the erasure done and unrecorded. The log is synced first."""
    ids, _ = _fill(store)
    steps: list[str] = []
    with Membrane.open(store, embedder=None, sync=False) as memory:
        recorder = memory.application.recorder
        sync_log, delete = recorder.sync_log, SqliteKeyStore._delete

        def synced() -> None:
            steps.append("synced")
            sync_log()

        def deleted(keys: SqliteKeyStore, key_ids: list[bytes]) -> None:
            steps.append("deleted")
            delete(keys, key_ids)

        monkeypatch.setattr(recorder, "sync_log", synced)
        monkeypatch.setattr(SqliteKeyStore, "_delete", deleted)
        memory.forget(ids[0], "dpo", "erasure request")
    assert steps[:2] == ["synced", "deleted"]

"""Tampering with a real store's files: a changed byte, a deleted event, two events swapped,
a cut-off tail, an altered view checkpoint, a corrupt LMDB page. ``verify()``, the
``membrane-es verify`` command and opening the store name the first bad notification; reads
of a damaged record raise :class:`IntegrityError` naming it; a read-only open allows
forensics; a tampered checkpoint is rebuilt, never trusted; a keyed chain resists an attacker
who recomputes the plain one."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from membrane_es import IntegrityError, Membrane, MembraneError, ReadOnlyError, TrustContext
from membrane_es.cli import main
from membrane_es.stores.chain import PLAIN_CHAIN, Chain
from tests.faults.grpc_support import running_daemon
from tests.faults.tamper_support import (
    change_a_byte,
    delete_event,
    rewrite_and_rechain,
    swap_events,
    truncate_tail,
)
from tests.views_support import assert_same_views

FULL = TrustContext(max_sensitivity="hyper")
KEY = b"a key kept in a vault, not in the store"


def _record(subject: str) -> dict[str, object]:
    return {
        "type": "semantic",
        "sensitivity": "low",
        "payload": {"kind": "semantic", "subject": subject, "predicate": "is", "object": "x"},
        "provenance": {"sources": [{"kind": "observation", "ref": "r"}]},
    }


PLAIN = {"LMDB_PLAIN_CHAIN": "y"}  # a chain as stores made before keyed ones were the default


def _make_store(
    path: Path, chain_key: bytes | None = None, env: dict[str, str] | None = None
) -> dict[int, str]:
    """Six notifications; returns which record each one belongs to."""
    owner: dict[int, str] = {}
    with Membrane.open(path, chain_key=chain_key, env=env) as memory:

        def note(record_id: str) -> None:
            owner[memory.application.recorder.max_notification_id()] = record_id

        a = memory.create_record(_record("a")).id
        note(a)
        b = memory.create_record(_record("b")).id
        note(b)
        memory.reinforce(a, "t", "helped")
        note(a)
        memory.reinforce(b, "t", "helped")
        note(b)
        memory.penalize(a, 0.1, "t", "misled")
        note(a)
        c = memory.create_record(_record("c")).id
        note(c)
    return owner


def _verify_cli(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "membrane_es", "verify", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )


Tamper = Callable[[Path], int]  # edits the store, returns the first bad notification

TAMPERS: dict[str, Tamper] = {
    "changed byte": lambda p: (change_a_byte(p, 4), 4)[1],
    # a record's middle event: its read finds a version gap
    "deleted event": lambda p: (delete_event(p, 3), 3)[1],
    # a record's latest event (a's Penalized): no later version shows the gap
    "deleted latest event": lambda p: (delete_event(p, 5), 5)[1],
    "swapped events": lambda p: (swap_events(p, 2, 5), 2)[1],
    "truncated tail": lambda p: truncate_tail(p, 2),
}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_verify_names_the_first_bad_notification(tmp_path: Path, tamper: str) -> None:
    _make_store(tmp_path)
    bad = TAMPERS[tamper](tmp_path)

    report = Membrane.verify_store(tmp_path)
    assert not report.ok
    assert report.notification_id == bad
    assert f"notification {bad}" in str(report)

    done = _verify_cli(tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"notification {bad}" in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_opening_a_damaged_log_is_an_error(tmp_path: Path, tamper: str) -> None:
    _make_store(tmp_path)
    bad = TAMPERS[tamper](tmp_path)
    with pytest.raises(IntegrityError) as raised:
        Membrane.open(tmp_path, verify_on_open=True)
    assert raised.value.notification_id == bad
    # Without the full walk, an open checks every event its views replay: all of them when
    # there is no checkpoint to start from.
    shutil.rmtree(tmp_path / "views")
    with pytest.raises(IntegrityError) as raised:
        Membrane.open(tmp_path)
    assert raised.value.notification_id == bad
    # The failed open released the store: it opens again (read-only, for forensics).
    with Membrane.open(tmp_path, read_only=True) as memory:
        assert memory.damage is not None and memory.damage.notification_id == bad


@pytest.mark.parametrize(
    "tamper", ["changed byte", "deleted event", "deleted latest event", "swapped events"]
)
def test_reads_of_a_damaged_record_raise_naming_the_notification(
    tmp_path: Path, tamper: str
) -> None:
    owner = _make_store(tmp_path)
    bad = TAMPERS[tamper](tmp_path)
    with Membrane.open(tmp_path, read_only=True) as memory:
        with pytest.raises(IntegrityError) as raised:
            memory.retrieve_by_id(owner[bad], trust=FULL)
        assert raised.value.notification_id == bad
        with pytest.raises(IntegrityError):
            memory.history(owner[bad], trust=FULL)
        # A record none of whose events is, or links to, a damaged one still reads (a swap
        # breaks the links of every record here).
        untouched = {
            "changed byte": owner[1],
            "deleted event": owner[2],
            "deleted latest event": owner[2],
        }.get(tamper)
        if untouched is not None:
            assert memory.retrieve_by_id(untouched, trust=FULL).id == untouched
        assert not memory.verify().ok


def test_reads_in_an_open_store_check_the_chain(tmp_path: Path) -> None:
    """The views' checkpoint predates the edit, so the open succeeds; the read does not."""
    owner = _make_store(tmp_path)
    change_a_byte(tmp_path, 4)
    with Membrane.open(tmp_path) as memory:
        with pytest.raises(IntegrityError) as raised:
            memory.retrieve_by_id(owner[4], trust=FULL)
        assert raised.value.notification_id == 4
        assert memory.verify().notification_id == 4


def test_read_only_forensics(tmp_path: Path) -> None:
    owner = _make_store(tmp_path)
    change_a_byte(tmp_path, 3)
    shutil.rmtree(tmp_path / "views")
    with Membrane.open(tmp_path, read_only=True) as memory:
        assert memory.damage is not None and memory.damage.notification_id == 3
        report = memory.verify()
        assert report.notification_id == 3
        assert memory.retrieve_by_id(owner[2], trust=FULL).id == owner[2]
        with pytest.raises(IntegrityError):
            memory.retrieve_by_id(owner[3], trust=FULL)
        with pytest.raises(ReadOnlyError):
            memory.reinforce(owner[2], "t", "r")
        with pytest.raises(ReadOnlyError):
            memory.checkpoint()
        before = memory.application.recorder.max_notification_id()
    with Membrane.open(tmp_path, read_only=True) as memory:
        assert memory.application.recorder.max_notification_id() == before


def test_a_tampered_view_checkpoint_is_rebuilt_never_trusted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _make_store(tmp_path)
    arrays = tmp_path / "views" / "current" / "arrays.bin"
    data = bytearray(arrays.read_bytes())
    data[len(data) // 2] ^= 0xFF
    arrays.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="membrane_es"):
        memory = Membrane.open(tmp_path)
    with memory:
        assert "discarded" in caplog.text
        rebuilt = type(memory.views).rebuild(memory.application)
        try:
            assert_same_views(memory.views, rebuilt)
        finally:
            rebuilt.close()


def test_a_checkpoint_of_another_log_is_not_trusted(tmp_path: Path) -> None:
    """A checkpoint tied to a log that was since rewritten (even consistently) is rebuilt."""
    _make_store(tmp_path, env=PLAIN)
    rewrite_and_rechain(tmp_path, 3, PLAIN_CHAIN)
    with Membrane.open(tmp_path) as memory:
        rebuilt = type(memory.views).rebuild(memory.application)
        try:
            assert_same_views(memory.views, rebuilt)
        finally:
            rebuilt.close()


def test_the_plain_chain_can_be_recomputed_the_keyed_chain_cannot(tmp_path: Path) -> None:
    plain, keyed = tmp_path / "plain", tmp_path / "keyed"
    _make_store(plain, env=PLAIN)
    _make_store(keyed, chain_key=KEY)
    rewrite_and_rechain(plain, 3, PLAIN_CHAIN)
    rewrite_and_rechain(keyed, 3, Chain(b"a guessed key"))
    assert Membrane.verify_store(plain).ok  # what an unkeyed chain cannot prove
    report = Membrane.verify_store(keyed, chain_key=KEY)
    assert not report.ok and report.notification_id == 3
    (tmp_path / "key").write_bytes(KEY)
    done = _verify_cli(keyed, "--chain-key-file", str(tmp_path / "key"))
    assert done.returncode == 2 and "notification 3" in done.stdout


def test_a_keyed_store_needs_its_key(tmp_path: Path) -> None:
    _make_store(tmp_path, chain_key=KEY)
    assert Membrane.verify_store(tmp_path, chain_key=KEY).ok
    assert "keyed" in str(Membrane.verify_store(tmp_path, chain_key=KEY))
    with pytest.raises(MembraneError, match="keyed"):
        Membrane.open(tmp_path)
    with pytest.raises(MembraneError, match="wrong chain key"):
        Membrane.open(tmp_path, chain_key=b"another key")
    assert not Membrane.verify_store(tmp_path).ok
    with Membrane.open(tmp_path, chain_key=KEY, verify_on_open=True) as memory:
        assert memory.verify().ok and memory.verify().keyed


def test_a_plain_store_refuses_a_key(tmp_path: Path) -> None:
    _make_store(tmp_path, env=PLAIN)
    with pytest.raises(MembraneError, match="not keyed"):
        Membrane.open(tmp_path, chain_key=KEY)
    with Membrane.open(tmp_path) as memory:  # begun plain, it stays so
        assert memory.verify().ok and not memory.verify().keyed


def test_a_new_store_is_keyed_with_the_key_kept_with_its_keys(tmp_path: Path) -> None:
    """By default the chain is a MAC under a key in the store's key store: a rewrite of the
    log alone, rechained by the plain rule, is caught."""
    _make_store(tmp_path)
    report = Membrane.verify_store(tmp_path)
    assert report.ok and report.keyed
    with Membrane.open(tmp_path, verify_on_open=True) as memory:
        assert memory.verify().keyed
    with pytest.raises(MembraneError, match="wrong chain key"):
        Membrane.open(tmp_path, chain_key=KEY)
    rewrite_and_rechain(tmp_path, 3, PLAIN_CHAIN)
    report = Membrane.verify_store(tmp_path)
    assert not report.ok and report.notification_id == 3


def _corrupt_pages(path: Path) -> None:
    """Zero every page after the two meta pages: the B-trees' pages lose their headers."""
    data = path / "data.mdb"
    size = data.stat().st_size
    with data.open("r+b") as file:
        file.seek(2 * 4096)
        file.write(bytes(size - 2 * 4096))


def test_a_corrupt_lmdb_page_gives_a_report_and_exit_2(tmp_path: Path) -> None:
    _make_store(tmp_path)
    _corrupt_pages(tmp_path)
    done = _verify_cli(tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "corrupted" in done.stdout
    assert "Traceback" not in done.stderr
    with pytest.raises(IntegrityError):
        Membrane.open(tmp_path)


def test_verify_of_a_missing_store_is_an_error_not_a_new_store(tmp_path: Path) -> None:
    assert main(["verify", str(tmp_path / "nowhere")]) == 1
    assert not (tmp_path / "nowhere").exists()


def test_a_checkpoint_save_killed_midway_does_not_block_the_next(tmp_path: Path) -> None:
    """A kill after the last checkpoint was moved aside (or while staging) leaves ``old`` and
    ``staging`` behind: the next checkpoint is still written, and used."""
    _make_store(tmp_path)
    views = tmp_path / "views"
    shutil.copytree(views / "current", views / "old")
    (views / "staging").mkdir()
    (views / "staging" / "arrays.bin").write_bytes(b"half written")
    with Membrane.open(tmp_path) as memory:
        memory.create_record(_record("d"))
        memory.checkpoint()
        position = memory.views.position
    assert not (views / "old").exists() and not (views / "staging").exists()
    with Membrane.open(tmp_path) as memory:
        assert memory.views.position == position


def test_the_daemon_keeps_a_keyed_chain(tmp_path: Path) -> None:
    key_file = tmp_path / "chain.key"
    key_file.write_bytes(KEY)
    store = tmp_path / "store"
    with running_daemon(store, chain_key_file=str(key_file)) as daemon:
        daemon.tenants.get("").create_record(_record("a"))
    report = Membrane.verify_store(store, chain_key=KEY)
    assert report.ok and report.keyed
    with pytest.raises(MembraneError, match="keyed"):
        Membrane.open(store)

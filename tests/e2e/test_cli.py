"""The command line as a user runs it: a real process, a real LMDB store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lmdb


def membrane_es(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "membrane_es", *args], capture_output=True, text=True, check=False
    )


def test_demo_writes_revises_and_prints_history(tmp_path: Path) -> None:
    result = membrane_es("demo", "--path", str(tmp_path / "store"))
    assert result.returncode == 0, result.stderr
    assert "Superseded" in result.stdout
    assert "[retracted]" in result.stdout
    assert "as of before the move:" in result.stdout
    assert "verify: OK" in result.stdout


def test_show_history_and_verify_read_an_existing_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    demo = membrane_es("demo", "--path", str(store))
    record_id = demo.stdout.split("history of ")[1].split(":")[0]

    shown = membrane_es("show", str(store), record_id)
    assert shown.returncode == 0, shown.stderr
    assert f'"id": "{record_id}"' in shown.stdout

    history = membrane_es("history", str(store), record_id)
    assert history.returncode == 0, history.stderr
    assert "Created" in history.stdout and "Superseded" in history.stdout

    assert membrane_es("verify", str(store)).returncode == 0


def test_verify_exits_2_when_an_event_was_altered(tmp_path: Path) -> None:
    store = tmp_path / "store"
    membrane_es("demo", "--path", str(store))
    env = lmdb.open(str(store), max_dbs=16)
    events = env.open_db(b"memory_events")
    with env.begin(write=True) as txn:
        key, value = next(iter(txn.cursor(db=events)))
        txn.put(key, value[:-1] + bytes([value[-1] ^ 1]), db=events)
    env.close()

    result = membrane_es("verify", str(store))
    assert result.returncode == 2
    assert "altered" in result.stdout


def test_unknown_record_is_a_clear_error(tmp_path: Path) -> None:
    store = tmp_path / "store"
    membrane_es("demo", "--path", str(store))
    result = membrane_es("show", str(store), "no-such-record")
    assert result.returncode == 1
    assert "record not found: no-such-record" in result.stderr

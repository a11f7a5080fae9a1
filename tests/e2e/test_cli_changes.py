"""``membrane-es changes``: lines or JSON Lines from a position, under --trust; --follow
hands over another process's writes and stops cleanly on Ctrl-C, saying where to resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from membrane_es import Membrane
from tests.unit.builders import semantic


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "membrane_es", "changes", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def write(store: Path, **fields: object) -> str:
    with Membrane.open(store) as memory:
        return memory.create_record(semantic(**fields)).id


def test_lines_json_lines_positions_and_trust(tmp_path: Path) -> None:
    store = tmp_path / "store"
    low = write(store, obj="port 8080")
    write(store, obj="the vault", sensitivity="hyper")
    lines = run(str(store))
    assert lines.returncode == 0, lines.stderr
    assert [line.split("\t")[:3:2] for line in lines.stdout.splitlines()] == [
        ["1", "created"],
        ["2", "created"],
    ]
    after = run(str(store), "--json", "--after", "1")
    assert [json.loads(line)["position"] for line in after.stdout.splitlines()] == [2]
    low_reader = run(str(store), "--json", "--trust", "low")
    assert [json.loads(line)["record_id"] for line in low_reader.stdout.splitlines()] == [low]
    bad = run(str(store), "--after", "-1")
    assert bad.returncode == 2 and "after" in bad.stderr


def test_follow_hands_over_another_process_writes_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write(store, obj="first")
    follower = subprocess.Popen(
        [sys.executable, "-m", "membrane_es", "changes", str(store), "--follow", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A follower that does not stop is sent SIGABRT below: every thread's stack is then
        # written to its standard error, for the failure to show where it waits.
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    try:
        assert follower.stdout is not None
        assert json.loads(follower.stdout.readline())["position"] == 1
        write(store, obj="second")
        assert json.loads(follower.stdout.readline())["position"] == 2
        time.sleep(0.2)
        follower.send_signal(signal.SIGINT)
        try:
            out, err = follower.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            follower.send_signal(signal.SIGABRT)
            _, stacks = follower.communicate(timeout=30)
            pytest.fail(f"the follower did not stop on Ctrl-C; its threads:\n{stacks[-6000:]}")
    finally:  # a follower left running or a pipe left open would fail a later test
        if follower.poll() is None:
            follower.kill()
        follower.wait()
        for pipe in (follower.stdout, follower.stderr):
            if pipe is not None:
                pipe.close()
    assert follower.returncode == 0, err
    assert out == "" and "stopped after position 2" in err
    assert "Traceback" not in err


def test_get_as_of_a_position(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Membrane.open(store) as memory:
        record_id = memory.create_record(semantic(obj="port 8080")).id
        memory.pin(record_id, actor="ops", rationale="keep")
    args = [sys.executable, "-m", "membrane_es", "get", str(store), record_id, "--json"]
    before = subprocess.run([*args, "--as-of-position", "1"], capture_output=True, text=True)
    after = subprocess.run([*args, "--as-of-position", "2"], capture_output=True, text=True)
    assert before.returncode == after.returncode == 0, before.stderr
    assert not json.loads(before.stdout)["lifecycle"].get("pinned", False)
    assert json.loads(after.stdout)["lifecycle"]["pinned"] is True
    beyond = subprocess.run([*args, "--as-of-position", "9"], capture_output=True, text=True)
    assert beyond.returncode != 0 and "as_of_position" in beyond.stderr


def test_reads_as_of_a_position(tmp_path: Path) -> None:
    """list, search, graph, context and metrics take --as-of-position as get does."""
    store = tmp_path / "store"
    with Membrane.open(store) as memory:
        first = memory.create_record(semantic(obj="port 8080")).id
        memory.create_record(semantic(subject="billing", obj="port 9090"))
    base = [sys.executable, "-m", "membrane_es"]
    for command in (["list"], ["search", "port"], ["graph", "port"], ["context", "port"]):
        done = subprocess.run(
            [*base, command[0], str(store), *command[1:], "--json", "--as-of-position", "1"],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, (command, done.stderr)
        assert first in done.stdout and "9090" not in done.stdout, (command, done.stdout)
    metrics = subprocess.run(
        [*base, "metrics", str(store), "--json", "--as-of-position", "1"],
        capture_output=True,
        text=True,
    )
    assert json.loads(metrics.stdout)["total_records"] == 1, metrics.stderr
    both = subprocess.run(
        [*base, "list", str(store), "--as-of", "2026-01-01T00:00:00Z", "--as-of-position", "1"],
        capture_output=True,
        text=True,
    )
    assert both.returncode != 0 and "not both" in both.stderr

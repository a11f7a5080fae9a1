"""Crash consistency under SIGKILL (the harness is :mod:`bench.faults`; ``python -m
bench.faults`` runs the long version): a writer doing random operations is killed 30 times —
at random moments, during view checkpoint writes and during map growth — and after every
kill a fresh process finds every acknowledged operation with its effect, nothing of the
operation in flight unless all of it, views equal to a rebuild, and a chain that verifies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.faults import _all_or_nothing, _cut_torn_tail, read_journal, run

KILLS = 30


def test_every_kill_leaves_a_consistent_store(tmp_path: Path) -> None:
    tally = run(tmp_path, KILLS, seed=12)
    assert tally.failures == []
    assert tally.kills == KILLS
    assert tally.at_checkpoint >= 1 and tally.at_growth >= 1
    assert tally.operations > KILLS  # operations were acknowledged between the kills


def test_a_line_torn_by_a_kill_is_cut_before_the_next_writer_appends(tmp_path: Path) -> None:
    # A SIGKILL can stop write(2) at a page boundary: the journal then ends mid-line, and
    # the next writer's first line must not run into it.
    journal = tmp_path / "journal.jsonl"
    whole = b'{"k": "intent", "i": 1, "op": "fork", "head": 4, "expect": 2}\n'
    journal.write_bytes(whole + b'{"k": "ack", "i": 1, "head": 6, "made": ["2fcf')
    _cut_torn_tail(journal)
    assert journal.read_bytes() == whole
    assert [entry["k"] for entry in read_journal(journal)] == ["intent"]
    _cut_torn_tail(journal)  # a whole journal is left alone
    assert journal.read_bytes() == whole


def test_an_operation_in_flight_is_held_to_its_announced_write() -> None:
    """A capture's event count depends on the store (entities it creates, edges it adds), so
    its intent cannot say it: the write line the writer journals just before the write does."""
    capture: dict[str, Any] = {"k": "intent", "i": 1, "op": "capture", "head": 10, "expect": None}
    _all_or_nothing(capture, 10)  # died before it announced a write: nothing written
    with pytest.raises(AssertionError):
        _all_or_nothing(capture, 11)  # died before announcing, yet something is there
    capture["writes"] = 3
    _all_or_nothing(capture, 10)  # nothing
    _all_or_nothing(capture, 13)  # all
    for partial in (11, 12, 14):
        with pytest.raises(AssertionError):
            _all_or_nothing(capture, partial)
    merge = {"k": "intent", "i": 2, "op": "merge", "head": 10, "expect": 4, "writes": 4}
    _all_or_nothing(merge, 14)
    with pytest.raises(AssertionError):
        _all_or_nothing(merge, 12)

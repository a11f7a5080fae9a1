"""Crash consistency under SIGKILL (the harness is :mod:`bench.faults`; ``python -m
bench.faults`` runs the long version): a writer doing random operations is killed 30 times —
at random moments, during view checkpoint writes and during map growth — and after every
kill a fresh process finds every acknowledged operation with its effect, nothing of the
operation in flight unless all of it, views equal to a rebuild, and a chain that verifies."""

from __future__ import annotations

from pathlib import Path

from bench.faults import run

KILLS = 30


def test_every_kill_leaves_a_consistent_store(tmp_path: Path) -> None:
    tally = run(tmp_path, KILLS, seed=12)
    assert tally.failures == []
    assert tally.kills == KILLS
    assert tally.at_checkpoint >= 1 and tally.at_growth >= 1
    assert tally.operations > KILLS  # operations were acknowledged between the kills

"""A close saves the read views only when they moved since the checkpoint on disk, and a
close that makes room for another store may leave a few events for the next open to
replay: either way the next open holds every write."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from membrane_es import Membrane, ValidationError
from membrane_es.engine.checkpoints import SEAL_FILE
from membrane_es.projections.read_model import ReadModel
from tests.unit.builders import FULL_TRUST
from tests.views_support import assert_same_views, random_history


def _sealed_at(store: Path) -> tuple[int, int]:
    """The position the checkpoint on disk was sealed at, and its seal file's mtime."""
    seal = store / "views" / "current" / SEAL_FILE
    return msgspec.json.decode(seal.read_bytes())["position"], seal.stat().st_mtime_ns


def test_closing_unmoved_views_writes_no_checkpoint(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        random_history(memory, random.Random(3), 20)
        memory.list_entries()  # builds the entries view, saved with the others
    before = _sealed_at(tmp_path)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        memory.list_entries()
        memory.retrieve("anything", trust=FULL_TRUST)
    assert _sealed_at(tmp_path) == before
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        memory.ingest_event("note", "moved", summary="one more")
    position, _ = _sealed_at(tmp_path)
    assert position == before[0] + 1


def test_a_close_within_its_replay_allowance_leaves_the_events_to_the_next_open(
    tmp_path: Path,
) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        random_history(memory, random.Random(5), 20)
    before = _sealed_at(tmp_path)
    memory = Membrane.open(tmp_path, sync=False, embedder=None)
    for n in range(3):
        memory.ingest_event("note", f"late-{n}", summary=f"written after the checkpoint {n}")
    memory.close(replay_allowance=3)
    assert _sealed_at(tmp_path) == before  # three events to replay: within the allowance
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        assert memory.views.position == before[0] + 3
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))
        memory.ingest_event("note", "late-3", summary="a fourth")
        memory.close(replay_allowance=3)  # four past the checkpoint: saved
    assert _sealed_at(tmp_path)[0] == before[0] + 4


def test_views_rebuilt_after_the_checkpoint_are_saved_at_close(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        random_history(memory, random.Random(8), 10)
    before = _sealed_at(tmp_path)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        memory.rebuild_views()
    position, mtime = _sealed_at(tmp_path)
    assert position == before[0] and mtime != before[1]


@pytest.mark.parametrize("allowance", [-1, 1.5, True, "3"])
def test_a_bad_replay_allowance_is_refused_and_the_store_stays_open(
    tmp_path: Path, allowance: object
) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        with pytest.raises(ValidationError, match="replay_allowance"):
            memory.close(replay_allowance=allowance)  # type: ignore[arg-type]
        memory.ingest_event("note", "still-open", summary="the store was not closed")

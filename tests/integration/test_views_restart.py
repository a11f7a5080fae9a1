"""Views checkpoint to disk with their position and catch up on open."""

from __future__ import annotations

import random
from pathlib import Path

from membrane_es import Membrane
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections.read_model import ReadModel
from tests.views_support import assert_same_views, random_history


def test_a_restart_loads_the_checkpoint_and_catches_up(tmp_path: Path) -> None:
    rng = random.Random(11)
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        random_history(memory, rng, 40)
    assert (tmp_path / "views" / "current" / "manifest.msgpack").exists()

    # Writes made by a process that did not checkpoint (views saved only up to here).
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        saved = ReadModel.load(tmp_path / "views")
        assert saved is not None
        random_history(memory, rng, 25)
        assert saved.position < memory.application.recorder.max_notification_id()
        saved.catch_up(memory.application)
        assert_same_views(saved, ReadModel.rebuild(memory.application))
        assert_same_views(memory.views, saved)


def test_reopened_views_answer_as_before(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        random_history(memory, random.Random(2), 30)
        before = ReadModel.rebuild(memory.application)
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        assert_same_views(memory.views, before)


def test_a_checkpoint_ahead_of_the_log_is_discarded(tmp_path: Path) -> None:
    with Membrane.open(tmp_path / "a", sync=False) as memory:
        random_history(memory, random.Random(4), 20)
    with Membrane.open(tmp_path / "b", sync=False) as memory:
        random_history(memory, random.Random(5), 5)
    (tmp_path / "b" / "views" / "current").rename(tmp_path / "b-views")
    (tmp_path / "a" / "views" / "current").rename(tmp_path / "b" / "views" / "current")
    with Membrane.open(tmp_path / "b", sync=False) as memory:
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))


def test_opening_with_another_embedder_is_refused(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        random_history(memory, random.Random(6), 5)
    try:
        Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(64))
    except Exception as exc:  # noqa: BLE001 - the type is asserted below
        from membrane_es import MembraneError

        assert isinstance(exc, MembraneError)
        assert "hashing-v1-32" in str(exc)
    else:
        raise AssertionError("a store embedded with one model opened with another")

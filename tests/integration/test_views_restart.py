"""Views checkpoint to disk with their position and catch up on open."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from membrane_es import Membrane, MembraneError, TrustContext
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections import read_model
from membrane_es.projections.array_files import load_checkpoint_arrays
from membrane_es.projections.block_vectors import block_vectors
from membrane_es.projections.read_model import ReadModel
from membrane_es.stores.abilities import Abilities, abilities_of
from tests.unit.builders import FULL_TRUST, semantic
from tests.unit.test_concurrency import run_together
from tests.views_support import SCOPES, assert_same_views, random_history


def test_a_restart_loads_the_checkpoint_and_catches_up(tmp_path: Path) -> None:
    rng = random.Random(11)
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        random_history(memory, rng, 40)
    assert (tmp_path / "views" / "current" / "manifest.msgpack").exists()

    # Writes made by a process that did not checkpoint (views saved only up to here).
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        saved = ReadModel.load(tmp_path / "views", memory.application)
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


def test_a_checkpoint_keeps_no_vectors_and_restores_them_from_the_log(tmp_path: Path) -> None:
    """Vectors live once, in the log: the checkpoint lists each block's rows, and a load puts
    back every vector (zeros for a forgotten record), as a rebuild would."""
    embedder = HashingEmbedder(32)
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        ids = [
            memory.create_record(
                {
                    "type": "semantic",
                    "scope": f"project:{i % 3}",
                    "payload": {
                        "kind": "semantic",
                        "subject": f"s{i}",
                        "predicate": "is",
                        "object": f"fact number {i}",
                    },
                    "provenance": {"sources": [{"kind": "observation", "ref": f"o{i}"}]},
                }
            ).id
            for i in range(30)
        ]
        memory.forget(ids[4], "tester", "asked to")
    arrays = load_checkpoint_arrays(tmp_path / "views" / "current")
    assert not [name for name in arrays if name.endswith(".matrix")]
    assert [name for name in arrays if name.endswith(".rows")]
    with Membrane.open(tmp_path, sync=False, embedder=embedder, read_only=True) as memory:
        saved = ReadModel.load(tmp_path / "views", memory.application)
        assert saved is not None
        rebuilt = ReadModel.rebuild(memory.application)
        assert_same_views(saved, rebuilt)
        forgotten = saved.table.row_of[ids[4]]
        block = next(b for b in saved.embeddings.blocks.values() if forgotten in b.rows[: b.size])
        position = int(np.flatnonzero(block.rows[: block.size] == forgotten)[0])
        assert not block.matrix[position].any()
        assert block.matrix[: block.size].any(axis=1).sum() == block.size - 1


class _WithoutBulkReads:
    """The log as a store without reads of events by key in bulk (as PostgreSQL's) sees it."""

    def __init__(self, application: object) -> None:
        self.mapper = application.mapper  # type: ignore[attr-defined]
        self._recorder = application.recorder  # type: ignore[attr-defined]

    @property
    def recorder(self) -> object:
        recorder = self._recorder

        class Recorder:
            select_notifications = recorder.select_notifications
            max_notification_id = recorder.max_notification_id

        return Recorder()

    @property
    def abilities(self) -> Abilities:
        return abilities_of(self.recorder)


def test_vectors_are_restored_by_topic_where_events_cannot_be_read_by_key(
    tmp_path: Path,
) -> None:
    rng = random.Random(5)
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        random_history(memory, rng, 40)
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32), read_only=True) as m:
        saved = ReadModel.load(tmp_path / "views", _WithoutBulkReads(m.application))
        assert saved is not None
        assert_same_views(saved, ReadModel.rebuild(m.application))


def test_vectors_are_read_back_only_when_first_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening from a checkpoint reads no vector: reads by id, writes with vectors, erasures
    and the next checkpoint do without; a scoped search reads the blocks of the scopes it
    admits alone, an unscoped one the rest, each once; the index is then a rebuild's."""
    embedder = HashingEmbedder(32)
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        ids = random_history(memory, random.Random(8), 40)
    reads: list[list[int]] = []

    def counted(log: Any, position: int, ids: Any, rows: dict[int, Any], dims: int) -> Any:
        reads.append(sorted(rows))
        return block_vectors(log, position, ids, rows, dims)

    monkeypatch.setattr(read_model, "block_vectors", counted)
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        memory.retrieve_by_id(ids[0], trust=FULL_TRUST)
        memory.create_record(semantic("orchid", "runs_on", "kubernetes", scope="project:new"))
        memory.forget(ids[1], "dpo", "erasure request")
        random_history(memory, random.Random(9), 10)
    assert reads == []  # the checkpoint at close listed the blocks' rows without them

    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        memory.forget(ids[2], "dpo", "erasure request")
        assert reads == []
        alpha = memory.views.table.scope_ids["project:alpha"]
        scoped = TrustContext(max_sensitivity="hyper", scopes=["project:alpha"])
        memory.retrieve(task_descriptor="deploy staging", trust=scoped)
        unscoped_records = memory.views.table.scope_ids[""]  # visible under any scope
        assert reads == [sorted({unscoped_records, alpha})]
        found = memory.retrieve(task_descriptor="orchid kubernetes", trust=FULL_TRUST)
        assert found.records
        memory.retrieve(task_descriptor="deploy staging", trust=FULL_TRUST)
        rest = set(memory.views.table.scope_ids.values()) - {unscoped_records, alpha}
        assert len(reads) == 2 and set(reads[1]) <= rest
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))


def test_blocks_read_back_while_another_thread_writes_end_as_a_rebuild(tmp_path: Path) -> None:
    """Searches that read blocks back race writes and erasures on another thread: nothing
    is lost or applied twice, and the index ends as a rebuild's."""
    embedder = HashingEmbedder(32)
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        ids = random_history(memory, random.Random(12), 60)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads very often, so races show up
    try:
        with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
            errors = run_together(
                lambda: random_history(memory, random.Random(13), 30),
                lambda: [memory.forget(i, "dpo", "erasure request") for i in ids[:3]],
                *(
                    lambda scope=scope: memory.retrieve(
                        task_descriptor="deploy staging",
                        trust=TrustContext(max_sensitivity="hyper", scopes=[scope]),
                    )
                    for scope in SCOPES[1:]
                ),
            )
            assert errors == []
            assert_same_views(memory.views, ReadModel.rebuild(memory.application))
    finally:
        sys.setswitchinterval(interval)


def test_vectors_read_back_in_the_background_end_as_a_rebuild(tmp_path: Path) -> None:
    embedder = HashingEmbedder(32)
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        random_history(memory, random.Random(14), 40)
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        index = memory.views.embeddings
        assert index.unread_scopes()
        memory.start_reading_vectors().join(timeout=60)
        assert index.unread_scopes() == []
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))
        with pytest.raises(MembraneError, match="already being read back"):
            memory.start_reading_vectors()


def test_closing_stops_the_background_read_and_keeps_the_checkpoint_whole(
    tmp_path: Path,
) -> None:
    embedder = HashingEmbedder(32)
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        random_history(memory, random.Random(15), 40)
    memory = Membrane.open(tmp_path, sync=False, embedder=embedder)
    memory.start_reading_vectors()
    memory.close()  # at once: whatever it had read, the checkpoint lists every block's rows
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))


def test_a_checkpoint_of_an_earlier_format_is_rebuilt_not_misread(tmp_path: Path) -> None:
    """A checkpoint saved in another format (here: the relation graph back in the manifest,
    as the previous version kept it) is never read as this one: the load declines it, and an
    open rebuilds the views from the log."""
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        random_history(memory, random.Random(9), 30)
        before = ReadModel.rebuild(memory.application)
    current = tmp_path / "views" / "current"
    manifest = msgspec.msgpack.decode((current / "manifest.msgpack").read_bytes())
    graph = msgspec.msgpack.decode((current / read_model.GRAPH_FILE).read_bytes())
    manifest.update(version=read_model.CHECKPOINT_VERSION - 1, graph=graph)
    (current / "manifest.msgpack").write_bytes(msgspec.msgpack.encode(manifest))
    (current / read_model.GRAPH_FILE).unlink()
    with Membrane.open(tmp_path / "other", sync=False) as other:  # any log: none is read
        assert ReadModel.load(tmp_path / "views", other.application) is None
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        assert_same_views(memory.views, before)

"""The background read-back of a checkpoint's vectors starts a thread only when some block
is still in the log: a new store, a store without vectors and a store whose blocks were read
start none (a daemon asks for it on every store it opens)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

from membrane_es import Membrane
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections.read_model import ReadModel
from tests.unit.builders import semantic
from tests.views_support import assert_same_views, random_history


def _readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("membrane-vectors")]


def test_nothing_to_read_back_starts_no_thread(tmp_path: Path) -> None:
    embedder = HashingEmbedder(32)
    with Membrane.open(tmp_path / "new", sync=False, embedder=embedder) as memory:
        assert memory.start_reading_vectors() is None  # a new store: nothing in the log
        assert memory.start_reading_vectors() is None  # and asking again is no error
        assert not _readers()
    with Membrane.open(tmp_path / "plain", sync=False, embedder=None) as memory:
        memory.create_record(semantic("orchid", "runs_on", "kubernetes"))
    with Membrane.open(tmp_path / "plain", sync=False, embedder=None) as memory:
        assert memory.start_reading_vectors() is None  # no vector at all
        assert not memory.views.embeddings.unread_scopes()
        assert not _readers()


def test_a_store_with_vectors_in_the_log_reads_them_back_once(tmp_path: Path) -> None:
    embedder = HashingEmbedder(32)
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        random_history(memory, random.Random(21), 30)
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        index = memory.views.embeddings
        assert index.unread_scopes()
        reader = memory.start_reading_vectors()
        assert reader is not None
        reader.join(timeout=60)
        assert not index.unread_scopes()
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))
        # Every block is read: the index's own read-back (behind a read of a few
        # candidates' vectors) has nothing left to do and starts no thread either.
        index._start_read_back()
        assert index._read_back is None
        assert not _readers()

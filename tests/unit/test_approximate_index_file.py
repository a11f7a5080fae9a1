"""The approximate index kept whole in the read views' checkpoint: a reopened store loads
it (no vector read back, nothing trained or added again for it) and appends what the log
adds after; its answers are the exact read's, ``as_of`` honoured, and a damaged, unreadable
or missing index file falls back to building the index from the blocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.projections import approximate
from membrane_es.projections.approximate_keeper import ApproximateKeeper
from membrane_es.projections.read_model import APPROXIMATE_INDEX_FILE
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.conftest import ManualTime
from tests.unit.test_approximate_index import COUNT, ON, _corpus, _fill, _ids

EXTRA = 300  # records written after the reopen


def _never(*args: Any) -> None:
    raise AssertionError("the loaded index was built again")


def _index_file(store: Path) -> Path:
    return store / "views" / "current" / APPROXIMATE_INDEX_FILE


def _built(store: Path, matrix: np.ndarray, queries: np.ndarray, **options: Any) -> list[Any]:
    """A store of ``matrix`` with one record forgotten, its index built; its answers."""
    with Membrane.open(store, embedder=None, **ON, **options) as memory:
        _fill(memory, matrix)
        memory.forget(memory.views.table.ids[7], actor="test", rationale="asked")
        assert memory.wait_for_index()
        return [_ids(memory, q) for q in queries]


def test_a_reopened_store_loads_its_index_and_follows_the_log_after_it(
    tmp_path: Path, time: ManualTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, queries = _corpus(COUNT + EXTRA)
    store, clock = tmp_path / "store", MonotonicClock(source=time)
    answers = _built(store, matrix[:COUNT], queries, clock=clock)
    assert _index_file(store).exists()
    then = clock.last
    assert then is not None
    time.advance(hours=1)
    # Nothing trained, and no vector added but those written after the checkpoint.
    monkeypatch.setattr(approximate.ApproximateIndex, "train", _never)
    monkeypatch.setattr(ApproximateKeeper, "_build", _never)
    with Membrane.open(store, embedder=None, clock=clock, **ON) as memory:
        embeddings = memory.views.embeddings
        loaded = embeddings.approximate_index()
        assert loaded is not None and not embeddings.approximate_building
        assert loaded.size == COUNT - 1 and loaded.rows_below == COUNT
        assert [_ids(memory, q) for q in queries] == answers
        # Its first read scored its candidates from the log, and read the blocks back
        # behind it; waiting for the index waits for them.
        assert embeddings._read_back is not None
        assert memory.wait_for_index(timeout=60)
        assert not embeddings.unread_scopes()
        assert answers == [_ids(memory, q, exact=True) for q in queries]
        _fill(memory, matrix, first=COUNT)
        assert loaded.size == COUNT + EXTRA - 1 and loaded.rows_below == COUNT + EXTRA
        now = [_ids(memory, q) for q in queries]
        assert now == [_ids(memory, q, exact=True) for q in queries]
        assert now != answers  # the records written after the reopen are found
        assert [_ids(memory, q, as_of=then) for q in queries] == answers
        forgotten = now[0][0]
        memory.forget(forgotten, actor="test", rationale="asked")
        assert loaded.size == COUNT + EXTRA - 2
        assert forgotten not in _ids(memory, queries[0])
        kept = [_ids(memory, q) for q in queries]
    # The next checkpoint holds the index as it was at the close.
    with Membrane.open(store, embedder=None, clock=clock, **ON) as memory:
        again = memory.views.embeddings.approximate_index()
        assert again is not None and again.size == COUNT + EXTRA - 2
        assert [_ids(memory, q) for q in queries] == kept


def test_a_damaged_index_file_is_not_trusted(tmp_path: Path) -> None:
    matrix, queries = _corpus()
    store = tmp_path / "store"
    answers = _built(store, matrix, queries)
    data = bytearray(_index_file(store).read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    _index_file(store).write_bytes(bytes(data))
    # The checkpoint's seal no longer holds: the views are rebuilt from the log.
    with Membrane.open(store, embedder=None, **ON) as memory:
        assert memory.wait_for_index()
        assert [_ids(memory, q) for q in queries] == answers
        assert answers == [_ids(memory, q, exact=True) for q in queries]


def test_an_index_file_faiss_cannot_read_is_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, queries = _corpus()
    store = tmp_path / "store"
    answers = _built(store, matrix, queries)

    def unreadable(*args: Any) -> None:
        raise RuntimeError("Error in faiss::read_index: not a known index type")

    with monkeypatch.context() as patch:
        patch.setattr(approximate.faiss, "read_index", unreadable)
        with Membrane.open(store, embedder=None, **ON) as memory:
            embeddings = memory.views.embeddings
            assert embeddings.approximate.current is None  # not loaded: built from the blocks
            assert [_ids(memory, q) for q in queries] == answers
            assert memory.wait_for_index()
            built = embeddings.approximate_index()
            assert built is not None and built.size == COUNT - 1
            assert [_ids(memory, q) for q in queries] == answers
    # Nothing was written, but the index built since the open is checkpointed at the close.
    with Membrane.open(store, embedder=None, **ON) as memory:
        loaded = memory.views.embeddings.approximate_index()
        assert loaded is not None and loaded.size == COUNT - 1
        assert [_ids(memory, q) for q in queries] == answers


def test_an_index_file_for_another_threshold_is_not_used(tmp_path: Path) -> None:
    matrix, queries = _corpus()
    store = tmp_path / "store"
    answers = _built(store, matrix, queries)
    options = {**ON, "approximate_min_vectors": 1200}
    with Membrane.open(store, embedder=None, **options) as memory:
        assert memory.wait_for_index()
        index = memory.views.embeddings.approximate_index()
        assert index is not None and index.trained_below > 1200
        assert [_ids(memory, q) for q in queries] == answers

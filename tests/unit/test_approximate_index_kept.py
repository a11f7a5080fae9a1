"""The approximate index's checkpoint file: kept (not written again) while little was added
since it was written, the reopened index then equal to the one followed write by write
(rows erased since the file erased again, rows added since read from the log); written
again once much was added; and written without holding up searches."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.projections import approximate, approximate_file
from membrane_es.projections.approximate_keeper import ApproximateKeeper
from membrane_es.projections.read_model import ReadModel
from membrane_es.queries import vectors
from membrane_es.timekeeping.clock import MonotonicClock
from tests.integration.test_views_restart import _WithoutBulkReads
from tests.unit.conftest import ManualTime
from tests.unit.test_approximate_index import COUNT, ON, _corpus, _fill, _ids
from tests.unit.test_approximate_index_file import _index_file, _never

EXTRA = 300  # records written after the index file


def _inode(path: Path) -> int:
    return os.stat(path).st_ino


def _searched(memory: Membrane, queries: np.ndarray) -> list[list[int]]:
    """The index's own candidates for each query (rows, nearest first)."""
    index = memory.views.embeddings.approximate_index()
    assert index is not None
    return [index.search(q, 100, index.rows_below).tolist() for q in queries]


def test_a_file_little_changed_since_is_kept_and_read_right(
    tmp_path: Path, time: ManualTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, queries = _corpus(COUNT + 2 * EXTRA)
    store, clock = tmp_path / "store", MonotonicClock(source=time)
    with Membrane.open(store, embedder=None, clock=clock, **ON) as memory:
        ids = _fill(memory, matrix[:COUNT])
        assert memory.wait_for_index()
        memory.checkpoint()
        written = _inode(_index_file(store))
        memory.checkpoint()  # nothing added: the same file
        assert _inode(_index_file(store)) == written
        then = clock.last
        time.advance(hours=1)
        ids += _fill(memory, matrix[: COUNT + EXTRA], first=COUNT)
        memory.forget(ids[5], actor="test", rationale="asked")  # held by the file
        memory.forget(ids[COUNT + 3], actor="test", rationale="asked")  # added after it
        memory.checkpoint()
        assert _inode(_index_file(store)) == written  # little added: kept
        followed = _searched(memory, queries)
        answers = [_ids(memory, q) for q in queries]
    # The checkpoint at the close kept it too: the open reads the rows added since from the
    # log and erases the two forgotten rows again; nothing is trained or built.
    assert _inode(_index_file(store)) == written
    with monkeypatch.context() as patch:
        patch.setattr(approximate.ApproximateIndex, "train", _never)
        patch.setattr(ApproximateKeeper, "_build", _never)
        with Membrane.open(store, embedder=None, clock=clock, **ON) as memory:
            index = memory.views.embeddings.approximate_index()
            assert index is not None and not memory.views.embeddings.approximate_building
            assert index.size == COUNT + EXTRA - 2 and index.rows_below == COUNT + EXTRA
            assert _searched(memory, queries) == followed
            assert [_ids(memory, q) for q in queries] == answers
            assert answers == [_ids(memory, q, exact=True) for q in queries]
            assert ids[5] not in _ids(memory, matrix[5]) and ids[5] not in sum(answers, [])
            earlier = [_ids(memory, q, as_of=then) for q in queries]
            assert earlier == [_ids(memory, q, as_of=then, exact=True) for q in queries]
            # More written and erased after a reopen: still kept, and still right.
            ids += _fill(memory, matrix, first=COUNT + EXTRA)
            memory.forget(ids[9], actor="test", rationale="asked")
            followed = _searched(memory, queries)
            answers = [_ids(memory, q) for q in queries]
        assert _inode(_index_file(store)) == written
        with Membrane.open(store, embedder=None, clock=clock, **ON) as memory:
            index = memory.views.embeddings.approximate_index()
            assert index is not None and index.size == COUNT + 2 * EXTRA - 3
            assert _searched(memory, queries) == followed
            assert [_ids(memory, q) for q in queries] == answers
            assert answers == [_ids(memory, q, exact=True) for q in queries]


def test_a_file_much_changed_since_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(approximate_file, "KEEP_MIN_ROWS", 100)
    matrix, queries = _corpus(COUNT + EXTRA)
    store = tmp_path / "store"
    with Membrane.open(store, embedder=None, **ON) as memory:
        _fill(memory, matrix[:COUNT])
        assert memory.wait_for_index()
        memory.checkpoint()
        written = _inode(_index_file(store))
        _fill(memory, matrix[: COUNT + 50], first=COUNT)
        memory.checkpoint()
        assert _inode(_index_file(store)) == written  # 50 rows: kept
        _fill(memory, matrix, first=COUNT + 50)
        memory.checkpoint()
        assert _inode(_index_file(store)) != written  # 300 rows: written again
        followed = _searched(memory, queries)
    with monkeypatch.context() as patch:
        patch.setattr(ApproximateKeeper, "_build", _never)
        with Membrane.open(store, embedder=None, **ON) as memory:
            index = memory.views.embeddings.approximate_index()
            assert index is not None and index.size == COUNT + EXTRA
            assert index.file is not None and index.file.rows_below == COUNT + EXTRA
            assert _searched(memory, queries) == followed


def test_a_kept_file_damaged_is_not_trusted(tmp_path: Path) -> None:
    matrix, queries = _corpus(COUNT + EXTRA)
    store = tmp_path / "store"
    with Membrane.open(store, embedder=None, **ON) as memory:
        _fill(memory, matrix[:COUNT])
        assert memory.wait_for_index()
        memory.checkpoint()
        written = _inode(_index_file(store))
        _fill(memory, matrix, first=COUNT)
        answers = [_ids(memory, q) for q in queries]
    assert _inode(_index_file(store)) == written
    data = bytearray(_index_file(store).read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    _index_file(store).write_bytes(bytes(data))
    # The seal covers the kept file as any other: the views are rebuilt from the log.
    with Membrane.open(store, embedder=None, **ON) as memory:
        assert memory.wait_for_index()
        index = memory.views.embeddings.approximate_index()
        assert index is not None and index.size == COUNT + EXTRA
        assert [_ids(memory, q) for q in queries] == answers


def test_a_search_does_not_wait_for_the_index_file_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, queries = _corpus(COUNT + EXTRA)
    store = tmp_path / "store"
    writing, release = threading.Event(), threading.Event()
    original = approximate_file.write_index

    def held_up(index: Any, path: Path) -> None:
        writing.set()
        assert release.wait(60)
        original(index, path)

    answered: list[bool] = []
    spied = vectors.approximate_nearest

    def spy(*args: Any, **kwargs: Any) -> Any:
        found = spied(*args, **kwargs)
        answered.append(found is not None)
        return found

    monkeypatch.setattr(approximate_file, "write_index", held_up)
    monkeypatch.setattr(vectors, "approximate_nearest", spy)
    with Membrane.open(store, embedder=None, **ON) as memory:
        ids = _fill(memory, matrix[:COUNT])
        assert memory.wait_for_index()
        errors: list[BaseException] = []

        def checkpoint() -> None:
            try:
                memory.checkpoint()
            except BaseException as error:  # noqa: BLE001 - reported by the test
                errors.append(error)

        writer = threading.Thread(target=checkpoint)
        writer.start()
        try:
            assert writing.wait(60)
            # The file is being written: reads by the index, writes and an erasure go on.
            found = [_ids(memory, q) for q in queries]
            assert answered and all(answered)
            assert found == [_ids(memory, q, exact=True) for q in queries]
            ids += _fill(memory, matrix, first=COUNT)
            memory.forget(ids[11], actor="test", rationale="asked")  # held by the copy
            assert writer.is_alive()  # still held up: nothing above waited for it
        finally:
            release.set()
            writer.join(60)
        assert not errors
        followed = _searched(memory, queries)
        answers = [_ids(memory, q) for q in queries]
    # The close kept the file written from the copy; the erasure after the copy is erased
    # again on open.
    with Membrane.open(store, embedder=None, **ON) as memory:
        index = memory.views.embeddings.approximate_index()
        assert index is not None and index.size == COUNT + EXTRA - 1
        assert index.file is not None and index.file.rows_below == COUNT
        assert _searched(memory, queries) == followed
        assert [_ids(memory, q) for q in queries] == answers


def test_rows_added_since_the_file_are_read_by_topic_after_it(tmp_path: Path) -> None:
    """Where the log cannot be read by key (PostgreSQL), the creations of the rows added
    since the file are selected from the file's position on, not from the log's start."""
    matrix, queries = _corpus(COUNT + EXTRA)
    store = tmp_path / "store"
    with Membrane.open(store, embedder=None, **ON) as memory:
        _fill(memory, matrix[:COUNT])
        assert memory.wait_for_index()
        memory.checkpoint()
        position = memory.position
        _fill(memory, matrix, first=COUNT)
        followed = _searched(memory, queries)
    with Membrane.open(store, embedder=None, read_only=True) as memory:
        log = _WithoutBulkReads(memory.application)
        starts: list[int] = []
        select = memory.application.recorder.select_notifications

        def selected(_recorder: Any, **kwargs: Any) -> Any:
            # A method of the recorder _WithoutBulkReads makes: called with it first.
            starts.append(kwargs["start"])
            return select(**kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(memory.application.recorder, "select_notifications", selected)
            views = ReadModel.load(store / "views", log)
        assert views is not None
        loaded = views.embeddings.approximate_loaded
        assert loaded is not None and loaded.size == COUNT + EXTRA
        assert starts and min(starts) == position + 1
        assert [loaded.search(q, 100, loaded.rows_below).tolist() for q in queries] == followed
        views.close()

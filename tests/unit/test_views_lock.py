"""The read views' lock: held alone (re-entrant) to apply events, shared by a checkpoint
and by reads' snapshots; a checkpoint writing the views' files holds up no search, and an
event waits for it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.projections import read_model
from membrane_es.projections.views_lock import ViewsLock
from tests.unit.test_approximate_index import _corpus, _ids


def _in_thread(work: Any) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()

    def run() -> None:
        work()
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


def test_alone_is_reentrant_and_waits_for_shared_holds() -> None:
    lock = ViewsLock()
    with lock, lock, lock.shared():  # alone twice, and shared while alone
        pass
    release = threading.Event()
    held = threading.Event()

    def reader() -> None:
        with lock.shared():
            held.set()
            assert release.wait(10)

    holder, _ = _in_thread(reader)
    assert held.wait(10)
    with lock.shared():  # readers side by side
        pass
    assert not lock.acquire(timeout=0.05)  # alone: waits for the reader
    writer, written = _in_thread(lambda: lock.__enter__())
    assert not written.wait(0.1)
    release.set()
    assert written.wait(10)
    holder.join(10)
    writer.join(10)


def test_shared_then_alone_in_one_thread_is_an_error() -> None:
    lock = ViewsLock()
    with lock.shared(), pytest.raises(RuntimeError, match="held shared"):
        lock.acquire()
    with pytest.raises(RuntimeError, match="not held alone"):
        lock.release()


def test_a_search_does_not_wait_for_a_checkpoint_writing_the_views(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, queries = _corpus(200)
    writing, release = threading.Event(), threading.Event()
    original = read_model.save_arrays

    def held_up(*args: Any) -> None:
        writing.set()
        assert release.wait(60)
        original(*args)

    with Membrane.open(tmp_path / "store", embedder=None) as memory:
        with memory.batch():
            for i, vector in enumerate(matrix[:150]):
                memory.create_record(
                    {
                        "type": "semantic",
                        "payload": {
                            "kind": "semantic",
                            "subject": f"s{i}",
                            "predicate": "p",
                            "object": "o",
                        },
                        "provenance": {"sources": [{"kind": "observation", "ref": f"r{i}"}]},
                    },
                    embedding=vector,
                )
        answers = [_ids(memory, q) for q in queries[:5]]
        monkeypatch.setattr(read_model, "save_arrays", held_up)
        checkpoint, saved = _in_thread(memory.checkpoint)
        try:
            assert writing.wait(60)
            # The views' files are being written: searches read on.
            assert [_ids(memory, q) for q in queries[:5]] == answers
            # A write's events wait for the checkpoint to have read the views.
            vector = np.asarray(matrix[150])
            record = {
                "type": "semantic",
                "payload": {"kind": "semantic", "subject": "late", "predicate": "p", "object": "o"},
                "provenance": {"sources": [{"kind": "observation", "ref": "late"}]},
            }
            writer, written = _in_thread(lambda: memory.create_record(record, embedding=vector))
            assert not written.wait(0.2)
            assert not saved.is_set()
        finally:
            release.set()
        assert saved.wait(60) and written.wait(60)
        checkpoint.join(10)
        writer.join(10)
        assert len(memory.views.table.ids) == 151


class _InterruptedAfterTaking(ViewsLock):
    """A lock whose acquire is interrupted (as by Ctrl-C) just after it took the lock."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        super().acquire(blocking, timeout)
        raise KeyboardInterrupt


class _InterruptedOnce(threading.Condition):
    """A condition whose first exit is interrupted (as by Ctrl-C) once its lock is let go:
    where a shared hold has counted its reader and not yet entered its block."""

    interrupted = False

    def __exit__(self, *args: Any) -> None:
        super().__exit__(*args)
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt


def _free_for_another_thread(lock: ViewsLock) -> bool:
    taken: list[bool] = []
    other = threading.Thread(target=lambda: taken.append(ViewsLock.acquire(lock, timeout=5)))
    other.start()
    other.join()
    return taken == [True]


def test_an_interrupt_after_taking_the_lock_alone_leaves_it_free() -> None:
    lock = _InterruptedAfterTaking()
    with pytest.raises(KeyboardInterrupt), lock:
        pass  # never reached: the interrupt lands before the block
    assert _free_for_another_thread(lock)


def test_an_interrupt_after_counting_a_reader_takes_the_count_back() -> None:
    lock = ViewsLock()
    lock._state = _InterruptedOnce(threading.Lock())
    with pytest.raises(KeyboardInterrupt), lock.shared():
        pass
    assert _free_for_another_thread(lock)

"""The approximate index (FAISS IVF) switched on for a few thousand vectors, against the
exact scan: the top 10 it returns, the same trust filtering, ``as_of`` honoured, forgotten and
retracted records never returned, the fallback when its admitted candidates are too few, the
index rebuilt after an open equal to the one followed write by write, and the engine without
FAISS."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from membrane_es import Membrane, TrustContext
from membrane_es.errors import ValidationError
from membrane_es.projections import approximate
from membrane_es.projections.embeddings import EmbeddingIndex
from membrane_es.queries import vectors
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.conftest import ManualTime

COUNT, DIMENSIONS, CENTRES = 2000, 48, 20
ON = {"approximate_index": True, "approximate_min_vectors": 1000}
SCOPES = ["project:a", "project:b", "project:c", "project:rare"]
SENSITIVITY = ["low", "medium", "high"]


def _corpus(count: int = COUNT, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Clustered unit vectors and queries near the same centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CENTRES, DIMENSIONS), dtype=np.float32) * 1.5
    raw = centres[rng.integers(0, CENTRES, count + 20)] + rng.standard_normal(
        (count + 20, DIMENSIONS), dtype=np.float32
    )
    unit = (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)
    return unit[:count], unit[count:]


def _scope(i: int) -> str:
    return "project:rare" if i % 100 == 0 else SCOPES[i % 3]


def _record(i: int) -> dict[str, Any]:
    return {
        "type": "semantic",
        "scope": _scope(i),
        "sensitivity": SENSITIVITY[i % 3],
        "payload": {"kind": "semantic", "subject": f"s{i}", "predicate": "p", "object": "o"},
        "provenance": {"sources": [{"kind": "observation", "ref": f"r{i}"}]},
    }


def _fill(memory: Membrane, matrix: np.ndarray, first: int = 0) -> list[str]:
    ids = []
    for start in range(first, len(matrix), 500):
        with memory.batch():
            for i in range(start, min(start + 500, len(matrix))):
                ids.append(memory.create_record(_record(i), embedding=matrix[i]).id)
    return ids


@pytest.fixture
def used(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether each ranked read was answered from the approximate index's candidates."""
    answered: list[bool] = []
    original = vectors.approximate_nearest

    def spy(*args: Any, **kwargs: Any) -> Any:
        found = original(*args, **kwargs)
        answered.append(found is not None)
        return found

    monkeypatch.setattr(vectors, "approximate_nearest", spy)
    yield answered


def _ids(memory: Membrane, query: np.ndarray, **kwargs: Any) -> list[str]:
    kwargs.setdefault("trust", TrustContext(max_sensitivity="high"))
    found = memory.retrieve(limit=10, query_embedding=query, **kwargs)
    return [record.id for record in found.records]


def test_the_index_returns_the_exact_top_ten(used: list[bool]) -> None:
    matrix, queries = _corpus()
    with Membrane.in_memory(embedder=None, **ON) as memory:
        _fill(memory, matrix)
        assert memory.wait_for_index()
        index = memory.views.embeddings.approximate_index()
        assert index is not None and index.size == COUNT and index.trained_below == 1000
        shared = []
        for query in queries:
            shared.append(len(set(_ids(memory, query)) & set(_ids(memory, query, exact=True))))
        assert all(used) and len(used) == len(queries)
        assert sum(shared) / (10 * len(queries)) >= 0.98


def test_trust_filters_are_the_exact_scans(used: list[bool], time: ManualTime) -> None:
    matrix, queries = _corpus()
    clock = MonotonicClock(source=time)
    with Membrane.in_memory(clock=clock, embedder=None, **ON) as memory:
        _fill(memory, matrix)
        assert memory.wait_for_index()
        for trust in (
            TrustContext(),  # low: medium and high come back redacted, still ranked
            TrustContext(max_sensitivity="medium", scopes=["project:a", "project:b"]),
        ):
            for query in queries[:8]:
                got = memory.retrieve(trust=trust, limit=10, query_embedding=query)
                exact = memory.retrieve(trust=trust, limit=10, query_embedding=query, exact=True)
                # The same records, in the same order, redacted as the exact scan redacts them.
                assert _shown(got.records) == _shown(exact.records)
                if trust.scopes:
                    assert {r.scope for r in got.records} <= set(trust.scopes)
        assert used and all(used)


def test_a_read_as_of_a_moment_gives_that_moments_answer(time: ManualTime) -> None:
    matrix, queries = _corpus()
    clock = MonotonicClock(source=time)
    with Membrane.in_memory(clock=clock, embedder=None, **ON) as memory:
        early = _fill(memory, matrix[:1500])
        assert memory.wait_for_index()
        answers = [_ids(memory, query) for query in queries[:6]]
        then = clock.last
        assert then is not None
        time.advance(hours=1)
        _fill(memory, matrix, first=1500)
        assert memory.wait_for_index()
        for query, answer in zip(queries[:6], answers, strict=True):
            again = _ids(memory, query, as_of=then)
            assert again == answer
            assert set(again) <= set(early)


def test_forgotten_and_retracted_records_are_never_returned(used: list[bool]) -> None:
    matrix, queries = _corpus()
    with Membrane.in_memory(embedder=None, **ON) as memory:
        ids = _fill(memory, matrix)
        assert memory.wait_for_index()
        query = queries[0]
        top = _ids(memory, query)
        memory.forget(top[0], actor="test", rationale="asked")
        memory.retract(top[1], actor="test", rationale="wrong")
        index = memory.views.embeddings.approximate_index()
        assert index is not None and index.size == COUNT - 1  # its code is gone
        row = ids.index(top[0])
        assert row not in index.search(query, 50, COUNT).tolist()
        after = _ids(memory, query)
        assert top[0] not in after and top[1] not in after
        assert set(after) >= set(top[2:])
        assert used and all(used)


def test_too_few_admitted_candidates_fall_back_to_the_exact_read(used: list[bool]) -> None:
    matrix, queries = _corpus()
    with Membrane.in_memory(embedder=None, **ON) as memory:
        _fill(memory, matrix)
        assert memory.wait_for_index()
        # The rare scope is 1 % of the store: a scoped read never asks the index.
        rare = TrustContext(max_sensitivity="high", scopes=["project:rare"])
        for query in queries[:4]:
            assert _ids(memory, query, trust=rare) == _ids(memory, query, trust=rare, exact=True)
        assert not used
        # Unscoped but filtered to the records made before the first 40: few are admitted
        # among the index's candidates, so the read does not keep them.
        moment = _created(memory, memory.views.table.ids[40])
        for query in queries[:4]:
            got = _ids(memory, query, created_before=moment)
            assert got == _ids(memory, query, created_before=moment, exact=True)
            assert len(got) == 10
        assert used and not any(used)


def _without_index_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints written from now on keep the index's training, not the index (as one
    written while it is being built)."""
    monkeypatch.setattr(EmbeddingIndex, "approximate_live", lambda self: None)


def test_the_index_built_after_an_open_equals_the_one_followed(tmp_path: Path) -> None:
    matrix, queries = _corpus()
    with pytest.MonkeyPatch.context() as patch:
        _without_index_file(patch)
        with Membrane.open(tmp_path / "store", embedder=None, **ON) as memory:
            _fill(memory, matrix)
            memory.forget(memory.views.table.ids[7], actor="test", rationale="asked")
            assert memory.wait_for_index()
            followed = memory.views.embeddings.approximate_index()
            assert followed is not None
            live = [followed.search(q, 100, COUNT).tolist() for q in queries]
            answers = [_ids(memory, q) for q in queries]
    assert not (tmp_path / "store" / "views" / "current" / "approximate.faiss").exists()
    with Membrane.open(tmp_path / "store", embedder=None, **ON) as memory:
        assert memory.views.embeddings.approximate.current is None  # not in the checkpoint
        with pytest.MonkeyPatch.context() as patch:  # its training is: not trained again
            patch.setattr(approximate.ApproximateIndex, "train", _never)
            assert memory.wait_for_index()
            built = memory.views.embeddings.approximate_index()
        assert built is not None and built.size == followed.size
        assert built.trained_below == followed.trained_below
        assert [built.search(q, 100, COUNT).tolist() for q in queries] == live
        assert [_ids(memory, q) for q in queries] == answers
        memory.rebuild_views()
        assert [_ids(memory, q) for q in queries] == answers


def _never(*args: Any) -> None:
    raise AssertionError("trained again")


def test_an_index_trained_for_another_threshold_is_trained_again(tmp_path: Path) -> None:
    matrix, queries = _corpus()
    with Membrane.open(tmp_path / "store", embedder=None, **ON) as memory:
        _fill(memory, matrix)
    with Membrane.open(tmp_path / "store", embedder=None, **_min(1200)) as memory:
        assert memory.wait_for_index()
        index = memory.views.embeddings.approximate_index()
        assert index is not None and index.trained_below == 1200
        assert _ids(memory, queries[0]) == _ids(memory, queries[0], exact=True)


def test_the_same_events_give_the_same_index() -> None:
    matrix, queries = _corpus()
    found = []
    for batch in (500, 137):  # however the writes were batched
        with Membrane.in_memory(embedder=None, **ON) as memory:
            for start in range(0, COUNT, batch):
                with memory.batch():
                    for i in range(start, min(start + batch, COUNT)):
                        memory.create_record(_record(i), embedding=matrix[i])
            assert memory.wait_for_index()
            index = memory.views.embeddings.approximate_index()
            assert index is not None
            found.append([index.search(q, 100, COUNT).tolist() for q in queries])
    assert found[0] == found[1]


def test_small_stores_and_the_switch(used: list[bool]) -> None:
    matrix, queries = _corpus(600)
    with Membrane.in_memory(embedder=None, **_min(1500)) as memory:
        _fill(memory, matrix)
        assert memory.views.embeddings.approximate_index() is None  # below the threshold
    with Membrane.in_memory(embedder=None, approximate_min_vectors=10) as memory:
        _fill(memory, matrix)
        assert memory.views.embeddings.approximate_index() is None  # off unless asked for
        _ids(memory, queries[0])
    with Membrane.in_memory(
        embedder=None, approximate_index=False, approximate_min_vectors=10
    ) as memory:
        _fill(memory, matrix)
        assert memory.views.embeddings.approximate_index() is None
    assert not used
    with pytest.raises(ValidationError, match="approximate_min_vectors"):
        Membrane.in_memory(embedder=None, approximate_min_vectors=0)
    with pytest.raises(ValidationError, match="approximate_index"):
        Membrane.in_memory(embedder=None, approximate_index="yes")  # type: ignore[arg-type]


def _min(count: int) -> dict[str, Any]:
    """On where FAISS is installed (None), from ``count`` vectors."""
    return {"approximate_index": None, "approximate_min_vectors": count}


def test_the_engine_without_faiss(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approximate, "faiss", None)
    assert not approximate.available()
    with pytest.raises(ValidationError, match="approximate_index"):
        Membrane.in_memory(embedder=None, **ON)
    matrix, queries = _corpus(2000)
    with Membrane.in_memory(embedder=None, **_min(100)) as memory:
        _fill(memory, matrix)
        assert memory.views.embeddings.approximate_index() is None
        assert _ids(memory, queries[0]) == _ids(memory, queries[0], exact=True)


def _shown(records: list[Any]) -> list[dict[str, Any]]:
    """Records as returned, but for salience (the clock moves on between two reads)."""
    return [{**msgspec.to_builtins(r), "salience": None} for r in records]


def _created(memory: Membrane, record_id: str) -> datetime:
    return memory.retrieve_by_id(record_id, trust=TrustContext(max_sensitivity="high")).created_at


def test_the_engine_imports_and_reads_where_faiss_cannot_be_imported() -> None:
    script = (
        "import sys; sys.modules['faiss'] = None\n"
        "import numpy as np\n"
        "from membrane_es import Membrane\n"
        "from membrane_es.projections import approximate\n"
        "assert not approximate.available()\n"
        "with Membrane.in_memory(embedder=None, approximate_min_vectors=5) as memory:\n"
        "    for i in range(20):\n"
        "        vector = np.eye(8, dtype=np.float32)[i % 8]\n"
        "        memory.create_record({'type': 'semantic', 'payload': {'kind': 'semantic',"
        " 'subject': f's{i}', 'predicate': 'p', 'object': 'o'}, 'provenance': {'sources':"
        " [{'kind': 'observation', 'ref': 'r'}]}}, embedding=vector)\n"
        "    found = memory.retrieve(limit=3, query_embedding=np.eye(8, dtype=np.float32)[2])\n"
        "    assert len(found.records) == 3, found\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def held_back(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Training waits until the event is set: a build under way, for as long as a test wants."""
    release = threading.Event()
    original = approximate.ApproximateIndex.train

    def slow(self: approximate.ApproximateIndex, rows: np.ndarray, vectors: np.ndarray) -> None:
        assert release.wait(60)
        original(self, rows, vectors)

    monkeypatch.setattr(approximate.ApproximateIndex, "train", slow)
    yield release
    release.set()


def test_the_write_that_reaches_the_threshold_does_not_wait_for_the_build(
    held_back: threading.Event, used: list[bool]
) -> None:
    matrix, queries = _corpus()
    with Membrane.in_memory(embedder=None, **ON) as memory:
        _fill(memory, matrix)  # returns while the index is still being trained
        index = memory.views.embeddings
        assert index.approximate_building and index.approximate_index() is None
        assert not memory.wait_for_index(timeout=0.05)
        before = [_ids(memory, q) for q in queries[:5]]  # answered without the index
        assert not used
        held_back.set()
        assert memory.wait_for_index(timeout=60)
        built = index.approximate_index()
        assert built is not None and built.size == COUNT  # rows written meanwhile are in
        assert [_ids(memory, q) for q in queries[:5]] == before
        assert used and all(used)


def test_rows_written_and_erased_during_a_build_are_caught_up_with(
    held_back: threading.Event,
) -> None:
    matrix, queries = _corpus()
    with Membrane.in_memory(embedder=None, **ON) as memory:
        ids = _fill(memory, matrix[:1500])
        memory.forget(ids[1200], actor="test", rationale="asked")
        _fill(memory, matrix, first=1500)
        held_back.set()
        assert memory.wait_for_index(timeout=60)
        built = memory.views.embeddings.approximate_index()
        assert built is not None and built.size == COUNT - 1
        assert 1200 not in built.search(matrix[1200], 50, COUNT).tolist()
    # The same events, the index built as they were written: the same index.
    with Membrane.in_memory(embedder=None, **ON) as memory:
        _fill(memory, matrix[:1500])
        assert memory.wait_for_index(timeout=60)
        memory.forget(memory.views.table.ids[1200], actor="test", rationale="asked")
        _fill(memory, matrix, first=1500)
        followed = memory.views.embeddings.approximate_index()
        assert followed is not None
        assert [followed.search(q, 100, COUNT).tolist() for q in queries] == [
            built.search(q, 100, COUNT).tolist() for q in queries
        ]


def test_a_reopened_stores_first_search_does_not_wait_for_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, queries = _corpus()
    with pytest.MonkeyPatch.context() as patch:
        _without_index_file(patch)
        with Membrane.open(tmp_path / "store", embedder=None, **ON) as memory:
            _fill(memory, matrix)
            assert memory.wait_for_index()
            answers = [_ids(memory, q) for q in queries[:5]]
    release = threading.Event()
    original = approximate.ApproximateIndex.add

    def slow(self: approximate.ApproximateIndex, rows: np.ndarray, vectors: np.ndarray) -> None:
        assert release.wait(60)
        original(self, rows, vectors)

    monkeypatch.setattr(approximate.ApproximateIndex, "add", slow)
    with Membrane.open(tmp_path / "store", embedder=None, **ON) as memory:
        assert [_ids(memory, q) for q in queries[:5]] == answers  # the index is being built
        assert memory.views.embeddings.approximate_building
        release.set()
        assert memory.wait_for_index(timeout=60)
        assert memory.views.embeddings.approximate_index() is not None
        assert [_ids(memory, q) for q in queries[:5]] == answers


def test_closing_during_a_build_stops_it(held_back: threading.Event) -> None:
    matrix, _ = _corpus()
    memory = Membrane.in_memory(embedder=None, **ON)
    _fill(memory, matrix)
    index = memory.views.embeddings
    assert index.approximate_building
    memory.close()  # does not wait for the training
    held_back.set()
    assert index.wait_approximate(timeout=60)
    assert index.approximate.current is None  # nothing published after the close


def test_vectors_found_by_place_are_the_blocks_vectors() -> None:
    matrix, _ = _corpus()
    with Membrane.in_memory(embedder=None, **ON) as memory:
        ids = _fill(memory, matrix)
        memory.forget(ids[5], actor="test", rationale="asked")
        index, scope_of = memory.views.embeddings, memory.views.table.content["scope"]
        rows = np.array([0, 5, 17, 999, 1000, COUNT - 1, COUNT + 3], dtype=np.int64)
        scopes = scope_of[np.minimum(rows, COUNT - 1)]
        by_place, by_block = index.vectors_at(rows, scopes), index.vectors_of(rows, scopes)
        assert np.array_equal(by_place, by_block, equal_nan=True)
        assert not by_place[1].any() and np.isnan(by_place[-1]).all()  # erased; none
        _fill(memory, np.concatenate([matrix, matrix[:10]]), first=COUNT)  # places extended
        scopes = scope_of[rows]
        by_place, by_block = index.vectors_at(rows, scopes), index.vectors_of(rows, scopes)
        assert np.array_equal(by_place, by_block, equal_nan=True)
        assert np.allclose(by_place[-1], matrix[3], atol=1e-3)  # kept at half precision


def test_rows_of_types_kept_between_reads_are_those_of_every_row() -> None:
    from membrane_es.queries.candidates import type_codes
    from membrane_es.schema.enums import MemoryType

    codes = type_codes([MemoryType.COMPETENCE, MemoryType.SEMANTIC])
    with Membrane.in_memory(embedder=None) as memory:
        table = memory.views.table
        for i in range(30):
            record = _record(i) if i % 3 else {**_record(i), "type": "episodic"}
            if i % 3 == 0:
                record["payload"] = {"kind": "episodic", "timeline": []}
            memory.create_record(record)
            every = np.flatnonzero(np.isin(table.content["type"][: table.size], codes))
            assert table.rows_of_types(codes, table.size).tolist() == every.tolist()
        assert table.rows_of_types(codes, 10).tolist() == [r for r in every if r < 10]

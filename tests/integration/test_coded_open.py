"""A store opened from a checkpoint that kept its blocks' sign codes answers a shortlisting
search from the codes and its picks' vectors, reading no block back, and answers as it does
once every block is read; the codes outlive further checkpoints, and what is written or
forgotten after the open is searched as well."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from membrane_es import Membrane, Sensitivity, TrustContext
from membrane_es.projections import embeddings
from membrane_es.projections.array_files import load_checkpoint_arrays
from membrane_es.projections.read_model import ReadModel
from membrane_es.queries import vectors
from tests.unit.builders import FULL_TRUST, semantic
from tests.views_support import assert_same_views

DIMENSIONS = 48
SCOPES = ("project:alpha", "project:beta", "project:gamma")
CLUSTERS = 12


@pytest.fixture(autouse=True)
def coded_from_ten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "CODED_MIN_ROWS", 10)
    monkeypatch.setattr(vectors, "APPROXIMATE_MIN_ROWS", 10)


def _centres() -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.standard_normal((CLUSTERS, DIMENSIONS)).astype(np.float32)


def _near(centre: int, rng: np.random.Generator) -> list[float]:
    vector = _centres()[centre] + 0.3 * rng.standard_normal(DIMENSIONS).astype(np.float32)
    return [float(x) for x in vector]


def _write(memory: Membrane, count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    ids = []
    with memory.batch():
        for i in range(count):
            record = memory.create_record(
                semantic(f"s{seed}-{i}", scope=SCOPES[i % len(SCOPES)]),
                embedding=_near(i % CLUSTERS, rng),
            )
            ids.append(record.id)
    return ids


def _answers(memory: Membrane) -> list[list[str]]:
    rng = np.random.default_rng(9)
    out = []
    for centre in range(CLUSTERS):
        query = _near(centre, rng)
        for trust in (
            FULL_TRUST,
            TrustContext(max_sensitivity=Sensitivity.HYPER, scopes=[SCOPES[0]]),
        ):
            found = memory.retrieve(trust=trust, limit=2, query_embedding=query)
            out.append([record.id for record in found.records])
    return out


def _read_every_block(memory: Membrane) -> None:
    memory.start_reading_vectors().join(timeout=60)
    assert memory.views.embeddings.unread_scopes() == []


def test_searches_after_an_open_read_no_block_and_answer_as_a_full_read(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        _write(memory, 300, seed=1)
    arrays = load_checkpoint_arrays(tmp_path / "views" / "current")
    rows = {
        name.split(".")[1]
        for name in arrays
        if name.startswith("block.") and name.endswith(".rows")
    }
    codes = {name.split(".")[1] for name in arrays if name.endswith(".codes")}
    assert rows and codes == rows
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        unread = memory.views.embeddings.unread_scopes()
        from_codes = _answers(memory)
        assert memory.views.embeddings.unread_scopes() == unread  # nothing read back
        _read_every_block(memory)
        assert _answers(memory) == from_codes
        assert all(from_codes)


def test_writes_and_erasures_after_the_open_are_searched_before_and_after_the_read(
    tmp_path: Path,
) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        first = _write(memory, 200, seed=2)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        _answers(memory)  # the stand-ins are made now: later writes must reach them
        added = _write(memory, 60, seed=3)
        memory.forget(first[5], "dpo", "erasure request")
        memory.forget(added[7], "dpo", "erasure request")
        from_codes = _answers(memory)
        assert memory.views.embeddings.unread_scopes()
        flat = {record_id for answer in from_codes for record_id in answer}
        assert flat & set(added) and not flat & {first[5], added[7]}
        _read_every_block(memory)
        assert _answers(memory) == from_codes
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))


def test_a_checkpoint_of_unread_blocks_keeps_their_codes(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        _write(memory, 200, seed=4)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        _write(memory, 30, seed=5)  # noted for blocks not read: their codes come along
        expected = _answers(memory)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        assert _answers(memory) == expected
        assert memory.views.embeddings.unread_scopes()
        _read_every_block(memory)
        index = memory.views.embeddings
        for block in index.blocks.values():
            assert block.code_chunks is not None
        saved = index.block_codes()
        rebuilt = ReadModel.rebuild(memory.application).embeddings
        rebuilt_codes = rebuilt.block_codes()
        assert saved.keys() == rebuilt_codes.keys()
        for scope, codes in saved.items():
            np.testing.assert_array_equal(codes, rebuilt_codes[scope])

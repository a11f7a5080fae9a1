"""The log keeps vectors at half precision; stores whose log kept them at full precision
still open and read as they were written.

``data/store_written_with_float32_vectors.tar.gz`` is a store written by the version before
half precision (``Membrane.open(path, embedder=None)``, then closed, which checkpoints the
views): five semantic records in scope ``project:fixture`` whose subjects name the vectors
below (each given as the record's own vector, stored L2-normalised at float32), the last one
then forgotten.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import pytest

from membrane_es import Membrane, TrustContext
from membrane_es.embedding.protocol import normalise
from membrane_es.embedding.vectors import halved, pack, unpack, widened
from membrane_es.schema.payloads import SemanticPayload
from tests.unit.builders import read, semantic

FIXTURE = Path(__file__).parent / "data" / "store_written_with_float32_vectors.tar.gz"
WRITTEN = {
    "alpha": [0.1234567, 0.7654321, -0.3333333, 0.5],
    "beta": [-0.9, 0.1, 0.2, 0.3],
    "gamma": [0.3, 0.3, 0.3, -0.8],
    "delta": [0.5, -0.5, 0.5, -0.5],
}
FORGOTTEN = "gone"
EVERYONE = TrustContext()


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / "store"


def _vectors(memory: Membrane) -> dict[str, np.ndarray]:
    """Each record's vector as the read side holds it, by subject."""
    views = memory.views
    out = {}
    for block in views.embeddings.blocks.values():
        for row, vector in zip(block.rows.tolist(), block.matrix, strict=True):
            payload = read(memory, views.table.ids[row]).payload
            assert payload is None or isinstance(payload, SemanticPayload)
            out[FORGOTTEN if payload is None else payload.subject] = vector  # None: forgotten
    return out


def _subjects(memory: Membrane, query: list[float]) -> list[str]:
    found = memory.retrieve(trust=EVERYONE, limit=10, query_embedding=query).records
    return [
        record.payload.subject for record in found if isinstance(record.payload, SemanticPayload)
    ]


def test_a_store_written_at_full_precision_reads_its_vectors_bit_for_bit(old_store: Path) -> None:
    memory = Membrane.open(old_store, embedder=None)
    try:
        vectors = _vectors(memory)
        for subject, written in WRITTEN.items():
            np.testing.assert_array_equal(vectors[subject], normalise(written))
        assert not vectors[FORGOTTEN].any()  # forgotten: its row holds zeros
        for subject, written in WRITTEN.items():
            assert _subjects(memory, written)[0] == subject
        assert FORGOTTEN not in _subjects(memory, [0.7, 0.7, 0.1, 0.1])
    finally:
        memory.close()


def test_records_written_now_beside_old_ones_read_back_at_half_precision(
    old_store: Path,
) -> None:
    memory = Membrane.open(old_store, embedder=None)
    given = [0.6, 0.2, -0.7, 0.1]
    try:
        memory.create_record(semantic("epsilon"), embedding=given)
        live = _vectors(memory)
    finally:
        memory.close()
    reopened = Membrane.open(old_store, embedder=None)
    try:
        again = _vectors(reopened)
        assert set(again) == set(live)
        for subject, vector in live.items():
            np.testing.assert_array_equal(again[subject], vector)  # the same bits
        np.testing.assert_array_equal(again["epsilon"], unpack(pack("m", normalise(given))))
        np.testing.assert_array_equal(again["alpha"], normalise(WRITTEN["alpha"]))
        assert _subjects(reopened, given)[0] == "epsilon"
    finally:
        reopened.close()


def test_half_precision_round_trips_what_pack_made() -> None:
    vector = normalise(np.linspace(-1.0, 1.0, 384, dtype=np.float32))
    made = pack("m", vector).vector
    assert len(halved(made)) == 2 * 384
    assert widened(halved(made)) == made
    assert np.abs(unpack(pack("m", vector)) - vector).max() < 1e-3

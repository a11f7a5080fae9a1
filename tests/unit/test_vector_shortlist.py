"""Sign codes and the shortlist of large ranked vector searches, against plain computations.

Codes: bit ``d`` of a vector's code is set when dimension ``d`` is positive; a block keeps
the same codes whether it started keeping them before or after its rows arrived. The
shortlist: the admitted rows with the smallest (Hamming distance, row), exactly. Similarity
through the shortlist: exact scores (the bits of a full scan) for the shortlisted rows and
the rows asked for, none for the rest. And with the approximate search switched on for tiny
stores, ``as_of`` still gives the answers given at the time.
"""

from __future__ import annotations

import itertools
import random
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es import Membrane, TrustContext
from membrane_es.embedding import HashingEmbedder
from membrane_es.errors import ValidationError
from membrane_es.projections import embeddings
from membrane_es.projections.embeddings import (
    CHUNK_ROWS,
    CODE_CHUNK_ROWS,
    Block,
    EmbeddingIndex,
    sign_codes,
)
from membrane_es.queries import retrieve, vectors
from membrane_es.queries.snapshot import take_snapshot
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.conftest import ManualTime
from tests.unit.test_retrieve_as_of import check_answers_as_of, creations, operations
from tests.views_support import WORDS, random_history

DIMENSIONS = 70  # not a multiple of 64: the last code word is partly padding


def _vectors(count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raw = rng.standard_normal((count, DIMENSIONS), dtype=np.float32)
    normalised: np.ndarray = (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)
    return normalised


def _hamming(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    distances: np.ndarray = ((left > 0) != (right > 0)).sum(axis=1)
    return distances


@pytest.fixture
def coded_from_ten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "CODED_MIN_ROWS", 10)
    monkeypatch.setattr(vectors, "APPROXIMATE_MIN_ROWS", 10)


def test_sign_codes_set_the_bits_of_positive_dimensions() -> None:
    matrix = _vectors(5)
    codes = sign_codes(matrix)
    assert codes.shape == (2, 5) and codes.dtype == np.uint64
    for i, vector in enumerate(matrix):
        value = int(codes[0, i]) | (int(codes[1, i]) << 64)
        assert [bool(value >> d & 1) for d in range(128)] == [
            *(vector > 0).tolist(),
            *[False] * (128 - DIMENSIONS),
        ]


def test_a_block_keeps_the_same_codes_whenever_it_started() -> None:
    count = CODE_CHUNK_ROWS + CHUNK_ROWS + 7  # across code chunks and vector chunks
    matrix = _vectors(count)
    rows = np.arange(count, dtype=np.int64) * 3
    early, late = Block(DIMENSIONS), Block(DIMENSIONS)
    early.keep_codes()
    early.extend(rows[:100], matrix[:100])
    for row, vector in zip(rows[100:200], matrix[100:200], strict=True):
        early.append(int(row), vector)
    early.extend(rows[200:], matrix[200:])
    late.extend(rows, matrix)
    late.keep_codes()
    query = _vectors(1, seed=9)[0]
    code = sign_codes(query)
    for block in (early, late):
        got_rows = np.empty(count, dtype=np.int64)
        distances = np.empty(count, dtype=np.uint16)
        block.distances_into(code, count, got_rows, distances)
        np.testing.assert_array_equal(got_rows, rows)
        np.testing.assert_array_equal(distances, _hamming(matrix, query[None, :]))


def test_the_index_keeps_codes_from_the_threshold_on(coded_from_ten: None) -> None:
    index = EmbeddingIndex()
    matrix = _vectors(30)
    for row in range(9):
        index.add(row, row % 2, "m", matrix[row])
    assert not index.coded and all(b.code_chunks is None for b in index.blocks.values())
    index.add_many([(row, 2, "m", matrix[row].tobytes()) for row in range(9, 30)])
    assert index.coded and all(b.code_chunks is not None for b in index.blocks.values())

    restored = EmbeddingIndex()
    restored.dimensions = DIMENSIONS
    restored.restore({s: Block.of(DIMENSIONS, b.rows, b.matrix) for s, b in index.blocks.items()})
    assert restored.coded and len(restored) == 30
    query = _vectors(1, seed=3)[0]
    left, right = index.scan_codes(query, None, None), restored.scan_codes(query, None, None)
    np.testing.assert_array_equal(left.rows, right.rows)
    np.testing.assert_array_equal(left.distances, right.distances)


def _coded_index(count: int, scopes: int) -> tuple[EmbeddingIndex, np.ndarray, np.ndarray]:
    matrix = _vectors(count)
    scope_of = np.arange(count, dtype=np.int64) % scopes
    index = EmbeddingIndex()
    index.add_many([(row, int(scope_of[row]), "m", matrix[row].tobytes()) for row in range(count)])
    for block in index.blocks.values():
        block.keep_codes()
    index.coded = True
    return index, matrix, scope_of


@given(
    admitted_share=st.floats(0.05, 1.0),
    limit=st.integers(1, 4),
    per_result=st.integers(1, 40),
    seed=st.integers(0, 1000),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_shortlist_is_the_nearest_admitted_rows(
    admitted_share: float, limit: int, per_result: int, seed: int
) -> None:
    index, matrix, _ = _coded_index(600, scopes=3)
    rng = np.random.default_rng(seed)
    candidates = np.flatnonzero(rng.random(600) < admitted_share)
    query = _vectors(1, seed=seed + 1)[0]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vectors, "SHORTLIST_PER_RESULT", per_result)
        scan = index.scan_codes(query, [2, 0], None)
        picks = vectors.shortlist(scan, partial(vectors.held, candidates), limit)
    in_scopes = candidates[candidates % 3 != 1]
    distances = _hamming(matrix[in_scopes], query[None, :])
    keys = sorted((int(d), int(r)) for r, d in zip(in_scopes, distances, strict=True))
    wanted = max(per_result * limit, len(scan.rows) // vectors.SHORTLIST_SHARE)
    assert sorted(int(r) for r in scan.rows[picks]) == sorted(r for _, r in keys[:wanted])
    assert np.all(np.diff(picks) > 0)


def test_shortlisted_scores_are_the_bits_of_a_full_scan(coded_from_ten: None) -> None:
    index, matrix, scope_of = _coded_index(3 * CHUNK_ROWS, scopes=2)
    query = _vectors(1, seed=5)[0]
    candidates = np.arange(0, len(matrix), 2, dtype=np.int64)
    also = np.array([4, 1000, 2046], dtype=np.int64)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vectors, "SHORTLIST_PER_RESULT", 10)
        patch.setattr(vectors, "VOUCH_SIGMAS", -100.0)  # keep the shortlist as it is
        scan = index.scan_codes(query, None, len(matrix))
        found = vectors.nearest(index, query, scan, partial(vectors.held, candidates), 3, scope_of)
        assert found is not None
        got = vectors.scored(index, query, found, candidates, also, scope_of)
    rows, exact = index.similarities(query, None)
    full = vectors.aligned(rows, exact, candidates, len(matrix))
    scored = ~np.isnan(got)
    assert scored.sum() >= 30
    assert set(also.tolist()) <= set(candidates[scored].tolist())
    np.testing.assert_array_equal(
        got[scored].astype(np.float32).view(np.int32),
        full[scored].astype(np.float32).view(np.int32),
    )
    # The shortlisted rows are the candidates with the nearest codes.
    unscored = candidates[~scored]
    nearest = _hamming(matrix[candidates[scored]], query[None, :])
    assert _hamming(matrix[unscored], query[None, :]).min() >= np.sort(nearest)[29]


def test_without_a_limit_or_below_the_threshold_every_row_is_scored() -> None:
    index, matrix, _ = _coded_index(200, scopes=2)
    query = _vectors(1, seed=5)[0]
    candidates = np.arange(200, dtype=np.int64)
    for limit in (0, 5):
        assert not vectors.approximate(index, None, 200, limit)
    got = vectors.exact_similarity(index, query, None, 200, candidates)
    assert not np.isnan(got).any()


def _clustered(count: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectors around 8 centres, and queries near the same centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((8, DIMENSIONS), dtype=np.float32) * 2
    raw = centres[rng.integers(0, 8, count + queries)] + rng.standard_normal(
        (count + queries, DIMENSIONS), dtype=np.float32
    )
    out: np.ndarray = (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)
    return out[:count], out[count:]


@pytest.mark.parametrize("seed", range(4))
def test_a_kept_shortlist_holds_the_exact_top_rows(seed: int) -> None:
    """On clustered vectors the codes vouch for the shortlist (as is, or widened), and it
    holds the exact top rows; on vectors spread evenly they cannot, and the read is exact."""
    count, limit = 4000, 5
    for clustered in (True, False):
        matrix, queries = (
            _clustered(count, 10, seed) if clustered else (_vectors(count, seed), _vectors(10, 99))
        )
        index = EmbeddingIndex()
        index.add_many([(row, 0, "m", matrix[row].tobytes()) for row in range(count)])
        for block in index.blocks.values():
            block.keep_codes()
        admitted = partial(vectors.held, np.arange(count, dtype=np.int64))
        scope_of = np.zeros(count, dtype=np.int64)
        kept = 0
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(vectors, "SHORTLIST_PER_RESULT", 100)  # a cluster's size, as at scale
            for query in queries:
                scan = index.scan_codes(query, None, count)
                found = vectors.nearest(index, query, scan, admitted, limit, scope_of)
                if found is None:
                    continue
                kept += 1
                exact_top = np.argsort(-(matrix @ query), kind="stable")[:limit]
                assert set(exact_top.tolist()) <= set(found.rows.tolist())
        assert kept >= 5 if clustered else kept == 0


@pytest.mark.parametrize("cosine", [-0.5, 0.0, 0.3, 0.9, 1.0])
def test_a_plausible_distance_lies_past_the_expected_one(cosine: float) -> None:
    bits = 384
    expected = bits * np.arccos(cosine) / np.pi
    reach = vectors.plausible_distance(cosine, bits)
    assert expected <= reach <= expected + vectors.VOUCH_SIGMAS * np.sqrt(bits) / 2 + 1
    assert vectors.plausible_distance(min(1.0, cosine + 0.05), bits) <= reach


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start=st.lists(creations, min_size=8, max_size=14),
    history=st.lists(operations, min_size=5, max_size=30),
)
def test_as_of_gives_the_answers_given_then_with_shortlists(
    start: list[tuple[Any, ...]], history: list[tuple[Any, ...]]
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embeddings, "CODED_MIN_ROWS", 6)
        patch.setattr(vectors, "APPROXIMATE_MIN_ROWS", 6)
        patch.setattr(vectors, "SHORTLIST_PER_RESULT", 1)
        patch.setattr(vectors, "VOUCH_SIGMAS", -100.0)  # keep every shortlist
        check_answers_as_of(start, history)


@pytest.mark.parametrize("seed", range(3))
def test_ranking_from_the_rows_with_evidence_equals_ranking_every_candidate(seed: int) -> None:
    """Whenever the evidence-first ranking answers, it is the ranking of every candidate,
    also when the descriptor names a period."""
    rng = random.Random(seed)
    time = ManualTime()
    embedder = HashingEmbedder(32)
    answered = 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embeddings, "CODED_MIN_ROWS", 8)
        patch.setattr(vectors, "APPROXIMATE_MIN_ROWS", 8)
        patch.setattr(vectors, "SHORTLIST_PER_RESULT", 2)
        patch.setattr(vectors, "VOUCH_SIGMAS", -100.0)  # keep every shortlist
        patch.setattr(retrieve, "LEXICAL_SCORED", 3)
        memory = Membrane.in_memory(clock=MonotonicClock(source=time), embedder=embedder)
        with memory:
            moments = []
            for _ in range(3):
                random_history(memory, rng, 40)
                moments.append(time.current)
                time.advance(hours=rng.randint(1, 300))
            sources = retrieve.Sources(memory.views, memory.application, time.current, embedder)
            for as_of in [None, *moments]:
                snapshot = take_snapshot(memory.views, time.current, as_of)
                for trust, types, limit in itertools.product(
                    _TRUSTS, (None, ["semantic"]), (1, 3, 8)
                ):
                    plan = retrieve.make_plan(
                        sources,
                        descriptor=" ".join(rng.sample(WORDS, 2)) + rng.choice(_PERIODS),
                        trust=trust,
                        memory_types=types,
                        min_salience=rng.choice([0.0, 0.2]),
                        limit=limit,
                        as_of=as_of,
                        valid_at=None,
                        include_retracted=rng.random() < 0.2,
                        query_embedding=None,
                    )
                    found = retrieve._shortlist(snapshot, plan)
                    if found is None:  # too few vectors in these scopes at that moment
                        continue
                    quick = retrieve._rank_by_evidence(snapshot, plan, 0.7, found)
                    if quick is None:
                        continue
                    answered += 1
                    full = retrieve._rank_every_candidate(snapshot, plan, 0.7, found)
                    _assert_same_ranking(quick, full)
    assert answered >= 10


# Named periods give time evidence to rows with no vector or word evidence at all.
_PERIODS = ["", "", " yesterday", " this week", " last month", " this year"]

_TRUSTS = [
    TrustContext(),
    TrustContext(max_sensitivity="medium"),
    TrustContext(scopes=["project:alpha"]),
    TrustContext(max_sensitivity="high", scopes=["project:alpha", "project:beta"]),
]


def _assert_same_ranking(left: retrieve.Ranking, right: retrieve.Ranking) -> None:
    for name in ("rows", "salience", "redacted"):
        np.testing.assert_array_equal(getattr(left.ranked, name), getattr(right.ranked, name))
    np.testing.assert_array_equal(left.scores, right.scores)
    assert left.selection == right.selection
    if left.selectable is None or right.selectable is None:
        assert left.selectable is right.selectable
    else:
        np.testing.assert_array_equal(left.selectable.rows, right.selectable.rows)


def test_a_read_that_asks_for_exact_scores_every_vector(time: ManualTime) -> None:
    embedder = HashingEmbedder(32)
    memory = Membrane.in_memory(clock=MonotonicClock(source=time), embedder=embedder)
    with memory:
        random_history(memory, random.Random(2), 150)
        descriptor = " ".join(WORDS[:3])
        everyone = TrustContext(max_sensitivity="high")
        exact = memory.retrieve(descriptor, trust=everyone, limit=5)  # too few rows to shortlist
        index = memory.views.embeddings
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(vectors, "APPROXIMATE_MIN_ROWS", 8)
            patch.setattr(vectors, "SHORTLIST_PER_RESULT", 1)
            patch.setattr(vectors, "SHORTLIST_SHARE", 10**6)
            patch.setattr(vectors, "VOUCH_SIGMAS", -100.0)  # keep every shortlist
            for block in index.blocks.values():
                block.keep_codes()
            patch.setattr(index, "coded", True)
            asked = memory.retrieve(descriptor, trust=everyone, limit=5, exact=True)
            graph = memory.retrieve_graph(descriptor, trust=everyone, root_limit=5, exact=True)
        assert [r.id for r in asked.records] == [r.id for r in exact.records]
        unshortlisted = memory.retrieve_graph(descriptor, trust=everyone, root_limit=5)
        assert [(n.record.id, n.root, n.hop) for n in graph.nodes] == [
            (n.record.id, n.root, n.hop) for n in unshortlisted.nodes
        ]
        with pytest.raises(ValidationError, match="exact"):
            memory.retrieve(descriptor, limit=5, exact="yes")  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="exact"):
            memory.retrieve_graph(descriptor, exact=1)  # type: ignore[arg-type]


def test_the_vectors_of_rows_in_any_order_and_scope() -> None:
    index = EmbeddingIndex()
    stored = {1: (0, [1.0, 0.0]), 4: (2, [0.0, 1.0]), 7: (0, [0.6, 0.8])}
    for row, (scope, vector) in stored.items():
        index.add(row, scope, "m", np.array(vector, dtype=np.float32))

    rows = np.array([7, 3, 4, 1])
    got = index.vectors_of(rows, np.array([0, 0, 2, 0]))

    assert np.allclose(got[[0, 2, 3]], [[0.6, 0.8], [0.0, 1.0], [1.0, 0.0]])
    assert np.isnan(got[1]).all()  # row 3 has no vector

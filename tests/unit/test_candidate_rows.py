"""Candidates come from the rows a caller's scopes let it see (the scope partitions) and
from whole-column slices for callers without scopes: both equal admitting every row one by
one, and the lexical and vector evidence read for just those rows equals the dense reading."""

from __future__ import annotations

import random

import numpy as np
import pytest

from membrane_es import Membrane, TrustContext
from membrane_es.embedding import HashingEmbedder
from membrane_es.queries.candidates import Filters, admit, find
from membrane_es.queries.lexical import coverage
from membrane_es.queries.snapshot import take_snapshot
from membrane_es.queries.vectors import aligned
from membrane_es.schema.enums import MemoryType
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.conftest import ManualTime
from tests.views_support import SCOPES, WORDS, random_history


@pytest.fixture
def embedded(clock: MonotonicClock) -> Membrane:
    return Membrane.in_memory(clock=clock, embedder=HashingEmbedder(32))


def _trusts(rng: random.Random) -> list[TrustContext]:
    named = [s for s in SCOPES if s]
    return [
        TrustContext(),
        TrustContext(max_sensitivity="medium"),
        TrustContext(scopes=[rng.choice(named)]),
        TrustContext(max_sensitivity="high", scopes=rng.sample(named, 2)),
        TrustContext(scopes=["nowhere"]),
    ]


@pytest.mark.parametrize("seed", range(4))
def test_found_rows_equal_admitting_every_row(
    embedded: Membrane, time: ManualTime, seed: int
) -> None:
    rng = random.Random(seed)
    moments = []
    for _ in range(4):
        random_history(embedded, rng, 15)
        moments.append(time.current)
        time.advance(hours=rng.randint(1, 2000))
    filter_sets = [
        Filters(),
        Filters(types=frozenset({MemoryType.SEMANTIC}), min_salience=0.3),
        Filters(include_retracted=True),
    ]
    for as_of in [None, *moments]:
        snapshot = take_snapshot(embedded.views, time.current, as_of)
        every = np.arange(snapshot.size, dtype=np.int64)
        for trust in _trusts(rng):
            for filters in filter_sets:
                found = find(snapshot, trust, filters)
                reference = admit(snapshot, every, trust, filters)
                np.testing.assert_array_equal(found.rows, reference.rows)
                np.testing.assert_array_equal(found.salience, reference.salience)
                np.testing.assert_array_equal(found.redacted, reference.redacted)


def test_lexical_scores_of_some_rows_equal_the_dense_ones(
    embedded: Membrane, time: ManualTime
) -> None:
    random_history(embedded, random.Random(9), 60)
    text, size = embedded.views.text, embedded.views.table.size
    query = " ".join(WORDS[:3])
    dense = coverage(text, query, size)
    assert dense is not None
    for rows in (np.arange(size), np.arange(0, size, 3), np.zeros(0, dtype=np.int64)):
        some = coverage(text, query, size, rows)
        assert some is not None
        np.testing.assert_array_equal(some, dense[rows])


@pytest.mark.parametrize("size", [10, 1000])
def test_aligned_values_by_either_path(size: int) -> None:
    rng = np.random.default_rng(size)
    rows = rng.permutation(size)[: size // 2]
    values = rng.random(len(rows))
    wanted = np.sort(rng.permutation(size)[: size // 3])
    dense = np.full(size, np.nan)
    dense[rows] = values
    np.testing.assert_array_equal(aligned(rows, values, wanted, size), dense[wanted])
    few = wanted[:3]
    np.testing.assert_array_equal(
        aligned(rows[:2], values[:2], few, 10**6), _dense(rows[:2], values[:2], few)
    )


def _dense(rows: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    by_row = dict(zip(rows.tolist(), values.tolist(), strict=True))
    return np.array([by_row.get(int(r), np.nan) for r in wanted])

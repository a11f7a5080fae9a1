"""The recall evaluation runs end to end, and the engine's ranking beats plain vector ranking
with the same (test) embedder: a guard against ranking regressions, not a tuned target."""

from __future__ import annotations

import pytest

from bench.recall import DEFAULT_DATASET, evaluate, load_dataset, score
from membrane_es.embedding import HashingEmbedder


def test_metric_definitions() -> None:
    perfect = score(["a", "b", "x"], ["a", "b"], k=5)
    assert (perfect.recall, perfect.precision, perfect.mrr, perfect.ndcg) == (1.0, 0.4, 1.0, 1.0)
    late = score(["x", "a"], ["a"], k=5)
    assert late.mrr == 0.5
    assert score([], ["a"], k=5).precision == 0.0


@pytest.mark.skipif(
    not DEFAULT_DATASET.exists(), reason="the shared dataset is not beside the repo"
)
def test_engine_ranking_beats_plain_vector_ranking() -> None:
    results = evaluate(load_dataset(DEFAULT_DATASET), HashingEmbedder(384))
    ours, rag = results["membrane_es"], results["rag"]
    assert ours.recall > rag.recall
    assert ours.ndcg > rag.ndcg
    assert ours.precision >= rag.precision

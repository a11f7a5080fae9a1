"""LongMemEval's retrieval procedure runs end to end on a tiny file in its format: sessions in
date order, abstention questions left out, every method scored at session and turn level, and
the metrics mean what LongMemEval says. (Figures on the real split: docs/benchmarks.md.)"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bench import longmemeval
from membrane_es.embedding import HashingEmbedder


def item(question_id: str, kind: str, question: str) -> dict[str, object]:
    return {
        "question_id": question_id,
        "question_type": kind,
        "question": question,
        "question_date": "2023/06/23 (Fri) 07:31",
        "answer": "",
        "answer_session_ids": ["s2"],
        "haystack_dates": ["2023/06/01 (Thu) 10:00", "2023/05/20 (Sat) 02:21"],
        "haystack_session_ids": ["s1", "s2"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "Recommend a film for tonight"},
                {"role": "assistant", "content": "Try a classic comedy"},
            ],
            [
                {"role": "user", "content": "I keep my sneakers on a rack", "has_answer": True},
                {"role": "assistant", "content": "A rack keeps them tidy"},
            ],
        ],
    }


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "longmemeval.json.gz"
    items = [
        item("q1", "single-session-user", "Where do I keep my sneakers?"),
        item("q2", "knowledge-update", "Where are my sneakers now?"),
        item("q3_abs", "knowledge-update", "Where is my bicycle?"),
    ]
    with gzip.open(path, "wt") as out:
        json.dump(items, out)
    return path


def test_loading_orders_sessions_by_date_and_leaves_out_abstention(dataset: Path) -> None:
    questions = longmemeval.load(dataset)

    assert [q.id for q in questions] == ["q1", "q2"]
    assert [s.id for s in questions[0].sessions] == ["s2", "s1"]
    assert questions[0].evidence_turns == frozenset({"s2:0"})
    assert [q.id for q in longmemeval.stratified(questions, 1)] == ["q1", "q2"]  # one a type


def test_questions_named_are_taken_in_file_order_and_an_unknown_one_is_refused(
    dataset: Path,
) -> None:
    questions = longmemeval.load(dataset)

    assert [q.id for q in longmemeval.chosen(questions, " q2, q1 ", 0)] == ["q1", "q2"]
    assert [q.id for q in longmemeval.chosen(questions, "", 1)] == ["q1", "q2"]  # stratified
    with pytest.raises(SystemExit, match="no question q9"):
        longmemeval.chosen(questions, "q1,q9", 0)


def test_every_method_is_scored_at_both_levels(dataset: Path) -> None:
    results = longmemeval.evaluate(longmemeval.load(dataset), HashingEmbedder(64))

    assert {m for m in longmemeval.METHODS if results.values[m]["all"]} == set(longmemeval.METHODS)
    assert results.count("all") == 2 and results.turns == 8
    assert results.mean("membrane_es", "all", "session recall_any@5") == 1.0  # two sessions
    assert "| turn recall_all@10 |" in longmemeval.report(results, "hashing")


def test_the_metrics_are_longmemevals() -> None:
    figures = longmemeval.figures(["x", "a", "y", "b"], frozenset({"a", "b"}))

    assert figures["recall_any@5"] == 1.0 and figures["recall_all@5"] == 1.0
    # DCG: first place undiscounted, place i (from 0) divided by log2(i + 1)
    assert figures["ndcg_any@5"] == pytest.approx((1 / 1 + 1 / 2) / (1 + 1 / 1))
    assert longmemeval.sessions_of(["s1:3", "s2:0", "s1:0"]) == ["s1", "s2"]

"""The LoCoMo procedure runs end to end on a small conversation in its format: turns are
captured with their session time, category 5 is left out, every method is scored, and the
metrics mean what they say. (The figures on the real split are in docs/benchmarks.md.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import longmem
from membrane_es.embedding import HashingEmbedder

CONVERSATION = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ada",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ada", "dia_id": "D1:1", "text": "I adopted a puppy named Rex last week"},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely! I went hiking in the Alps"},
        ],
        "session_2_date_time": "10:00 am on 20 June, 2023",
        "session_2": [
            {
                "speaker": "Ada",
                "dia_id": "D2:1",
                "text": "Rex chewed my shoes",
                "blip_caption": "a dog on a sofa",
            },
            {"speaker": "Bo", "dia_id": "D2:2", "text": "I started painting sunsets"},
        ],
    },
    "qa": [
        {"question": "What is the name of Ada's puppy?", "evidence": ["D1:1"], "category": 1},
        {"question": "Where did Bo go hiking?", "evidence": ["D1:2"], "category": 4},
        {"question": "What does Bo paint?", "evidence": ["D2:2", "D9:9"], "category": 4},
        {"question": "What did Bo adopt?", "evidence": ["D1:1"], "category": 5},
    ],
}


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([CONVERSATION]))
    return path


def test_loading_keeps_times_captions_and_scorable_questions(dataset: Path) -> None:
    (conversation,) = longmem.load(dataset)

    turns = conversation.turns
    assert [t.dia_id for t in turns] == ["D1:1", "D1:2", "D2:1", "D2:2"]
    assert turns[0].at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert "[shares an image: a dog on a sofa]" in turns[2].text
    # category 5 left out; unknown evidence ids dropped
    assert [q.category for q in conversation.questions] == [1, 4, 4]
    assert conversation.questions[2].evidence == frozenset({"D2:2"})


@pytest.mark.parametrize("embedder", [None, HashingEmbedder(64)], ids=["none", "hashing"])
def test_every_method_is_scored_in_one_run(dataset: Path, embedder: HashingEmbedder | None) -> None:
    results = longmem.evaluate(longmem.load(dataset), embedder)

    fused = {"cosine", "rrf", "minmax", "rrf-content", "minmax-content"}
    expected = {"membrane_es", "bm25", "bm25-content"} | (fused if embedder else set())
    scored = {m for m in longmem.METHODS if results.tallies[m]["all"].questions}
    assert scored == expected
    ours = results.tallies["membrane_es"]
    assert ours["all"].questions == 3
    assert {g for g in ours if "|" not in g} == {"all", "cat 1", "cat 4"}
    assert longmem.left_out(results) == {}  # one conversation: none to leave out and keep
    assert ours["all"].mean()["hit@25"] == 1.0  # four turns: every one is returned
    assert results.turns == 4
    assert "| R@5 |" in longmem.report(results, "hashing" if embedder else "none")


def test_shared_times_stamp_a_session_once(dataset: Path) -> None:
    (conversation,) = longmem.load(dataset, shared_times=True)

    assert {turn.at for turn in conversation.sessions[0]} == {
        datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    }


def test_recall_and_hits_count_evidence_turns() -> None:
    tally = longmem.Tally()
    tally.add(["a", "x", "y", "z", "w", "b"], frozenset({"a", "b"}))

    assert tally.mean()["R@5"] == 0.5
    assert tally.mean()["R@10"] == 1.0
    assert tally.mean()["hit@5"] == 1.0

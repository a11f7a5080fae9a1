"""The command line's explanation table shows every kind of evidence a ranking counted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rich.console import Console

from membrane_es.cli import render
from membrane_es.schema.results import Explanation


def _explanation(**evidence: object) -> Explanation:
    fields: dict[str, object] = {
        "record_id": "r1",
        "rank": 1,
        "score": 0.5,
        "vector_similarity": 0.4,
        "vector_score": 0.9,
        "lexical_score": None,
        "relevance": 0.7,
        "salience": 1.0,
        "boost": 0.0,
        "trust": "full",
        "moment": datetime(2026, 1, 1, tzinfo=UTC),
        **evidence,
    }
    return Explanation(**fields)  # type: ignore[arg-type]


def _table(explanation: Explanation) -> str:
    with render.console.capture() as captured:
        render.explanations_table([explanation])
    return captured.get()


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console wide enough that no cell wraps, whatever the terminal running the tests."""
    monkeypatch.setattr(render, "console", Console(width=240))


def test_the_passage_a_long_text_was_scored_by_and_the_speaker_evidence_are_shown() -> None:
    shown = _table(_explanation(passage=3, speaker_score=1.0))
    assert "passage 3" in shown and "speaker" in shown and "1.000" in shown


def test_a_text_read_whole_names_no_passage() -> None:
    assert "passage" not in _table(_explanation())

"""A question that asks when is answered by a memory that says when, about what was asked."""

from __future__ import annotations

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.projections.text_index import TextIndex
from membrane_es.queries import ranking
from membrane_es.queries.when_asked import asks_when, says_when
from tests.unit.builders import FULL_TRUST


@pytest.mark.parametrize(
    "question",
    [
        "When did Ann go to the museum?",
        "when was the last concert",
        "Around what date did Ann start the course?",
        "Which year did Ann move to Lisbon?",
        "How long ago was Ann's 18th birthday?",
        "How many weeks ago did I meet my aunt?",
    ],
)
def test_questions_about_when(question: str) -> None:
    assert asks_when(question)


@pytest.mark.parametrize(
    "question",
    [
        "Where did Ann go last week?",  # names a period; asks where
        "How long does Ann hold the pose?",  # a duration, not a moment
        "What did Ann say when the museum closed?",  # "when" joins two clauses
        "Did Ann go to the museum?",
    ],
)
def test_questions_not_about_when(question: str) -> None:
    assert not asks_when(question)


def test_saying_when_is_worth_what_the_match_is_worth() -> None:
    similarity = np.array([1.0, 1.0, 0.0])
    lexical = np.array([1.0, 1.0, 0.0])
    dated = np.array([1.0, 0.0, 1.0])

    scores = ranking.relevance(similarity, lexical, dated=dated)

    assert scores is not None
    # Dated and matching: every share; matching only: two of three; dated only: nothing.
    assert scores.tolist() == pytest.approx([1.0, 2 / 3, 0.0])
    assert ranking.DATED_SHARE == ranking.VECTOR_SHARE  # an equal share, as every kind has


def conversation() -> tuple[Membrane, dict[str, str]]:
    memory = Membrane.in_memory(embedder=None)
    ids = {}
    for name, text in (
        ("about", "The museum downtown is my favourite museum, such a lovely museum"),
        ("went", "I went to the museum last Friday with my sister"),
        ("other", "Last week I baked bread for the neighbours"),
    ):
        # Each from a chat of its own: no turn borrows the words of another.
        captured = memory.capture_memory(
            {"speaker": "Ann", "text": text}, source_kind="dialogue_turn", source=f"chat {name}"
        )
        ids[name] = captured.primary_record.id
    return memory, ids


def test_a_question_about_when_ranks_the_turn_that_says_when_first() -> None:
    memory, ids = conversation()

    when = memory.retrieve(task_descriptor="When did you visit the museum?", trust=FULL_TRUST)
    what = memory.retrieve(task_descriptor="Did you visit the museum?", trust=FULL_TRUST)

    assert [record.id for record in when.records][:2] == [ids["went"], ids["about"]]
    assert [record.id for record in what.records][:2] == [ids["about"], ids["went"]]
    # Saying when about something else is no answer.
    assert ids["other"] not in [record.id for record in when.records]
    memory.close()


def test_a_turn_says_when_by_its_own_words_not_by_those_it_borrows() -> None:
    """A reply counts the words of the turn it was said after, at a fraction each: a lender
    that names a time often enough lends more than one occurrence's worth, yet the reply still
    says no time itself."""
    index = TextIndex()
    index.add(0, "last week last week the museum last week was great last week")
    index.add(1, "that museum sounds lovely and the pictures were fun")
    index.link([(1, [0])])
    borrowed = [counts for rows, counts in index.postings("week", 2)][0]
    assert borrowed[1] >= 1.0  # the reply's borrowed count alone reaches one occurrence

    assert says_when(index, np.array([0, 1]), 2).tolist() == [1.0, 0.0]

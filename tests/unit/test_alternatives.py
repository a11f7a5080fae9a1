"""A task relating two things (which came first, how long between them) searches each of them
on its own too, and returns the rankings taken in turn."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from membrane_es import Membrane
from membrane_es.queries.alternatives import named_things
from membrane_es.schema import MemoryRecord
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import FULL_TRUST
from tests.unit.conftest import START, ManualTime

QUESTION = (
    "Which trip did I take first, the solo trip to Europe or the family road trip across "
    "the American Southwest?"
)

# The other trip, said in passing at the end of a long message about something else.
EUROPE = (
    "I'll spend at least half a day at the science museum, there is so much to see and learn "
    "and I want to take my time with every exhibit; speaking of travels, I went to Europe alone"
)


@pytest.mark.parametrize(
    ("task", "things"),
    [
        (QUESTION, ("solo trip to Europe", "family road trip across the American Southwest")),
        ("Which did I buy first, a necklace or my photo album?", ("necklace", "photo album")),
        (
            "How many months passed between the completion of my degree and my thesis?",
            ("completion of my degree", "thesis"),
        ),
        ("How many kitchen items did I replace or fix?", ()),  # no comma: one thing
        ("Can you recommend publications or conferences I might like?", ()),
        ("What did Ann do between May and June 2023?", ()),  # one period, not two things
        ("Which was it, this or that?", ()),  # no word searched by in either (stop words)
        ("Where did I go on holiday?", ()),
        ("Which came first, the trip or the move? Tell me why.", ()),  # not at the end
        ("Which came first,   THE trip\n or  the   move ?! ", ("trip", "move")),
    ],
)
def test_the_two_things_a_task_relates(task: str, things: tuple[str, ...]) -> None:
    assert named_things(task) == things


@pytest.fixture
def trips(clock: MonotonicClock) -> Iterator[Membrane]:
    # Words only: a toy embedder's vectors would say nothing about trips; the benchmark
    # (bench.longmemeval) measures the same with MiniLM.
    memory = Membrane.in_memory(clock=clock, embedder=None)
    yield memory
    memory.close()


def turn(memory: Membrane, text: str, minutes: int) -> MemoryRecord:
    return memory.capture_memory(
        {"speaker": "user", "text": text},
        source_kind="dialogue_turn",
        source=f"chat-{minutes}",  # a sitting each: no turn borrows another's words
        timestamp=START + timedelta(minutes=minutes),
    ).primary_record


def test_each_thing_a_task_relates_is_found_though_the_other_matches_more(
    trips: Membrane, time: ManualTime
) -> None:
    southwest = [
        turn(trips, f"The family road trip across the American Southwest, our trip day {day}", day)
        for day in range(1, 5)
    ]
    europe = turn(trips, EUROPE, 10)
    time.advance(days=1)

    found = trips.retrieve(task_descriptor=QUESTION, trust=FULL_TRUST, limit=2, explain=True)
    as_one = trips.retrieve(
        task_descriptor=QUESTION.replace(",", ""), trust=FULL_TRUST, limit=2
    )  # without the comma "or" joins words of one thing

    # Searched as one task, the trip of more words holds the top places ...
    assert {record.id for record in as_one.records} <= {record.id for record in southwest}
    # ... taken in turn with each thing's own search, the task's best comes first and the
    # other trip second; each record once, with its explanation.
    ids = [record.id for record in found.records]
    assert ids[0] == as_one.records[0].id and ids[1] == europe.id
    assert [e.record_id for e in found.explanations] == ids
    assert all(e.score > 0 and e.lexical_score for e in found.explanations)


def test_a_long_task_is_read_in_one_pass() -> None:
    hostile = "x, " + " or ".join(["word"] * 20_000) + " between " + " and ".join(["w"] * 20_000)
    assert named_things(hostile) == ()
    assert named_things(" " * 100_000 + "x") == ()

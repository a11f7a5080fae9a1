"""Event time and transaction time (bitemporal reads).

A captured memory is dated by when it happened (``timestamp``; a created record by its given
``created_at``): that is its event time, which reads filter on (``created_after`` /
``created_before``), which a descriptor naming a period ("in January 2024", "yesterday")
gives evidence by, and from which it fades. The log keeps when the store learned of it:
``as_of`` reads by that transaction time (and a relative period counts back from it).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from membrane_es import Membrane, ValidationError
from tests.unit.builders import FULL_TRUST, semantic
from tests.unit.conftest import START, ManualTime

LAST_YEAR = START - timedelta(days=365)
LAST_WEEK = START - timedelta(days=7)


def backfill(memory: Membrane) -> tuple[str, str]:
    old = memory.capture_memory({"text": "we moved the office to Porto"}, timestamp=LAST_YEAR)
    new = memory.capture_memory({"text": "we moved the servers to Lisbon"}, timestamp=LAST_WEEK)
    return old.primary_record.id, new.primary_record.id


def test_a_captured_memory_is_dated_by_when_it_happened(memory: Membrane) -> None:
    old, _ = backfill(memory)

    record = memory.retrieve_by_id(old, trust=FULL_TRUST)

    assert record.created_at == LAST_YEAR
    assert record.updated_at is not None and record.updated_at >= START  # written now


def test_reads_filter_on_event_time(memory: Membrane) -> None:
    old, new = backfill(memory)
    middle = START - timedelta(days=30)

    recent = memory.retrieve("moved", created_after=middle).records
    earlier = memory.retrieve("moved", created_before=middle).records
    graph = memory.retrieve_graph("moved", created_after=middle, trust=FULL_TRUST)

    assert [r.id for r in recent] == [new]
    assert [r.id for r in earlier] == [old]
    assert graph.root_ids == [new]


def test_it_fades_from_when_it_happened(memory: Membrane) -> None:
    old, new = backfill(memory)

    result = memory.retrieve("we moved", explain=True)

    saliences = {r.id: r.salience for r in result.records}
    assert saliences[old] < saliences[new] < 1.0
    assert [r.id for r in result.records] == [new, old]  # equal evidence: the recent first


def test_as_of_is_transaction_time(memory: Membrane, time: ManualTime) -> None:
    before_capture = time.advance(minutes=1)
    time.advance(minutes=1)
    old, _ = backfill(memory)

    # It happened a year ago, but the store learned of it only now: a read as of a minute
    # ago, by the log, does not know it.
    assert memory.retrieve("moved", as_of=before_capture).records == []
    assert old in [r.id for r in memory.retrieve("moved").records]


def test_a_created_record_keeps_its_given_event_time(memory: Membrane) -> None:
    record = memory.create_record(semantic(created_at=LAST_YEAR.isoformat())).id

    assert [r.id for r in memory.retrieve(created_before=LAST_WEEK).records] == [record]


def test_a_window_bound_must_be_an_aware_datetime(memory: Membrane) -> None:
    with pytest.raises(ValidationError) as raised:
        memory.retrieve("x", created_after=LAST_WEEK.replace(tzinfo=None))

    assert raised.value.field == "created_after"


def test_a_question_that_names_a_period_prefers_what_happened_then(memory: Membrane) -> None:
    old, new = backfill(memory)  # the same evidence otherwise; the newer is less faded

    then = memory.retrieve("where did we move things in January 2024?", explain=True)
    lately = memory.retrieve("where did we move things in December 2024?", explain=True)
    unnamed = memory.retrieve("where did we move things?", explain=True)

    assert [r.id for r in then.records] == [old, new]
    assert [e.time_score for e in then.explanations] == [1.0, 0.0]
    assert [r.id for r in lately.records] == [new, old]
    assert [r.id for r in unnamed.records] == [new, old]
    assert [e.time_score for e in unnamed.explanations] == [None, None]


def test_a_period_nothing_happened_in_gives_no_evidence(memory: Membrane) -> None:
    backfill(memory)

    named = memory.retrieve("where did we move things in 1999?", explain=True)
    unnamed = memory.retrieve("where did we move things?", explain=True)

    assert [r.id for r in named.records] == [r.id for r in unnamed.records]
    # (up to rounding: "1999" is a word of the descriptor too, matched by nothing)
    assert [e.score for e in named.explanations] == pytest.approx(
        [e.score for e in unnamed.explanations]
    )
    assert {e.time_score for e in named.explanations} == {0.0}


def test_a_relative_period_counts_back_from_the_moment_answered_for(
    memory: Membrane, time: ManualTime
) -> None:
    early = memory.capture_memory(
        {"text": "we moved the office"}, timestamp=START - timedelta(days=40)
    ).primary_record.id
    late = memory.capture_memory(
        {"text": "we moved the desks"}, timestamp=START - timedelta(days=1)
    ).primary_record.id
    written = time.advance(seconds=1)
    time.advance(days=60)
    question = "what did we move yesterday?"

    back_then = memory.retrieve(question, as_of=written, explain=True)
    today = memory.retrieve(question, explain=True)

    assert [r.id for r in back_then.records] == [late, early]
    assert [e.time_score for e in back_then.explanations] == [1.0, 0.0]
    assert {e.time_score for e in today.explanations} == {0.0}  # yesterday is empty now

"""``explain=True``: per record, the evidence a ranking used — vector and lexical scores,
relevance, salience at the moment answered for, a graph root's boost, the score and the trust
decision — now and as of a past moment."""

from __future__ import annotations

import numpy as np
import pytest

from membrane_es import (
    ExplainedRetrieveGraphResult,
    ExplainedRetrieveResult,
    Membrane,
    RetrieveResult,
    TrustContext,
    ValidationError,
)
from membrane_es.queries.feedback import widened
from membrane_es.queries.ranking import EVIDENCE_WEIGHT, SALIENCE_WEIGHT
from tests.unit.builders import FULL_TRUST, semantic
from tests.unit.conftest import ManualTime
from tests.unit.retrieval_support import HALF_PRECISION, QUERY, at_cosine, ids


def test_without_explain_the_result_is_the_plain_one(memory: Membrane) -> None:
    memory.create_record(semantic("orchid", "runs", "on kubernetes"))

    assert type(memory.retrieve("orchid")) is RetrieveResult


def test_each_record_is_explained_in_its_order(memory: Membrane) -> None:
    words = memory.create_record(
        semantic("orchid", "deploys", "on fridays"), embedding=at_cosine(0.3)
    ).id
    meaning = memory.create_record(semantic("x", "y", "z"), embedding=at_cosine(0.9)).id

    result = memory.retrieve("when does orchid deploy", query_embedding=QUERY, explain=True)

    assert isinstance(result, ExplainedRetrieveResult)
    explained = result.explanations
    assert [e.record_id for e in explained] == ids(result.records)
    assert set(ids(result.records)) == {meaning, words}
    assert [e.rank for e in explained] == [1, 2]
    by_id = {e.record_id: e for e in explained}
    assert by_id[meaning].vector_similarity == pytest.approx(0.9, abs=HALF_PRECISION)
    assert by_id[meaning].vector_score == pytest.approx(1.0)
    # The vector evidence is the ranking's: to the task moved toward what it found first
    # (both records), relative to the best; the similarity reported is to the task as asked.
    moved = widened(np.array(QUERY), np.array([at_cosine(0.9), at_cosine(0.3)]))
    assert moved is not None
    near, far = (float(np.dot(moved, at_cosine(c))) for c in (0.9, 0.3))
    assert by_id[words].vector_similarity == pytest.approx(0.3, abs=HALF_PRECISION)
    assert by_id[words].vector_score == pytest.approx(far / near, abs=HALF_PRECISION)
    assert by_id[meaning].lexical_score == 0.0
    lexical = by_id[words].lexical_score
    assert lexical is not None and lexical > 0
    for item in explained:
        assert item.relevance is not None
        assert item.score == pytest.approx(
            item.relevance * (EVIDENCE_WEIGHT + SALIENCE_WEIGHT * item.salience)
        )
        assert (item.trust, item.boost) == ("full", 0.0)
    assert explained[0].score >= explained[1].score


def test_salience_is_the_one_at_the_moment_answered_for(memory: Membrane, time: ManualTime) -> None:
    record = memory.create_record(
        semantic(
            "orchid", "runs", "on kubernetes", lifecycle={"decay": {"half_life_seconds": 3600}}
        )
    ).id
    then = time.advance(hours=1)
    time.advance(hours=2)

    now = memory.retrieve("orchid", explain=True)
    past = memory.retrieve("orchid", explain=True, as_of=then)

    assert isinstance(now, ExplainedRetrieveResult) and isinstance(past, ExplainedRetrieveResult)
    assert past.explanations[0].moment == then
    assert past.explanations[0].salience == pytest.approx(0.5)
    assert now.explanations[0].salience == pytest.approx(0.125)
    assert now.explanations[0].record_id == record


def test_without_a_descriptor_salience_alone_orders(memory: Membrane) -> None:
    memory.create_record(semantic("a", salience=0.4))

    result = memory.retrieve(explain=True)

    assert isinstance(result, ExplainedRetrieveResult)
    (item,) = result.explanations
    assert (item.relevance, item.vector_similarity, item.lexical_score) == (None, None, None)
    assert item.score == pytest.approx(0.4)


def test_a_redacted_record_says_so_and_its_words_count_nothing(memory: Membrane) -> None:
    memory.create_record(semantic("orchid", "deploys", "to eu-west", sensitivity="medium"))

    result = memory.retrieve(
        "orchid deploys", trust=TrustContext(max_sensitivity="low"), explain=True
    )

    assert isinstance(result, ExplainedRetrieveResult)
    # words it does not show are no evidence, so it is no answer to the task
    assert (result.records, result.explanations) == ([], [])
    listed = memory.retrieve("", trust=TrustContext(max_sensitivity="low"), explain=True)
    assert isinstance(listed, ExplainedRetrieveResult)
    (item,) = listed.explanations
    assert (item.trust, item.lexical_score) == ("redacted", None)


def test_graph_roots_are_explained_with_their_boost(memory: Membrane) -> None:
    captured = memory.capture_memory({"text": "the orchid deploy failed", "project": "Orchid"})
    entity = captured.created_records[0].id

    graph = memory.retrieve_graph("Orchid", trust=FULL_TRUST, explain=True)

    assert isinstance(graph, ExplainedRetrieveGraphResult)
    assert [e.record_id for e in graph.explanations] == graph.root_ids
    named = next(e for e in graph.explanations if e.record_id == entity)
    assert named.boost == pytest.approx(1.0)
    assert named.score >= named.boost


def test_explain_must_be_a_flag(memory: Membrane) -> None:
    with pytest.raises(ValidationError) as raised:
        memory.retrieve("x", explain="yes")  # type: ignore[arg-type]

    assert raised.value.field == "explain"

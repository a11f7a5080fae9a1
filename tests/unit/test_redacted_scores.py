"""A record returned redacted tells a reader nothing through its scores.

A low-trust reader sees a record one level above its trust as a redacted copy. If the copy
came with its score, or the parts of it, the reader could ask question after question and
read how well the hidden record matched each: its meaning would leak one number at a time.
So a redacted hit's explanation withholds the score and every part of it, in every read that
explains itself (ranked, graph) and in the compact answers the MCP server gives."""

from __future__ import annotations

import msgspec

from membrane_es import ExplainedRetrieveGraphResult, ExplainedRetrieveResult, Membrane
from membrane_es.queries import compact
from membrane_es.schema.results import Explanation
from tests.unit.builders import semantic
from tests.unit.retrieval_support import QUERY, at_cosine, trust

WITHHELD = (
    "score",
    "vector_similarity",
    "vector_score",
    "lexical_score",
    "time_score",
    "relevance",
    "passage",
    "speaker_score",
)


def _seen(explanation: Explanation) -> dict[str, object]:
    """What a reader learns from a redacted hit's explanation, its rank aside."""
    out = msgspec.to_builtins(explanation)
    del out["rank"]
    return out


def test_questions_close_to_and_far_from_a_hidden_record_read_the_same(
    memory: Membrane,
) -> None:
    hidden = memory.create_record(
        semantic("orchid", "vault", "combination ninety", sensitivity="medium"),
        embedding=at_cosine(0.95),
    ).id
    near = memory.create_record(
        semantic("orchid", "notes", "weather tomorrow"), embedding=at_cosine(0.5)
    ).id
    shown = memory.create_record(
        semantic("orchid", "plans", "picnic today"), embedding=at_cosine(0.2)
    )
    moment = shown.updated_at  # every question reads the same moment: the same salience
    low = trust("low")
    questions = (
        ("orchid vault combination", QUERY),  # close to it
        ("orchid weather tomorrow", at_cosine(0.3)),  # far from it
        ("what happened to orchid today", QUERY),  # close, and naming when it happened
        ("orchid picnic today", at_cosine(-0.5)),  # far, naming when
    )

    answers = []
    for question, vector in questions:
        result = memory.retrieve(
            question, trust=low, query_embedding=vector, explain=True, as_of=moment
        )
        assert isinstance(result, ExplainedRetrieveResult)
        found = [e.record_id for e in result.explanations]
        redacted = [e for e in result.explanations if e.trust == "redacted"]
        # Its meaning and words are no evidence: a task lists it only by the time its copy
        # shows, and then after every record read in full, whatever it matched.
        assert (hidden in found) == ("today" in question)
        assert found[len(found) - len(redacted) :] == [e.record_id for e in redacted]
        for item in redacted:
            for name in WITHHELD:
                assert getattr(item, name) is None, name
            assert (item.boost, item.searched_with) == (0.0, [])
            answers.append(_seen(item))
        # the MCP server's compact answer: the record without a score
        for hit in compact.retrieved(result, explain=True)["records"]:
            if hit["id"] == hidden:
                assert "score" not in hit and hit["redacted"] is True
        if "today" in question:
            assert found[-1] == hidden and found.index(near) < found.index(hidden)
    assert len(answers) == 2 and answers[0] == answers[1]

    # the reader trusted with it sees how well it matched: the two answers differ
    full = [
        memory.retrieve(q, trust=trust("medium"), query_embedding=v, explain=True)
        for q, v in questions[:2]
    ]
    scores = [
        e.score
        for r in full
        if isinstance(r, ExplainedRetrieveResult)
        for e in r.explanations
        if e.record_id == hidden
    ]
    assert len(scores) == 2 and None not in scores and scores[0] != scores[1]


def test_a_hidden_record_does_not_set_the_scale_of_the_others(memory: Membrane) -> None:
    """Similarity is read relative to the best candidate's: were a redacted record the
    best, every other score would drop by how close the hidden one is."""
    shown = memory.create_record(
        semantic("orchid", "notes", "weather tomorrow"), embedding=at_cosine(0.5)
    )
    alone = memory.retrieve("orchid", trust=trust("low"), query_embedding=QUERY, explain=True)
    memory.create_record(
        semantic("orchid", "vault", "combination ninety", sensitivity="medium"),
        embedding=at_cosine(0.99),
    )
    beside = memory.retrieve(
        "orchid", trust=trust("low"), query_embedding=QUERY, explain=True, as_of=None
    )
    assert isinstance(alone, ExplainedRetrieveResult)
    assert isinstance(beside, ExplainedRetrieveResult)
    (before,) = [e for e in alone.explanations if e.record_id == shown.id]
    (after,) = [e for e in beside.explanations if e.record_id == shown.id]
    assert before.vector_score == after.vector_score == 1.0


def test_without_a_task_redacted_copies_are_listed_by_salience(memory: Membrane) -> None:
    """The reference's listing (spec §10, T11): no task, every admitted record by salience,
    a redacted copy among them."""
    hidden = memory.create_record(
        semantic("orchid", "vault", "combination ninety", sensitivity="medium", salience=0.9)
    ).id
    low = memory.create_record(semantic("orchid", "notes", "weather", salience=0.5)).id
    listed = memory.retrieve("", trust=trust("low"))
    assert [r.id for r in listed.records] == [hidden, low]
    assert listed.records[0].payload is None


def test_a_redacted_graph_root_withholds_its_score(memory: Membrane) -> None:
    hidden = memory.create_record(
        semantic("orchid", "vault", "combination ninety", sensitivity="medium"),
        embedding=at_cosine(0.95),
    ).id

    graph = memory.retrieve_graph(
        "orchid vault", trust=trust("low"), query_embedding=QUERY, explain=True
    )

    assert isinstance(graph, ExplainedRetrieveGraphResult)
    (item,) = [e for e in graph.explanations if e.record_id == hidden]
    assert item.trust == "redacted"
    assert all(getattr(item, name) is None for name in WITHHELD)
    (node,) = [n for n in compact.graph(graph, explain=True)["nodes"] if n["id"] == hidden]
    assert "score" not in node

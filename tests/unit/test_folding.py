"""Words in every language: the word index and the queries read text through one fold (case
and accents, CJK pairs, emoji), so a query finds what it names whatever the script — with no
embedder to help; and a contraction's or possessive's ending is no word to search by."""

from __future__ import annotations

import pytest

from membrane_es import Membrane
from membrane_es.projections.folding import fold
from membrane_es.projections.tokens import query_terms, tokens

JAPANESE = "京都でラーメンを食べた🍜"


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Ακρόπολη", ["ακροπολη"]),
        ("ΑΚΡΌΠΟΛΗ", ["ακροπολη"]),
        ("Straße ＡＢＣ", ["strass", "abc"]),  # full width and ß folded, then stemmed
        ("Crème brûlée", ["creme", "brule"]),
        ("京都", ["京都"]),
        ("ラーメン", ["ラー", "ーメ", "メン"]),
        ("🍜", ["🍜"]),
        ("ramen🍜", ["ramen", "🍜"]),
        ("नमस्ते दुनिया", ["नमस्ते", "दुनिया"]),  # vowel signs keep a word whole
        ("مَرْحَبًا", ["مرحبا"]),  # harakat dropped
        ("한국어", ["한국", "국어"]),
    ],
)
def test_terms_in_every_script(text: str, terms: list[str]) -> None:
    assert query_terms(text) == terms


def test_contraction_and_possessive_endings_are_no_words() -> None:
    assert query_terms("Bob's") == ["bob"]
    assert query_terms("what's the plan?") == ["plan"]
    assert query_terms("we'll see, they've gone, I'm here, she'd go") == ["see", "gone", "go"]
    assert query_terms("it’s Bob’s") == ["bob"]


def test_folding_twice_changes_no_word() -> None:
    for text in (JAPANESE, "Ακρόπολη", "Bob's café 👩‍💻", "한국어 텍스트", "ｶﾞｷ"):
        assert tokens(fold(text)) == tokens(text)


def test_a_japanese_sentence_is_found_by_its_parts_without_an_embedder() -> None:
    with Membrane.in_memory(embedder=None) as memory:
        kyoto = memory.capture_memory(JAPANESE).primary_record.id
        athens = memory.capture_memory("Η Ακρόπολη της Αθήνας").primary_record.id
        whats = memory.capture_memory("what's the capital of Australia?").primary_record.id

        def found(task: str) -> list[str]:
            return [record.id for record in memory.retrieve(task).records]

        assert found("ラーメン") == [kyoto]
        assert found("京都") == [kyoto]
        assert found("🍜") == [kyoto]
        assert found("ακροπολη") == [athens]
        assert found("Bob's") == []
        assert found("Australia's capital") == [whats]

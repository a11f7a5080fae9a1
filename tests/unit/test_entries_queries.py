"""The entries query pieces: the FTS5 query text, intent cues, reciprocal-rank fusion, and how
records read as entries."""

from __future__ import annotations

import pytest

from membrane_es import Membrane
from membrane_es.projections.entries import entry_fields
from membrane_es.queries.entries import fuse, intent_types, match_expression, query_tokens
from membrane_es.schema.entries import NewEntry


def test_one_word_is_itself_and_stop_words_go() -> None:
    assert match_expression("the Deployments") == '"deployments"'
    assert query_tokens("What is the café's URL?") == ["cafe", "url"]  # folded, no 's
    assert query_tokens("the of and") == ["the", "of", "and"]  # nothing else: kept
    assert match_expression("?!") == ""


def test_two_to_six_words_are_phrase_or_near_or_any() -> None:
    assert match_expression("deployment notes") == (
        '"deployment notes" OR NEAR("deployment" "notes", 8) OR ("deployment" OR "notes")'
    )
    six = match_expression("a1 b2 c3 d4 e5 f6")
    assert six.startswith('"a1 b2 c3 d4 e5 f6" OR NEAR(')
    seven = match_expression("a1 b2 c3 d4 e5 f6 g7")
    assert seven == " OR ".join(f'"{w}"' for w in "a1 b2 c3 d4 e5 f6 g7".split())


def test_quotes_and_operators_in_a_query_are_words() -> None:
    assert match_expression('NEAR("x") OR y*') == (
        '"near x y" OR NEAR("near" "x" "y", 8) OR ("near" OR "x" OR "y")'
    )


@pytest.mark.parametrize(
    ("question", "types"),
    [
        ("what is my favorite tea", ("user", "feedback", "reference")),
        ("where is the staging endpoint", ("reference",)),
        ("how to rotate the keys", ("learning",)),
        ("when did we ship it", ("project",)),
        ("orchid rollout", ()),
        ("likeness of a bookmark", ()),  # cue words are whole words
    ],
)
def test_intent_cues(question: str, types: tuple[str, ...]) -> None:
    assert intent_types(question) == types


def test_fusion_by_hand() -> None:
    # a: 1.5/61 + 1/62; b: 1.5/62 + 1/61; c: 1/63
    fused = fuse([(1.5, ["a", "b"]), (1.0, ["b", "a", "c"])])  # type: ignore[list-item]
    assert fused == ["a", "b", "c"]
    assert fuse([(1.0, [3, 1]), (1.0, [1, 3])]) == [3, 1]  # a tie goes to the first seen
    assert fuse([]) == []


def test_records_read_as_entries() -> None:
    with Membrane.in_memory() as memory:
        episode = memory.ingest_event("deploy", "evt-1", summary="deployed Orchid to staging")
        fields = entry_fields(episode)
        assert fields.type == "context" and "Orchid" in fields.title
        fact = memory.ingest_observation("Orchid", "deploy_target", "staging")
        fields = entry_fields(fact)
        assert (fields.type, fields.title) == ("reference", "Orchid")
        assert "deploy target" in fields.content
        entry = memory.create_entry(
            NewEntry(type="user", title="Tea", content="green", source="me", artifact_id=4)
        )
        record = memory.retrieve_by_id(entry.record_id)
        fields = entry_fields(record)
        assert (fields.type, fields.title, fields.content, fields.source) == (
            "user",
            "Tea",
            "green",
            "me",
        )
        assert fields.artifact_id == 4 and fields.conversation_id is None

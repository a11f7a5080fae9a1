"""A turn borrows words only from the exchange it goes on with: a speaker's messages one after
another, with no one answering in between, are separate, and none matches the words of the one
before it (a question about ramen does not find a message about coffee sent next).

The examples are a user's messages in one sitting, in four languages, then the assistant's
answer; searched by words alone and with the default embedder (int8 MiniLM)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from membrane_es import ExplainedRetrieveResult, Membrane
from membrane_es.schema.conversation import said_after
from tests.unit.builders import FULL_TRUST
from tests.unit.conftest import START

MESSAGES = (
    ("user", "My ThinkPad laptop keeps overheating when I compile"),
    ("user", "Also, my flight lands at Haneda on Friday morning"),
    ("user", "Какой у нас бюджет на поездку в Японию?"),
    ("user", "Which ramen shop in Kyoto would you pick?"),
    ("user", "أحب شرب القهوة العربية في الصباح"),
    ("assistant", "Menya Inoichi, near Nishiki market."),
)
THINKPAD, HANEDA, BUDGET, RAMEN, COFFEE, ANSWER = range(len(MESSAGES))
# (query, the message that says it)
ASKED = (
    ("ramen", RAMEN),
    ("бюджет", BUDGET),
    ("ThinkPad laptop", THINKPAD),
    ("Haneda", HANEDA),
    ("القهوة", COFFEE),
)


def _captured(memory: Membrane) -> list[str]:
    ids = []
    for minute, (speaker, text) in enumerate(MESSAGES):
        captured = memory.capture_memory(
            {"speaker": speaker, "text": text},
            source="chat",
            timestamp=START + timedelta(minutes=minute),
        )
        ids.append(captured.primary_record.id)
    return ids


def _explained(memory: Membrane, query: str) -> ExplainedRetrieveResult:
    result = memory.retrieve(query, trust=FULL_TRUST, memory_types=["episodic"], explain=True)
    assert isinstance(result, ExplainedRetrieveResult)
    return result


@pytest.fixture
def words_only() -> Iterator[Membrane]:
    with Membrane.in_memory(embedder=None) as memory:
        yield memory


def test_a_message_after_the_speakers_own_borrows_none_of_its_words(
    words_only: Membrane,
) -> None:
    ids = _captured(words_only)
    records = {r.id: r for r in words_only.retrieve("", trust=FULL_TRUST, limit=0).records}
    # the user's messages borrow nothing; the answer goes on with the message it answers
    assert [said_after(records[i]) for i in ids[:ANSWER]] == [[]] * ANSWER
    assert said_after(records[ids[ANSWER]]) == [ids[COFFEE]]

    for query, says in ASKED:
        found = [r.id for r in _explained(words_only, query).records]
        if says == COFFEE:  # and the answer, said after it, is found by its words
            assert found == [ids[COFFEE], ids[ANSWER]], query
        else:
            assert found == [ids[says]], query


def test_a_reply_still_borrows_from_the_exchange_it_goes_on_with(words_only: Membrane) -> None:
    def say(speaker: str, text: str, minute: int) -> str:
        return words_only.capture_memory(
            {"speaker": speaker, "text": text},
            source="chat",
            timestamp=START + timedelta(minutes=minute),
        ).primary_record.id

    went = say("Caroline", "I went to the LGBTQ support group yesterday", 0)
    asked = say("Melanie", "How was it?", 1)
    powerful = say("Caroline", "It was so powerful, everyone listened", 2)
    records = {r.id: r for r in words_only.retrieve("", trust=FULL_TRUST).records}
    assert said_after(records[powerful]) == [went, asked]

    found = [r.id for r in _explained(words_only, "support group").records]
    assert found[0] == went and powerful in found


@pytest.mark.default_embedder
def test_with_the_default_embedder_borrowing_adds_no_word_to_an_unrelated_message() -> None:
    with Membrane.in_memory() as memory:
        assert memory.embedder is not None
        ids = _captured(memory)
        for query, says in ASKED:
            result = _explained(memory, query)
            found = [r.id for r in result.records]
            assert found[0] == ids[says], query
            # Meaning may still rank another message lower; words never do: only the message
            # that says them (and the answer said after it) holds the query's words.
            worded = {e.record_id for e in result.explanations if e.lexical_score}
            assert worded == ({ids[says], ids[ANSWER]} if says == COFFEE else {ids[says]})

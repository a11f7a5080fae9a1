"""A context a language model can trust: entities by name, turns as ``speaker: words``, tools
by their names, what changed said on the line, no line twice, and a relevance floor that
leaves budget unused rather than filling it with what matches nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from membrane_es import Membrane, Sensitivity, TrustContext, ValidationError
from membrane_es.embedding import HashingEmbedder
from membrane_es.queries.context_changes import older_notes
from membrane_es.queries.context_words import plain
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.conftest import ManualTime

OWNER = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)


@pytest.fixture
def store(time: ManualTime) -> Iterator[Membrane]:
    engine = Membrane.in_memory(clock=MonotonicClock(source=time), embedder=HashingEmbedder())
    yield engine
    engine.close()


def lines(memory: Membrane, task: str, **options: Any) -> list[str]:
    options.setdefault("budget_tokens", 512)
    return [line for line in memory.context(task, trust=OWNER, **options).text.splitlines() if line]


def fact(subject: str, predicate: str, obj: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "semantic",
        "payload": {"kind": "semantic", "subject": subject, "predicate": predicate, "object": obj},
        "provenance": {"sources": [{"kind": "observation", "ref": "chat"}]},
        **extra,
    }


def test_a_captured_fact_names_its_entity_not_its_id(store: Membrane) -> None:
    captured = store.capture_memory(
        {"subject": "Dana", "predicate": "diet", "object": "vegetarian"},
        proposed_type="semantic",
    )
    derived = [r for r in captured.created_records if str(r.type) == "semantic"]
    assert derived and derived[0].payload.subject != "Dana"  # capture put the entity's id
    text = "\n".join(lines(store, "Dana diet vegetarian"))
    assert "Dana diet: vegetarian" in text
    assert derived[0].payload.subject not in text


def test_a_revised_fact_without_the_subjects_words_is_named_by_its_entity(
    store: Membrane, time: ManualTime
) -> None:
    first = store.capture_memory(
        {"subject": "Dana", "predicate": "hotel_budget", "object": "150 USD"},
        proposed_type="semantic",
    )
    old = next(r for r in first.created_records if str(r.type) == "semantic")
    time.advance(days=3)
    store.supersede(
        old.id,
        fact(old.payload.subject, "hotel_budget", "220 USD"),
        actor="dana",
        rationale="raised",
    )
    found = lines(store, "Dana hotel budget")
    day = time().astimezone(UTC).date().isoformat()
    current = next(line for line in found if "hotel_budget: 220 USD" in line)
    assert f"Dana hotel_budget: 220 USD (since {day}; was 150 USD) [" in current
    # the episode that said 150 is packed too, and says it no longer holds
    episode = next(line for line in found if "hotel_budget: 150 USD" in line)
    assert f"(episodic) Dana hotel_budget: 150 USD (superseded {day}; now 220 USD) [" in episode


def test_a_chain_of_replacements_reads_the_current_value(store: Membrane) -> None:
    first = store.create_record(fact("Orchid", "deploy_target", "staging"))
    second = store.supersede(first.id, fact("Orchid", "deploy_target", "canary"), "ops", "up")
    store.supersede(second.id, fact("Orchid", "deploy_target", "production"), "ops", "up")
    found = "\n".join(lines(store, "Orchid deploy target"))
    assert "Orchid deploy_target: production (since" in found and "was canary)" in found
    # what was current before is readable as of then, unmarked: it was current
    past = store.context("Orchid deploy target", trust=OWNER, as_of=second.created_at)
    assert "Orchid deploy_target: canary (since" in past.text and "production" not in past.text


def test_an_older_value_beside_a_newer_one_is_labelled(store: Membrane, time: ManualTime) -> None:
    # a predicate the store does not know keeps both values active (city would supersede)
    store.ingest_observation("Dana", "favourite_cafe", "Lisbon")
    time.advance(days=30)
    store.ingest_observation("Dana", "favourite_cafe", "Faro")
    found = lines(store, "Dana favourite cafe Lisbon Faro")
    lisbon = next(line for line in found if "Lisbon" in line)
    faro = next(line for line in found if "Dana favourite_cafe: Faro" in line)
    assert "Dana favourite_cafe: Lisbon (older; newer: Faro)" in lisbon
    assert "older" not in faro


def test_two_values_of_a_many_valued_predicate_are_both_current(
    store: Membrane, time: ManualTime
) -> None:
    store.ingest_observation("Dana", "likes", "ramen")
    time.advance(days=30)
    store.ingest_observation("Dana", "likes", "sushi")
    found = "\n".join(lines(store, "Dana likes ramen sushi"))
    assert "Dana likes: ramen" in found and "Dana likes: sushi" in found
    assert "older" not in found
    notes = older_notes(
        [
            (("dana", "likes"), "jazz", datetime(2026, 1, 1, tzinfo=UTC), "a"),
            (("dana", "likes"), "Jazz", datetime(2026, 2, 1, tzinfo=UTC), "b"),
        ]
    )
    assert notes == {}  # the same value said twice is not an older value


def test_chat_turns_read_as_speaker_and_words_in_every_shape(store: Membrane) -> None:
    shapes: list[Any] = [
        {"role": "user", "content": "Book me a flight to Tokyo"},
        [{"role": "user", "content": "Book me a table in Kyoto"}],
        {"messages": [{"role": "user", "content": "Book me a car in Osaka"}]},
        '{"role": "user", "content": "Book me a ryokan in Hakone"}',
    ]
    for content in shapes:
        store.capture_memory(content, source_kind="dialogue_turn")
    found = lines(store, "book me tokyo kyoto osaka hakone")
    for place in ("a flight to Tokyo", "a table in Kyoto", "a car in Osaka", "a ryokan in Hakone"):
        assert any(f" user: Book me {place} [" in line for line in found), (place, found)
    assert not any("role:" in line for line in found)
    store.capture_memory(
        [{"role": "user", "content": "Which hotel?"}, {"role": "assistant", "content": "Hoshi"}],
        source_kind="dialogue_turn",
    )
    assert any(" user: Which hotel? / assistant: Hoshi [" in line for line in lines(store, "hotel"))


def test_tools_keep_their_names(store: Membrane) -> None:
    store.ingest_tool_output(
        "search_flights", args={"to": "Tokyo"}, result={"cheapest": "JAL 800 USD"}
    )
    store.capture_memory({"tool": "book_hotel", "status": "done"}, source_kind="tool_output")
    found = "\n".join(lines(store, "search flights tokyo book hotel"))
    assert "search_flights(to: Tokyo) → cheapest: JAL 800 USD" in found
    assert "tool: book_hotel; status: done" in found
    assert "search flights" not in found and "book hotel" not in found
    assert plain({"a": [1, 2.5, None, True], "b": {"c": "d"}}) == "a: 1, 2.5, , true; b: (c: d)"


def test_the_same_line_is_never_packed_twice(store: Membrane) -> None:
    for _ in range(4):
        store.capture_memory({"subject": "Orchid", "predicate": "deploy_target", "object": "prod"})
    found = lines(store, "Orchid deploy target")
    assert sum("Orchid deploy_target: prod" in line for line in found) == 1


def test_a_relevance_floor_leaves_budget_unused_rather_than_filling_it(store: Membrane) -> None:
    store.capture_memory(
        {"speaker": "Dana", "text": "I'm vegetarian and Sam is severely allergic to shellfish"},
        source_kind="dialogue_turn",
    )
    for n in range(30):
        store.capture_memory(
            {"speaker": "assistant", "text": f"Canberra is the capital, note {n}."},
            source_kind="dialogue_turn",
        )
    task = "restaurant for a vegetarian allergic to shellfish"
    filled = store.context(task, trust=OWNER, budget_tokens=512, relevance_floor=0.0)
    floored = store.context(task, trust=OWNER, budget_tokens=512, relevance_floor=0.9)
    assert "vegetarian" in floored.text and "Canberra" not in floored.text
    assert floored.tokens < filled.tokens
    assert set(floored.ids) < set(filled.ids)
    for bad in (-0.1, 1.5, "0.3", True):
        with pytest.raises(ValidationError, match="relevance_floor"):
            store.context(task, trust=OWNER, relevance_floor=bad)  # type: ignore[arg-type]


def test_notes_never_show_what_the_reader_may_not_read(store: Membrane) -> None:
    old = store.create_record(fact("Dana", "salary", "90k", sensitivity="high"))
    # lowering the sensitivity of a revision is an explicit choice (widen)
    store.supersede(
        old.id, fact("Dana", "salary", "95k", sensitivity="low"), "hr", "raise", widen=True
    )
    reader = TrustContext(max_sensitivity=Sensitivity.LOW, authenticated=True)
    text = store.context("Dana salary", trust=reader).text
    assert "95k" in text and "90k" not in text and "(since " in text

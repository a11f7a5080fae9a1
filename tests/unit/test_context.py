"""``Membrane.context``: the memories a task needs as lines packed into a token budget, under
the same trust and ``as_of`` as ``retrieve``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from membrane_es import Membrane, Sensitivity, TrustContext, ValidationError
from membrane_es.embedding import HashingEmbedder
from membrane_es.embedding.tokens import APPROXIMATE, counter_for
from membrane_es.queries.context import LONG_LINE_TOKENS, Memory, pack, ref_for
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.conftest import ManualTime

OWNER = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)
LINE = re.compile(r"^\d{4}-\d{2}-\d{2} (\S+:|\(\w+\)) .+ \[[0-9a-f-]{8,}\]$")


@pytest.fixture
def store(time: ManualTime) -> Iterator[Membrane]:
    engine = Membrane.in_memory(clock=MonotonicClock(source=time), embedder=HashingEmbedder())
    yield engine
    engine.close()


def turn(memory: Membrane, speaker: str, text: str, **options: object) -> str:
    captured = memory.capture_memory(
        {"speaker": speaker, "text": text}, source_kind="dialogue_turn", **options
    )
    return captured.primary_record.id


def test_one_line_a_memory_with_date_speaker_words_and_a_ref_that_prefixes_its_id(
    store: Membrane,
) -> None:
    ids = [
        turn(store, "Caroline", "I adopted a puppy last week"),
        turn(store, "Melanie", "What is the puppy called?"),
        turn(store, "Caroline", "Her name is Biscuit,\nshe loves the beach"),
    ]
    result = store.context("what is the puppy called", trust=OWNER, budget_tokens=256)
    lines = result.text.splitlines()
    assert len(lines) == len(result.ids) == 3 and set(result.ids) == set(ids)
    assert all(LINE.match(line) for line in lines), lines
    assert "2025-01-01 Caroline: Her name is Biscuit, she loves the beach [" in result.text
    for line, memory in zip(lines, result.memories, strict=True):
        assert memory.id.startswith(memory.ref) and line.endswith(f"[{memory.ref}]")
    assert result.ids == ids  # one conversation: in the order it was said
    assert result.tokens == sum(m.tokens for m in result.memories) <= result.budget_tokens


def test_a_record_without_a_speaker_is_labelled_by_its_type(store: Membrane) -> None:
    store.create_record(
        {
            "type": "semantic",
            "payload": {
                "kind": "semantic",
                "subject": "Orchid",
                "predicate": "deploy_target",
                "object": "production",
            },
            "provenance": {"sources": [{"kind": "observation", "ref": "standup"}]},
        }
    )
    result = store.context("where does Orchid deploy", trust=OWNER)
    assert result.text.startswith("2025-01-01 (semantic) Orchid deploy_target: production [")


def test_the_budget_holds_the_best_lines_and_passes_over_one_that_does_not_fit(
    store: Membrane,
) -> None:
    for n in range(40):
        turn(store, "ops", f"deploy number {n} of the orchid service went fine")
    result = store.context("orchid deploy", trust=OWNER, budget_tokens=64)
    assert 0 < result.tokens <= 64 and len(result.ids) < 40
    assert result.counted_with == counter_for(HashingEmbedder()).name  # the estimate
    # pack: a long line that does not fit is passed over for shorter ones after it
    at = datetime(2025, 1, 1, tzinfo=UTC)
    long = Memory("a" * 36, "episodic", at, "x", "word " * 100, "")
    short = [Memory(f"{n:08d}-rest", "episodic", at, "y", f"short words {n}", "") for n in range(3)]
    packed = pack([short[0], long, short[1], short[2]], 40, APPROXIMATE)
    assert [m.id for m, _, _ in packed.chosen] == [s.id for s in short]

    # a line over a quarter of the budget is offered after the shorter ones ranked below it
    fits = Memory("b" * 36, "episodic", at, "x", "word " * 60, "")
    second = pack([short[0], fits, short[1], short[2]], 100, APPROXIMATE)
    assert {m.id for m, _, _ in second.chosen} == {s.id for s in short}
    plain = pack([short[0], fits, short[1], short[2]], 100, APPROXIMATE, defer_long=False)
    assert {m.id for m, _, _ in plain.chosen} == {short[0].id, fits.id}
    roomy = pack([short[0], fits, short[1], short[2]], 400, APPROXIMATE)
    assert {m.id for m, _, _ in roomy.chosen} == {fits.id, *(s.id for s in short)}
    # ... unless it is the best match: what the task needs most is offered first
    first = pack([fits, *short], 100, APPROXIMATE)
    assert {m.id for m, _, _ in first.chosen} == {fits.id, short[0].id}

    # over LONG_LINE_TOKENS a line waits whatever the budget: a larger budget holds more of
    # what was ranked first, not one long text sooner
    document = Memory("c" * 36, "episodic", at, "x", "word " * (LONG_LINE_TOKENS + 10), "")
    many = [
        Memory(f"{n:08d}-many", "episodic", at, "y", f"short words {n}", "") for n in range(200)
    ]
    budget = 5 * LONG_LINE_TOKENS  # its quarter would take the document at its rank
    packed = pack([many[0], document, *many[1:]], budget, APPROXIMATE)
    assert document.id not in {m.id for m, _, _ in packed.chosen}
    assert packed.tokens > budget - LONG_LINE_TOKENS  # the short lines filled it
    assert document.id in {
        m.id for m, _, _ in pack([many[0], document, *many[1:3]], budget, APPROXIMATE).chosen
    }


def test_the_best_match_too_long_to_fit_is_offered_as_the_part_that_matched() -> None:
    at = datetime(2025, 1, 1, tzinfo=UTC)
    answer = Memory(
        "d" * 36, "episodic", at, "x", "word " * 200, "", excerpt="…the part that matched…"
    )
    short = [Memory(f"{n:08d}-rest", "episodic", at, "y", f"short words {n}", "") for n in range(9)]

    packed = pack([answer, *short], 100, APPROXIMATE)

    words = {m.id: m.words for m, _, _ in packed.chosen}
    assert words[answer.id] == "…the part that matched…"
    assert len(words) < 1 + len(short)  # the shorter lines after it would have filled it


def test_turns_are_grouped_by_scope_and_day_in_time_order(
    store: Membrane, time: ManualTime
) -> None:
    first = turn(store, "a", "orchid launch planning", scope="team:x")
    time.advance(days=3)
    later = turn(store, "b", "orchid launch went well", scope="team:x")
    other = turn(store, "c", "orchid launch in another team", scope="team:y")
    time.advance(minutes=1)
    reply = turn(store, "d", "orchid launch retro notes", scope="team:x")
    text = store.context("orchid launch", trust=OWNER).text
    blocks = text.split("\n\n")
    assert len(blocks) == 3
    assert first[:8] in blocks[0]
    assert later[:8] in blocks[1] and reply[:8] in blocks[1]
    assert blocks[1].index(later[:8]) < blocks[1].index(reply[:8])
    assert other[:8] in blocks[2]


def test_refs_grow_past_a_clash() -> None:
    assert ref_for("abcdef12-34", set()) == "abcdef12"
    assert ref_for("abcdef12-34", {"abcdef12"}) == "abcdef12-"


def test_as_of_holds_only_what_a_retrieve_then_returned(store: Membrane, time: ManualTime) -> None:
    turn(store, "a", "the orchid deploy moved to friday")
    turn(store, "b", "orchid deploy needs a review")
    then = time.advance(hours=1)
    time.advance(hours=1)
    late = turn(store, "c", "orchid deploy is now on monday")
    fact = store.create_record(
        {
            "type": "semantic",
            "payload": {
                "kind": "semantic",
                "subject": "orchid",
                "predicate": "deploy_day",
                "object": "monday",
            },
            "provenance": {"sources": [{"kind": "observation", "ref": "x"}]},
        }
    )
    past = store.context("orchid deploy", trust=OWNER, as_of=then)
    returned = {r.id for r in store.retrieve("orchid deploy", trust=OWNER, as_of=then).records}
    assert past.ids and set(past.ids) <= returned
    assert late not in past.ids and fact.id not in past.ids
    assert past.moment == then
    now = store.context("orchid deploy", trust=OWNER)
    assert late in now.ids and fact.id in now.ids
    # asked again later, the past context is the same
    assert store.context("orchid deploy", trust=OWNER, as_of=then) == past


def test_nothing_redacted_or_out_of_scope_is_packed(store: Membrane) -> None:
    public = turn(store, "a", "orchid budget is fine")
    secret = turn(store, "b", "orchid budget secret figure 42", sensitivity="high")
    hidden = turn(store, "c", "orchid budget of the other team", scope="team:y")
    reader = TrustContext(max_sensitivity=Sensitivity.MEDIUM, scopes=["team:x"])
    # a list at this trust returns the high record redacted; the context leaves it out
    redacted = store.retrieve("", trust=reader).records
    assert secret in {r.id for r in redacted}
    result = store.context("orchid budget", trust=reader)
    assert result.ids == [public]
    assert "secret" not in result.text and "figure 42" not in result.text
    assert hidden not in result.ids and "other team" not in result.text
    assert secret in store.context("orchid budget", trust=OWNER).ids


def test_a_forgotten_record_leaks_nothing_now_or_as_of_before(
    store: Membrane, time: ManualTime
) -> None:
    kept = turn(store, "a", "orchid password hint is blue")
    gone = turn(store, "b", "orchid password is hunter2")
    before = time.advance(minutes=5)
    time.advance(minutes=5)
    store.forget(gone, "agent", "asked to forget")
    for moment in (None, before):
        result = store.context("orchid password", trust=OWNER, as_of=moment)
        assert result.ids == [kept]
        assert "hunter2" not in result.text


def test_without_an_embedder_the_estimate_counts(time: ManualTime) -> None:
    with Membrane.in_memory(clock=MonotonicClock(source=time), embedder=None) as memory:
        turn(memory, "a", "orchid deploys on fridays")
        result = memory.context("orchid", trust=OWNER)
    assert result.counted_with == APPROXIMATE.name
    assert result.tokens == APPROXIMATE.count([result.text])[0]


@pytest.mark.parametrize("budget", [0, 15, 1_000_001, -5, "many", 1.5, True])
def test_a_bad_budget_names_the_field(store: Membrane, budget: object) -> None:
    with pytest.raises(ValidationError, match="budget_tokens"):
        store.context("orchid", trust=OWNER, budget_tokens=budget)  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [16, 20_000, 1_000_000])
def test_any_budget_in_the_documented_range_is_taken(store: Membrane, budget: int) -> None:
    # The range is the budget's own (16 to 1,000,000 tokens), not a result limit's.
    assert store.context("orchid", trust=OWNER, budget_tokens=budget).tokens <= budget


def test_bad_trust_and_as_of_are_refused_as_retrieve_refuses_them(store: Membrane) -> None:
    with pytest.raises(ValidationError, match="trust"):
        store.context("orchid", trust=None)
    with pytest.raises(ValidationError, match="as_of"):
        store.context("orchid", trust=OWNER, as_of=datetime(2025, 1, 1))  # naive
    assert store.context("orchid", trust=OWNER, as_of=datetime.now(UTC) - timedelta(0)).ids == []


def test_a_task_nothing_answers_packs_nothing_as_retrieve_returns_nothing(
    time: ManualTime,
) -> None:
    # Without an embedder only shared words (or a named period) are evidence: salience alone
    # never puts a record in a context, as it never makes one a retrieve answer.
    with Membrane.in_memory(clock=MonotonicClock(source=time), embedder=None) as memory:
        turn(memory, "a", "orchid deploys on fridays")
        assert memory.retrieve("zebra", trust=OWNER).records == []
        result = memory.context("zebra", trust=OWNER)
    assert result.ids == [] and result.text == ""

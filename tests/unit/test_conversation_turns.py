"""Capture notes which turns a conversation turn was said after (ids, never words); the text
index searches the turn together with them, and lets go of a turn's words everywhere when it
is forgotten."""

from __future__ import annotations

import contextlib
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.embedding import search_text
from membrane_es.projections.read_model import ReadModel
from membrane_es.projections.said_after import SaidAfter
from membrane_es.projections.speakers import ASSISTANT_ROLES, USER_ROLES, roles_named
from membrane_es.queries.lexical import bm25
from membrane_es.schema import MemoryRecord
from membrane_es.schema.conversation import said_after
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import FULL_TRUST, episodic, semantic
from tests.unit.conftest import START, ManualTime
from tests.views_support import assert_same_views


def turn(
    memory: Membrane,
    speaker: str,
    text: str,
    *,
    minutes: float = 0.0,
    scope: str = "",
    source: str = "chat",
    sensitivity: str = "low",
) -> MemoryRecord:
    return memory.capture_memory(
        {"speaker": speaker, "text": text},
        source_kind="dialogue_turn",
        source=source,
        scope=scope,
        sensitivity=sensitivity,
        timestamp=START + timedelta(minutes=minutes),
    ).primary_record


def lexical(memory: Membrane, query: str, record_id: str) -> float:
    """The lexical evidence a retrieve gives ``record_id`` for ``query`` (0 if not ranked)."""
    result = memory.retrieve(
        task_descriptor=query, trust=FULL_TRUST, memory_types=["episodic"], explain=True
    )
    for explanation in result.explanations:
        if explanation.record_id == record_id:
            return explanation.lexical_score or 0.0
    return 0.0


def test_a_turn_notes_the_last_turn_of_each_participant_oldest_first(memory: Membrane) -> None:
    turn(memory, "Ann", "I adopted a dog", minutes=0)
    question = turn(memory, "Ben", "What breed is it?", minutes=1)
    answer = turn(memory, "Ann", "A beagle puppy", minutes=2)

    reply = turn(memory, "Ben", "Lovely!", minutes=3)

    assert said_after(reply) == [question.id, answer.id]


def test_the_earlier_turns_are_searched_with_a_reply_not_copied_into_it(memory: Membrane) -> None:
    question = turn(memory, "Ann", "Did you go to the pottery class?", minutes=0)

    reply = turn(memory, "Ben", "Yes, last week", minutes=1)

    assert said_after(reply) == [question.id]
    assert "pottery" not in search_text(reply)  # its own text, and so its vector
    assert "pottery" not in repr(reply.payload)
    assert lexical(memory, "pottery class", reply.id) > 0


def test_a_batch_and_single_writes_note_the_same_turns(clock: MonotonicClock) -> None:
    def noted(batched: bool) -> list[list[int]]:
        with Membrane.in_memory(clock=clock) as memory:
            if batched:
                with memory.batch():
                    made = [turn(memory, s, t, minutes=i) for i, (s, t) in enumerate(LINES)]
            else:
                made = [turn(memory, s, t, minutes=i) for i, (s, t) in enumerate(LINES)]
            index = {record.id: i for i, record in enumerate(made)}
            return [[index[i] for i in said_after(record)] for record in made]

    assert noted(batched=True) == noted(batched=False) == [[], [0], [0, 1]]


LINES = [("Ann", "hello there"), ("Ben", "hi Ann"), ("Ann", "how are you")]


SESSION = [
    ("Ann", "Did you go to the pottery class on Friday?"),
    ("Ben", "Yes, I made a bowl"),
    ("Cid", "A blue one?"),
    ("Ann", "Show us a photo"),
    ("Ben", "Tomorrow, it is still in the kiln"),
    ("Cid", "I tried glazing once"),
    ("Ann", "How did it turn out?"),
    ("Cid", "Cracked in half"),
    ("Ben", "The kiln was too hot then"),
    ("Ann", "Next time we go together"),
]


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batch"])
def test_turns_sharing_a_timestamp_are_linked_and_ranked_as_if_a_second_apart(
    clock: MonotonicClock, time: ManualTime, batched: bool
) -> None:
    """A caller that dates sessions, not turns, stamps every turn of a session with one time:
    which turn was said after which then follows the order they were captured, not their ids."""

    def features(seconds_apart: float) -> tuple[list[list[int]], list[list[int]]]:
        with Membrane.in_memory(clock=clock) as memory:
            made: list[MemoryRecord] = []
            for session in range(3):
                with memory.batch() if batched else contextlib.nullcontext():
                    for i, (speaker, text) in enumerate(SESSION):
                        at = session * 24 * 60 + i * seconds_apart / 60
                        made.append(turn(memory, speaker, f"{text} ({session})", minutes=at))
            time.current = START + timedelta(days=5)
            index = {record.id: i for i, record in enumerate(made)}
            links = [[index[i] for i in said_after(record)] for record in made]
            rankings = []
            for question in ("pottery bowl kiln", "glazing cracked", "photo together"):
                found = memory.retrieve(
                    task_descriptor=question, trust=FULL_TRUST, memory_types=["episodic"]
                ).records
                evidence = {r.id: lexical(memory, question, r.id) for r in found}
                # Ties in evidence are ordered by event time, which the two stores state
                # differently; the evidence each turn gets is what must not differ.
                rankings.append(sorted(index[r.id] for r in found if evidence[r.id] > 0))
                rankings.append([round(evidence[made[i].id], 9) for i in rankings[-1]])
            return links, rankings

    apart, shared = features(seconds_apart=1.0), features(seconds_apart=0.0)

    assert shared == apart
    assert apart[0][:5] == [[], [0], [0, 1], [0, 1, 2], [1, 2, 3]]


def test_other_sittings_scopes_sources_and_more_sensitive_turns_are_left_out(
    memory: Membrane,
) -> None:
    turn(memory, "Ann", "an hour before", minutes=-60)
    turn(memory, "Ben", "in another scope", scope="project:other")
    turn(memory, "Cid", "from another source", source="email")
    turn(memory, "Dee", "a secret", sensitivity="high")
    just_before = turn(memory, "Eve", "just before", minutes=-29)

    reply = turn(memory, "Ann", "and now", minutes=1)

    assert said_after(reply) == [just_before.id]


def test_content_without_a_speaker_notes_no_turns(memory: Membrane) -> None:
    turn(memory, "Ann", "Did you go to the pottery class?")

    note = memory.capture_memory(
        {"text": "pottery class notes"}, source="chat", timestamp=START + timedelta(minutes=1)
    ).primary_record

    assert said_after(note) == []


def test_a_sitting_in_the_calendars_first_half_hour_starts_with_it(memory: Membrane) -> None:
    first = datetime(1, 1, 1, tzinfo=UTC)
    greeting = memory.capture_memory(
        {"speaker": "Ann", "text": "Happy new year!"}, source="chat", timestamp=first
    ).primary_record
    reply = memory.capture_memory(
        {"speaker": "Bo", "text": "And to you"},
        source="chat",
        timestamp=first + timedelta(minutes=1),
    ).primary_record

    assert said_after(greeting) == []
    assert said_after(reply) == [greeting.id]


def test_a_reply_is_found_by_the_words_of_what_it_answers(
    memory: Membrane, time: ManualTime
) -> None:
    turn(memory, "Ann", "Did you finish the marathon in Boston?", minutes=0)
    reply = turn(memory, "Ben", "Yes! In under four hours.", minutes=1)
    turn(memory, "Ann", "I started knitting a scarf", minutes=40)  # another sitting
    time.advance(days=1)

    found = memory.retrieve(
        task_descriptor="marathon Boston finish time",
        trust=FULL_TRUST,
        memory_types=["episodic"],
        limit=2,
    ).records

    assert reply.id in [record.id for record in found]


def test_forgetting_a_turn_takes_its_words_out_of_the_replies_search(memory: Membrane) -> None:
    question = turn(memory, "Ann", "Did you finish the marathon in Boston?", minutes=0)
    reply = turn(memory, "Ben", "Yes! In under four hours.", minutes=1)
    assert lexical(memory, "marathon Boston", reply.id) > 0

    memory.forget(question.id, "dpo", "erasure request")

    assert lexical(memory, "marathon Boston", reply.id) == 0
    assert lexical(memory, "four hours", reply.id) > 0  # its own words stay
    assert len(memory.views.text.said_after) == 0


def test_an_explanation_names_the_turns_a_reply_was_searched_with(memory: Membrane) -> None:
    question = turn(memory, "Ann", "Did you go to the pottery class?", minutes=0)
    reply = turn(memory, "Ben", "Yes, last week", minutes=1)

    def searched_with() -> dict[str, list[str]]:
        result = memory.retrieve("pottery class", trust=FULL_TRUST, explain=True)
        return {e.record_id: e.searched_with for e in result.explanations}

    assert searched_with() == {question.id: [], reply.id: [question.id]}
    memory.forget(question.id, "dpo", "erasure request")
    # the question's words are gone with it: the reply shares none with the task any more
    assert searched_with() == {}


def test_a_reply_returned_redacted_names_no_turns(memory: Membrane) -> None:
    from membrane_es import TrustContext

    turn(memory, "Ann", "Did you go to the pottery class?", minutes=0, sensitivity="medium")
    reply = turn(memory, "Ben", "Yes, pottery last week", minutes=1, sensitivity="medium")

    result = memory.retrieve("pottery", trust=TrustContext(max_sensitivity="low"), explain=True)

    # its words, and its question's, are no evidence for a reader who may not see them: a
    # redacted reply is no answer, and names nothing
    assert reply.id not in {e.record_id for e in result.explanations}
    assert result.records == []


def test_a_read_as_of_before_the_reply_counts_the_words_once(
    memory: Membrane, clock: MonotonicClock, time: ManualTime
) -> None:
    question = turn(memory, "Ann", "Did you finish the marathon in Boston?", minutes=0)
    time.advance(minutes=5)
    before_reply = clock.now()
    then = memory.views.table.size  # the rows that existed before the reply
    time.advance(minutes=5)
    reply = turn(memory, "Ben", "Yes! In under four hours.", minutes=1)
    text, rows = memory.views.text, memory.views.table.row_of
    size = memory.views.table.size

    assert [found.tolist() for found, _ in text.postings("marathon", then)] == [[rows[question.id]]]
    assert [found.tolist() for found, _ in text.postings("marathon", size)] == [
        [rows[question.id], rows[reply.id]]
    ]
    # the reply's document goes on with the question's (at half weight, and no more of it
    # than the reply says itself)
    own = text.own_lengths(np.array([rows[question.id], rows[reply.id]]))
    borrowed = 0.5 * min(own[0], own[1])
    assert text.corpus(size)[1] - text.corpus(then)[1] == pytest.approx(own[1] + borrowed)
    assert lexical(memory, "marathon Boston", reply.id) > 0
    result = memory.retrieve(
        task_descriptor="marathon Boston",
        trust=FULL_TRUST,
        memory_types=["episodic"],
        as_of=before_reply,
    )
    assert [record.id for record in result.records] == [question.id]


@pytest.mark.parametrize("seed", range(3))
def test_rebuilt_views_equal_the_live_ones_through_forgetting(
    memory: Membrane, time: ManualTime, seed: int
) -> None:
    rng = random.Random(seed)
    kept: list[str] = []
    for i in range(30):
        speaker = rng.choice(["Ann", "Ben", "Cid"])
        words = " ".join(rng.sample(WORDS, 3))
        kept.append(turn(memory, speaker, words, minutes=i * rng.choice([1, 1, 40])).id)
        if rng.random() < 0.2:
            memory.forget(kept.pop(rng.randrange(len(kept))), "dpo", "erasure request")
        time.advance(minutes=1)

    rebuilt = ReadModel.rebuild(memory.application)

    assert_same_views(memory.views, rebuilt)
    for word in WORDS:
        for (rows_a, counts_a), (rows_b, counts_b) in zip(
            memory.views.text.postings(word, memory.views.table.size),
            rebuilt.text.postings(word, rebuilt.table.size),
            strict=True,
        ):
            np.testing.assert_array_equal(rows_a, rows_b)
            np.testing.assert_array_equal(counts_a, counts_b)


WORDS = ["marathon", "pottery", "beagle", "sunrise", "painting", "camping", "guitar", "lake"]


def test_a_checkpoint_keeps_which_turn_was_said_after_which(
    tmp_path: Path, clock: MonotonicClock
) -> None:
    with Membrane.open(tmp_path, clock=clock, embedder=None) as memory:
        turn(memory, "Ann", "Did you finish the marathon in Boston?", minutes=0)
        reply = turn(memory, "Ben", "Yes! In under four hours.", minutes=1)
        before = lexical(memory, "marathon Boston", reply.id)
        memory.checkpoint()

    with Membrane.open(tmp_path, clock=clock, embedder=None) as memory:
        assert len(memory.views.text.said_after) == 1
        assert lexical(memory, "marathon Boston", reply.id) == pytest.approx(before)
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))


@pytest.mark.parametrize("seed", range(3))
def test_the_links_answer_as_a_list_of_pairs_would(seed: int) -> None:
    """Replies to rows, earlier turns of rows and the pairs below a row, through sorted and
    newer pairs alike (more than one sorted copy's worth), and after a removal."""
    rng = random.Random(seed)
    links = SaidAfter()
    pairs: list[tuple[int, int]] = []
    for turn_row in range(2, 12_000):
        if rng.random() < 0.6:
            earlier = sorted(rng.sample(range(max(0, turn_row - 50), turn_row), 2))
            links.add([(turn_row, earlier)])
            pairs += [(turn_row, row) for row in earlier]
        if turn_row % 3000 == 0:
            gone = set(rng.sample(range(turn_row), 40))
            links.remove(sorted(gone))
            pairs = [(t, e) for t, e in pairs if t not in gone and e not in gone]
        if turn_row % 997 == 0:
            rows = np.array(sorted(rng.sample(range(turn_row), 200)), dtype=np.int64)
            at = {int(r): i for i, r in enumerate(rows)}
            turns, places = links.replies(rows)
            expected = sorted((t, at[e]) for t, e in pairs if e in at)
            assert sorted(zip(turns.tolist(), places.tolist(), strict=True)) == expected
            asked = rows[::-1].copy()  # any order
            at = {int(r): i for i, r in enumerate(asked)}
            places, earlier_rows = links.earlier_of(asked)
            expected = sorted((at[t], e) for t, e in pairs if t in at)
            assert sorted(zip(places.tolist(), earlier_rows.tolist(), strict=True)) == expected
            below = links.below(turn_row // 2)
            assert list(zip(*(c.tolist() for c in below), strict=True)) == [
                p for p in pairs if p[0] < turn_row // 2
            ]
    assert len(links) == len(pairs)


def hand_written_turn(memory: Membrane, names: list[str], **fields: Any) -> MemoryRecord:
    """An episodic record written by hand that names ``names`` as the turns it came after."""
    record = episodic("Sounds good", **fields)
    record["payload"]["environment"] = {"context": {"said_after": names}}
    return memory.create_record(record)


def test_a_record_written_by_hand_borrows_only_the_words_capture_would_lend(
    memory: Membrane,
) -> None:
    """Only earlier episodic records of its own scope, no more sensitive, lend it words: a
    reader allowed the record must not find it by words of one they may not see."""
    secret = turn(memory, "Ann", "the vault code is tangerine", sensitivity="high")
    elsewhere = turn(memory, "Ann", "the meeting moved to Lisbon", scope="project:other")
    fact = memory.create_record(semantic("orchid", "runs_on", "kubernetes"))
    lent = turn(memory, "Ann", "we should adopt a beagle")
    names = [secret.id, elsewhere.id, fact.id, lent.id, lent.id, "no-such-record"]

    reply = hand_written_turn(memory, names)

    assert said_after(reply) == names  # kept as written: the content is the caller's
    for words in ("vault tangerine", "meeting Lisbon", "orchid kubernetes"):
        assert lexical(memory, words, reply.id) == 0
    assert lexical(memory, "adopt beagle", reply.id) > 0
    assert memory.views.text.said_after.pairs()[1].tolist() == [memory.views.table.row_of[lent.id]]


def test_a_question_naming_a_participant_ranks_what_they_said(
    memory: Membrane, time: ManualTime
) -> None:
    asked = turn(memory, "Caroline", "Melanie, where do you go camping?", minutes=0)
    said = turn(memory, "Melanie", "Mostly at the beach with my family", minutes=1)
    time.advance(days=1)

    result = memory.retrieve(
        task_descriptor="Where has Melanie camped?", trust=FULL_TRUST, explain=True
    )

    assert result.records[0].id == said.id
    scores = {e.record_id: e.speaker_score for e in result.explanations}
    assert scores[said.id] == 1.0 and scores[asked.id] == 0.0
    unnamed = memory.retrieve(task_descriptor="camping", trust=FULL_TRUST, explain=True)
    assert all(e.speaker_score is None for e in unnamed.explanations)


def test_a_question_in_the_first_or_second_person_ranks_the_chat_role_it_means(
    memory: Membrane, time: ManualTime
) -> None:
    told = turn(memory, "user", "I fixed the kitchen shelf and replaced the toaster", minutes=0)
    echoed = turn(
        memory, "assistant", "Great job fixing the kitchen shelf and the toaster!", minutes=1
    )
    time.advance(days=1)

    def speaker_scores(question: str) -> dict[str, float | None]:
        result = memory.retrieve(task_descriptor=question, trust=FULL_TRUST, explain=True)
        return {e.record_id: e.speaker_score for e in result.explanations}

    mine = speaker_scores("Which kitchen items did I fix?")
    assert mine == {told.id: 1.0, echoed.id: 0.0}
    yours = speaker_scores("What did you say about the kitchen shelf?")
    assert yours == {told.id: 0.0, echoed.id: 1.0}
    both = speaker_scores("What did you tell me about my kitchen shelf?")
    assert both == {told.id: 1.0, echoed.id: 1.0}
    assert set(speaker_scores("kitchen shelf").values()) == {None}
    # Named people are named by name only: "I" is nobody in a conversation between them.
    ann = turn(memory, "Ann", "I fixed the kitchen shelf too", minutes=2)
    assert speaker_scores("Which kitchen items did I fix?")[ann.id] == 0.0


def test_roles_are_named_by_person_whatever_the_contraction() -> None:
    assert roles_named("I'm sure I've said it") == USER_ROLES
    assert roles_named("What were you're thoughts?") == ASSISTANT_ROLES
    assert roles_named("Did YOU tell ME?") == USER_ROLES | ASSISTANT_ROLES
    assert roles_named("Where has Melanie camped?") == frozenset()


def test_who_said_each_turn_survives_a_checkpoint_and_forgetting(
    tmp_path: Path, clock: MonotonicClock
) -> None:
    with Membrane.open(tmp_path, clock=clock, embedder=None) as memory:
        gone = turn(memory, "Ann", "I adopted a dog", minutes=0)
        kept = turn(memory, "Ann Lee", "A beagle puppy", minutes=1)
        memory.checkpoint()

    with Membrane.open(tmp_path, clock=clock, embedder=None) as memory:
        speakers = memory.views.speakers
        rows = {memory.views.table.ids[int(r)] for r in speakers.named_in("Ann Lee")}
        assert rows == {gone.id, kept.id}
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))
        memory.forget(gone.id, actor="user", rationale="asked to")
        rows = {memory.views.table.ids[int(r)] for r in speakers.named_in("Ann Lee")}
        assert rows == {kept.id}


def test_a_short_turn_borrows_no_more_of_a_long_ones_words_than_it_says(
    memory: Membrane,
) -> None:
    long = turn(
        memory, "assistant", "Here are ideas for a trip to Lisbon: " + "visit museums " * 60
    )
    short = turn(memory, "user", "I booked the hotel near the river", minutes=1)
    text, rows = memory.views.text, memory.views.table.row_of
    own = text.own_lengths(np.array([rows[long.id], rows[short.id]]))

    (length,) = text.lengths(np.array([rows[short.id]]))

    assert own[0] > 10 * own[1]
    assert length == pytest.approx(own[1] + 0.5 * own[1])  # its own length's worth, not 60 %
    assert 0 < lexical(memory, "Lisbon", short.id) < lexical(memory, "Lisbon", long.id)


def test_borrowed_words_lift_a_reply_up_to_the_turn_it_borrowed_from_never_above(
    memory: Membrane,
) -> None:
    said = turn(
        memory,
        "Ann",
        "Last spring I ran the Boston marathon with my brother and two friends from the running"
        " club at work",
    )
    reply = turn(memory, "Ben", "Wow, a marathon! Was the marathon hard?", minutes=1)
    turn(memory, "Ann", "I started knitting a scarf for my sister", minutes=40)  # another sitting
    text, rows = memory.views.text, memory.views.table.row_of
    both = np.array([rows[said.id], rows[reply.id]])
    size = memory.views.table.size

    scored = bm25(text, "Boston marathon", size, both)
    alone = bm25(text, "marathon", size, both)

    assert scored is not None and alone is not None
    # Its own "marathon" twice and the borrowed "Boston" would put the reply above Ann's turn,
    # which says both; borrowing lifts it as far as Ann's turn, not past it.
    assert scored[0][1] == pytest.approx(scored[0][0])
    # Its own words alone may take it higher: "marathon" said twice in a short turn.
    assert alone[0][1] > alone[0][0]

"""Memories that last: decay ranks captured memories, it never takes them out of retrieval.

Captured turns are read back after a day, two months and two years of simulated clock: they
are all still returned (each shares a word with the task), the one it is about first, and
their salience follows the engine's long-lived profile (or the one given at capture).
"""

from __future__ import annotations

import pytest

from membrane_es import DecayProfile, Membrane
from membrane_es.errors import ValidationError
from membrane_es.schema import MemoryType
from membrane_es.timekeeping.decay import DAY, ENGINE_HALF_LIFE
from tests.unit.builders import FULL_TRUST, semantic
from tests.unit.conftest import ManualTime

TURNS = (
    "Caroline went to the LGBTQ support group on Sunday",
    "Melanie painted a sunrise over the lake last year",
    "Caroline is thinking about adopting children",
)


def capture_turns(memory: Membrane) -> list[str]:
    return [
        memory.capture_memory({"speaker": "Caroline", "text": text}, summary=text).primary_record.id
        for text in TURNS
    ]


@pytest.mark.parametrize("days", [1, 60, 730], ids=["1 day", "60 days", "2 years"])
def test_captured_turns_are_still_retrieved_later(
    memory: Membrane, time: ManualTime, days: int
) -> None:
    turns = capture_turns(memory)
    time.advance(days=days)

    found = memory.retrieve(
        task_descriptor="Caroline painted sunrise lake",  # every turn shares a word with it
        trust=FULL_TRUST,
        memory_types=["episodic"],
        limit=10,
    ).records

    assert [record.id for record in found][0] == turns[1]
    assert set(turns) <= {record.id for record in found}


@pytest.mark.parametrize("days", [1, 60, 730], ids=["1 day", "60 days", "2 years"])
def test_salience_follows_the_long_lived_profile(
    memory: Membrane, time: ManualTime, days: int
) -> None:
    turn = capture_turns(memory)[0]
    time.advance(days=days)

    salience = memory.retrieve_by_id(turn, trust=FULL_TRUST).salience

    half_lives = days * DAY / ENGINE_HALF_LIFE[MemoryType.EPISODIC]
    assert salience == pytest.approx(2.0**-half_lives, rel=1e-6)


def test_a_turn_faded_by_underflow_is_kept_below_fresher_ones(
    memory: Membrane, time: ManualTime
) -> None:
    short = {"half_life_seconds": 60}
    old = memory.capture_memory({"text": "the first deploy failed"}, decay=short)
    time.advance(days=730)  # hundreds of thousands of half-lives: the salience is 0
    new = memory.capture_memory({"text": "the second deploy failed"}, decay=short)

    found = memory.retrieve(task_descriptor="deploy failed", memory_types=["episodic"]).records

    assert [record.id for record in found] == [new.primary_record.id, old.primary_record.id]
    assert found[1].salience == 0.0


def test_capture_takes_a_decay_profile_and_a_pin(memory: Membrane, time: ManualTime) -> None:
    profile = DecayProfile(half_life_seconds=DAY, min_salience=0.2)
    fading = memory.capture_memory({"text": "a passing remark"}, decay=profile).primary_record
    pinned = memory.capture_memory({"text": "the user's name is Ada"}, pinned=True).primary_record
    as_dict = memory.capture_memory(
        {"text": "a note"}, decay={"half_life_seconds": 7 * DAY}
    ).primary_record
    time.advance(days=60)

    assert fading.lifecycle.decay == profile
    assert as_dict.lifecycle.decay.half_life_seconds == 7 * DAY
    assert pinned.lifecycle.pinned
    assert memory.retrieve_by_id(fading.id, trust=FULL_TRUST).salience == pytest.approx(0.2)
    assert memory.retrieve_by_id(pinned.id, trust=FULL_TRUST).salience == 1.0


@pytest.mark.parametrize(
    ("decay", "field"),
    [
        ({"half_life_seconds": 0}, "decay.half_life_seconds"),
        ({"min_salience": -0.5}, "decay.min_salience"),
        ({"half_life": 5}, "decay"),
        ("fast", "decay"),
    ],
)
def test_a_bad_decay_profile_is_refused_naming_the_field(
    memory: Membrane, decay: object, field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        memory.capture_memory({"text": "x"}, decay=decay)  # type: ignore[arg-type]

    assert raised.value.field == field
    assert memory.retrieve(trust=FULL_TRUST).records == []


def test_a_bad_pin_flag_is_refused(memory: Membrane) -> None:
    with pytest.raises(ValidationError) as raised:
        memory.capture_memory({"text": "x"}, pinned="yes")  # type: ignore[arg-type]

    assert raised.value.field == "pinned"


def test_create_takes_a_decay_profile_and_a_pin(memory: Membrane, time: ManualTime) -> None:
    record = memory.create_record(
        semantic(lifecycle={"decay": {"half_life_seconds": 60}, "pinned": True})
    )
    time.advance(days=730)

    assert memory.retrieve_by_id(record.id, trust=FULL_TRUST).salience == 1.0

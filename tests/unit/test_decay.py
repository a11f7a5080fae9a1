"""Decay, reinforcement and penalties (spec §5.1, §5.4; DESIGN §6, §8).

Salience is computed from a base and the moment it was set, never written back: reading
later gives a lower value without any new event. Reads use ``as_of`` to evaluate decay at
an exact instant.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from membrane_es import Membrane, MemoryRecord
from membrane_es.schema import DEFAULT_REINFORCEMENT_GAIN
from tests.unit.builders import FULL_TRUST, log_size, read, semantic
from tests.unit.conftest import START, ManualTime

HOUR = timedelta(hours=1)


def fact(
    memory: Membrane,
    salience: float,
    *,
    half_life: int = 3600,
    floor: float = 0.0,
    gain: float | None = None,
    max_age: int = 0,
) -> MemoryRecord:
    decay: dict[str, Any] = {
        "half_life_seconds": half_life,
        "min_salience": floor,
        "max_age_seconds": max_age,
    }
    if gain is not None:
        decay["reinforcement_gain"] = gain
    return memory.create_record(semantic(salience=salience, lifecycle={"decay": decay}))


def salience_at(memory: Membrane, record_id: str, moment: datetime) -> float:
    return memory.retrieve_by_id(record_id, trust=FULL_TRUST, as_of=moment).salience


def salience_after_last_change(memory: Membrane, record_id: str) -> float:
    """Salience at the instant of the record's last event (no decay since)."""
    changed_at = read(memory, record_id).updated_at
    assert changed_at is not None
    return salience_at(memory, record_id, changed_at)


# --- the curve --------------------------------------------------------------------------------


def test_salience_halves_after_one_half_life(memory: Membrane) -> None:
    record = fact(memory, 0.8)

    assert salience_at(memory, record.id, START + HOUR) == pytest.approx(0.4)


def test_salience_is_a_quarter_after_two_half_lives(memory: Membrane) -> None:
    record = fact(memory, 0.8)

    assert salience_at(memory, record.id, START + 2 * HOUR) == pytest.approx(0.2)


def test_salience_is_unchanged_at_creation(memory: Membrane) -> None:
    record = fact(memory, 0.8)

    assert salience_at(memory, record.id, START) == 0.8


def test_salience_never_falls_below_the_floor(memory: Membrane) -> None:
    record = fact(memory, 0.3, floor=0.2)

    assert salience_at(memory, record.id, START + 10 * HOUR) == 0.2


def test_half_life_sets_the_pace(memory: Membrane) -> None:
    slow = fact(memory, 0.8, half_life=7200)

    assert salience_at(memory, slow.id, START + 2 * HOUR) == pytest.approx(0.4)


def test_record_past_its_max_age_reads_zero_despite_the_floor(memory: Membrane) -> None:
    record = fact(memory, 0.9, floor=0.2, max_age=7200)

    assert salience_at(memory, record.id, START + 2 * HOUR) == 0.0


def test_record_just_before_its_max_age_still_decays_normally(memory: Membrane) -> None:
    record = fact(memory, 0.8, max_age=7200)

    moment = START + 2 * HOUR - timedelta(seconds=1)
    assert salience_at(memory, record.id, moment) == pytest.approx(0.2, rel=1e-3)


def test_a_later_read_is_lower_with_no_new_event(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, 0.8)
    events = log_size(memory)

    time.advance(hours=1)
    later = read(memory, record.id)

    assert later.salience == pytest.approx(0.4)
    assert log_size(memory) == events
    assert len(memory.history(record.id, trust=FULL_TRUST)) == 1


def test_decay_does_not_compound_across_reads(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, 0.8)

    for _ in range(12):
        time.advance(minutes=5)
        read(memory, record.id)

    assert salience_at(memory, record.id, START + HOUR) == pytest.approx(0.4)


def test_updated_at_is_not_moved_by_decay(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, 0.8)

    time.advance(hours=5)

    assert read(memory, record.id).updated_at == record.updated_at


# --- reinforce --------------------------------------------------------------------------------


def test_default_reinforcement_gain_is_a_tenth(memory: Membrane) -> None:
    record = memory.create_record(semantic())

    assert DEFAULT_REINFORCEMENT_GAIN == 0.1
    assert record.lifecycle.decay.reinforcement_gain == 0.1


def test_reinforce_adds_the_default_gain(memory: Membrane) -> None:
    record = memory.create_record(semantic(salience=0.5))

    memory.reinforce(record.id, "agent", "it helped")

    assert read(memory, record.id).salience == pytest.approx(0.6)


def test_reinforce_adds_the_record_gain(memory: Membrane) -> None:
    record = fact(memory, 0.5, gain=0.3)

    memory.reinforce(record.id, "agent", "it helped")

    assert read(memory, record.id).salience == pytest.approx(0.8)


def test_reinforce_is_capped_at_one(memory: Membrane) -> None:
    record = fact(memory, 0.95, gain=0.3)

    memory.reinforce(record.id, "agent", "it helped")

    assert salience_after_last_change(memory, record.id) == 1.0


def test_reinforce_pulls_salience_above_one_down_to_one(memory: Membrane) -> None:
    record = memory.create_record(semantic(salience=1.7))

    memory.reinforce(record.id, "agent", "it helped")

    assert salience_after_last_change(memory, record.id) == 1.0


def test_reinforce_with_zero_gain_keeps_salience(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, 0.8, gain=0.0)
    time.advance(hours=1)

    memory.reinforce(record.id, "agent", "it helped")

    assert read(memory, record.id).salience == pytest.approx(0.4)


def test_reinforce_starts_from_the_decayed_value(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, 0.8)
    time.advance(hours=1)

    memory.reinforce(record.id, "agent", "it helped")

    assert read(memory, record.id).salience == pytest.approx(0.5)


def test_reinforce_resets_the_decay_clock(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, 0.8)
    time.advance(hours=1)
    memory.reinforce(record.id, "agent", "it helped")  # 0.4 + 0.1

    time.advance(hours=1)

    assert read(memory, record.id).salience == pytest.approx(0.25)


def test_reinforce_moves_last_reinforced_at(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, 0.8)
    moment = time.advance(hours=3)

    memory.reinforce(record.id, "agent", "it helped")

    reinforced_at = read(memory, record.id).lifecycle.last_reinforced_at
    assert reinforced_at is not None and reinforced_at >= moment
    assert record.lifecycle.last_reinforced_at == START


def test_reinforce_is_audited(memory: Membrane) -> None:
    record = memory.create_record(semantic())

    memory.reinforce(record.id, "agent", "it helped")

    entry = read(memory, record.id).audit_log[-1]
    assert (entry.action, entry.actor, entry.rationale) == ("reinforce", "agent", "it helped")


# --- penalize ---------------------------------------------------------------------------------


def test_penalize_subtracts_the_amount(memory: Membrane) -> None:
    record = fact(memory, 0.8, floor=0.1)

    memory.penalize(record.id, 0.25, "agent", "misled")

    assert read(memory, record.id).salience == pytest.approx(0.55)


def test_penalize_is_floored_at_min_salience(memory: Membrane) -> None:
    record = fact(memory, 0.8, floor=0.1)

    memory.penalize(record.id, 100, "agent", "misled")

    assert read(memory, record.id).salience == 0.1


def test_penalize_without_a_floor_reaches_zero(memory: Membrane) -> None:
    record = fact(memory, 0.8)

    memory.penalize(record.id, 5, "agent", "misled")

    assert read(memory, record.id).salience == 0.0


def test_penalize_by_zero_changes_nothing(memory: Membrane) -> None:
    record = fact(memory, 0.8)

    memory.penalize(record.id, 0, "agent", "no harm")

    assert read(memory, record.id).salience == pytest.approx(0.8)


def test_penalize_does_not_move_last_reinforced_at(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, 0.8)
    time.advance(hours=1)

    memory.penalize(record.id, 0.1, "agent", "misled")

    assert read(memory, record.id).lifecycle.last_reinforced_at == START


def test_penalized_salience_keeps_decaying(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, 0.8)
    time.advance(hours=1)
    memory.penalize(record.id, 0.2, "agent", "misled")  # 0.4 - 0.2

    time.advance(hours=1)

    assert read(memory, record.id).salience == pytest.approx(0.1)


def test_penalize_is_audited_as_decay_with_a_prefix(memory: Membrane) -> None:
    record = memory.create_record(semantic())

    memory.penalize(record.id, 0.3, "agent", "misled")

    entry = read(memory, record.id).audit_log[-1]
    assert (entry.action, entry.actor, entry.rationale) == ("decay", "agent", "penalty: misled")


# --- retracted records ------------------------------------------------------------------------


def test_retracted_record_stays_at_zero_despite_the_floor(
    memory: Membrane, time: ManualTime
) -> None:
    record = fact(memory, 0.9, floor=0.3)
    memory.retract(record.id, "agent", "wrong")

    time.advance(days=30)

    assert read(memory, record.id).salience == 0.0


def test_retracted_record_reads_zero_from_the_moment_of_retraction(
    memory: Membrane, time: ManualTime
) -> None:
    record = fact(memory, 0.9)
    time.advance(minutes=10)
    memory.retract(record.id, "agent", "wrong")
    retracted_at = read(memory, record.id).updated_at
    assert retracted_at is not None

    assert salience_at(memory, record.id, retracted_at - timedelta(microseconds=1)) > 0
    assert salience_at(memory, record.id, retracted_at) == 0.0


# --- pinning ----------------------------------------------------------------------------------


def test_pinned_record_keeps_its_salience(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, 0.8)
    time.advance(hours=1)
    memory.pin(record.id)
    pinned_at = time.current
    time.advance(hours=10)
    assert salience_at(memory, record.id, time.current) == pytest.approx(0.4)
    assert salience_at(memory, record.id, pinned_at) == pytest.approx(0.4)


def test_unpinned_record_decays_again_from_its_pinned_value(
    memory: Membrane, time: ManualTime
) -> None:
    record = fact(memory, 0.8)
    memory.pin(record.id)
    time.advance(hours=5)
    memory.unpin(record.id)
    time.advance(hours=1)
    assert salience_at(memory, record.id, time.current) == pytest.approx(0.4)


def test_pinning_shows_in_the_lifecycle(memory: Membrane) -> None:
    record = fact(memory, 0.8)
    memory.pin(record.id)
    assert read(memory, record.id).lifecycle.pinned is True
    memory.unpin(record.id)
    assert read(memory, record.id).lifecycle.pinned is False

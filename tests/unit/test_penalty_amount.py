"""A penalty amount is stored as the float it was checked as, however large an int it came as."""

from __future__ import annotations

from membrane_es import Membrane
from tests.unit.builders import semantic


def test_a_huge_integer_amount_penalises_to_the_floor(memory: Membrane) -> None:
    record = memory.create_record(semantic("fact")).id
    memory.penalize(record, 2**64, "t", "misled")
    assert memory.application.load(record).state.salience_base == 0.0

"""``Membrane.record_ids``: the ids a reader may read in full, oldest first, loading none."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from membrane_es import Membrane, TrustContext, ValidationError

OWNER = TrustContext(max_sensitivity="hyper")


def _record(record_id: str, scope: str = "", sensitivity: str = "low") -> dict[str, object]:
    return {
        "id": record_id,
        "type": "working",
        "scope": scope,
        "sensitivity": sensitivity,
        "payload": {"kind": "working", "thread_id": record_id},
    }


@pytest.fixture
def memory() -> Iterator[Membrane]:
    with Membrane.in_memory(embedder=None) as store:
        for record_id, scope in [("a", "s1"), ("b", "s2"), ("c", "s1"), ("d", "")]:
            store.create_record(_record(record_id, scope))
        yield store


def test_ids_come_in_creation_order(memory: Membrane) -> None:
    assert memory.record_ids(trust=OWNER) == ["a", "b", "c", "d"]


def test_scopes_narrow_the_listing_unscoped_records_stay(memory: Membrane) -> None:
    assert memory.record_ids(trust=TrustContext(scopes=["s1"])) == ["a", "c", "d"]


def test_records_the_reader_would_see_redacted_are_left_out(memory: Membrane) -> None:
    memory.create_record(_record("m", "s1", "medium"))  # one above low: redacted for it
    memory.create_record(_record("h", "s1", "high"))
    assert memory.record_ids(trust=TrustContext(scopes=["s1"])) == ["a", "c", "d"]
    medium = TrustContext(max_sensitivity="medium", scopes=["s1"])
    assert memory.record_ids(trust=medium) == ["a", "c", "d", "m"]


def test_types_retractions_and_past_moments(memory: Membrane) -> None:
    memory.create_record(
        {
            "id": "e",
            "type": "semantic",
            "payload": {"kind": "semantic", "subject": "x", "predicate": "is", "object": "y"},
            "provenance": {"sources": [{"kind": "observation", "ref": "test"}]},
        }
    )
    assert memory.record_ids(trust=OWNER, memory_types=["semantic"]) == ["e"]
    before = datetime.now(UTC)
    memory.retract("a", "tester", "wrong")
    assert "a" not in memory.record_ids(trust=OWNER)
    assert memory.record_ids(trust=OWNER, include_retracted=True)[0] == "a"
    assert memory.record_ids(trust=OWNER, as_of=before) == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"trust": None}, "trust"),
        ({"memory_types": ["dream"]}, "memory_types"),
        ({"as_of": datetime(2026, 1, 1)}, "as_of"),  # naive: refused
    ],
)
def test_bad_input_names_the_field(
    memory: Membrane, arguments: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        memory.record_ids(**arguments)
    assert raised.value.field.startswith(field)

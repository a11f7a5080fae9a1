"""A new record's id: one the caller gives is checked unused; one the engine makes (a fresh
UUIDv4) is not looked up, since it names no record already written and the log refuses a
second creation under one id whatever the reason."""

from __future__ import annotations

import uuid

import pytest

from membrane_es import AlreadyExistsError, Membrane
from tests.unit.builders import semantic


@pytest.fixture
def looked_up(memory: Membrane, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids the engine looks up in the log from now on."""
    application = memory.application
    seen: list[str] = []
    exists = application.exists

    def spy(record_id: str) -> bool:
        seen.append(record_id)
        return exists(record_id)

    monkeypatch.setattr(application, "exists", spy)
    return seen


def test_an_id_the_engine_makes_is_not_looked_up(memory: Membrane, looked_up: list[str]) -> None:
    made = memory.create_record(semantic())
    assert uuid.UUID(made.id).version == 4
    assert looked_up == []
    assert memory.retrieve_by_id(made.id).id == made.id


def test_records_made_in_a_batch_get_ids_of_their_own(
    memory: Membrane, looked_up: list[str]
) -> None:
    with memory.batch():
        made = [memory.create_record(semantic(subject=f"s{i}")).id for i in range(50)]
    assert len(set(made)) == 50
    assert looked_up == []


def test_an_id_the_caller_gives_is_looked_up_and_a_taken_one_refused(
    memory: Membrane, looked_up: list[str]
) -> None:
    memory.create_record(semantic(id="taken"))
    with pytest.raises(AlreadyExistsError):
        memory.create_record(semantic(id="taken"))
    assert looked_up == ["taken", "taken"]


def test_a_revision_given_no_id_is_not_looked_up(memory: Membrane, looked_up: list[str]) -> None:
    fact = memory.create_record(semantic())
    new = memory.supersede(fact.id, semantic(evidence=True), "ops", "moved")
    assert new.id not in looked_up
    assert memory.retrieve_by_id(new.id).id == new.id

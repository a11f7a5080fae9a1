"""Resolution on write: a repeated fact is one record, a changed fact supersedes the old one,
every earlier value stays readable as of its time and in history."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from membrane_es import Membrane, MemoryRecord, ValidationError
from membrane_es.commands.messages import CaptureMemory
from membrane_es.engine import EngineOptions
from membrane_es.schema.enums import MemoryType
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import FULL_TRUST, competence, entity, semantic
from tests.unit.conftest import ManualTime


@pytest.fixture
def store(clock: MonotonicClock) -> Iterator[Membrane]:
    engine = Membrane.in_memory(clock=clock, embedder=None)
    yield engine
    engine.close()


def active(memory: Membrane, predicate: str) -> list[MemoryRecord]:
    ids = memory.record_ids(trust=FULL_TRUST, memory_types=["semantic"])
    records = [memory.retrieve_by_id(i, trust=FULL_TRUST) for i in ids]
    return [
        r for r in records if getattr(r.payload, "predicate", "") == predicate and r.salience > 0
    ]


def test_a_repeated_observation_reinforces_the_fact_known(store: Membrane) -> None:
    first = store.ingest_observation("Dana", "diet", "vegetarian", source="chat-1")
    again = store.ingest_observation(" dana ", "Diet", "Vegetarian.", source="chat-2")

    assert again.id == first.id
    assert again.resolution is not None and again.resolution.outcome == "reinforced"
    assert [s.ref for s in again.provenance.sources] == ["chat-1", "chat-2"]
    assert [e.event for e in store.history(first.id, trust=FULL_TRUST)][-1] == "Corroborated"
    assert len(active(store, "diet")) == 1


def test_records_of_another_scope_or_sensitivity_are_never_merged(store: Membrane) -> None:
    a = store.ingest_observation("Dana", "diet", "vegan", scope="user:dana")
    b = store.ingest_observation("Dana", "diet", "vegan", scope="user:bob")
    c = store.ingest_observation("Dana", "diet", "vegan", scope="user:dana", sensitivity="high")

    assert len({a.id, b.id, c.id}) == 3
    assert {r.resolution.outcome for r in (a, b, c) if r.resolution} == {"created"}


def test_a_new_value_of_a_single_valued_predicate_supersedes_the_old(
    store: Membrane, time: ManualTime
) -> None:
    lisbon = store.ingest_observation("Dana", "city", "Lisbon", scope="user:dana")
    before = time.advance(days=30)
    time.advance(days=1)
    faro = store.ingest_observation("Dana", "city", "Faro", scope="user:dana")

    assert faro.resolution is not None
    assert faro.resolution.outcome == "superseded"
    assert faro.resolution.records == [lisbon.id]
    assert "city is single-valued" in faro.resolution.rationale
    assert [r.id for r in active(store, "city")] == [faro.id]
    old = store.retrieve_by_id(lisbon.id, trust=FULL_TRUST)
    assert old.payload.revision.superseded_by == faro.id  # type: ignore[union-attr]
    was = store.retrieve_by_id(lisbon.id, trust=FULL_TRUST, as_of=before)
    assert was.payload.object == "Lisbon" and was.salience > 0  # type: ignore[union-attr]
    assert "Superseded" in [e.event for e in store.history(lisbon.id, trust=FULL_TRUST)]
    assert any(r.predicate == "supersedes" and r.target_id == lisbon.id for r in faro.relations)


def test_many_valued_and_unknown_predicates_keep_both_values(store: Membrane) -> None:
    chess = store.ingest_observation("Dana", "likes", "chess")
    go = store.ingest_observation("Dana", "likes", "go")
    red = store.ingest_observation("Dana", "mood", "calm")
    blue = store.ingest_observation("Dana", "mood", "curious")

    assert go.resolution is not None and go.resolution.outcome == "kept_alongside"
    assert go.resolution.records == [chess.id]
    assert "many-valued" in go.resolution.rationale
    assert blue.resolution is not None and blue.resolution.outcome == "kept_alongside"
    assert "not known to be single-valued" in blue.resolution.rationale
    assert {r.id for r in active(store, "mood")} == {red.id, blue.id}


def test_a_declared_predicate_is_single_valued_from_then_on(store: Membrane) -> None:
    assert "mood" not in store.predicates()["single"]
    vocabulary = store.declare_predicates(single=["Mood"], many=["city"])
    assert "mood" in vocabulary["single"] and "city" in vocabulary["many"]
    store.ingest_observation("Dana", "mood", "calm")
    curious = store.ingest_observation("Dana", "mood", "curious")
    assert curious.resolution is not None and curious.resolution.outcome == "superseded"
    store.ingest_observation("Dana", "city", "Faro")
    porto = store.ingest_observation("Dana", "city", "Porto")
    assert porto.resolution is not None and porto.resolution.outcome == "kept_alongside"


def test_a_vocabulary_refuses_what_is_not_a_list_of_predicates(store: Membrane) -> None:
    with pytest.raises(ValidationError, match="single_valued"):
        store.declare_predicates(single="city")
    with pytest.raises(ValidationError, match="many_valued"):
        EngineOptions(single_valued=("likes",), many_valued=("likes",))


def test_a_repeated_capture_derives_its_fact_once(store: Membrane) -> None:
    fact = {"subject": "Orchid", "predicate": "deploy_target", "object": "production"}
    first = store.capture_memory(fact, source_kind="observation")
    second = store.capture_memory(fact, source_kind="observation")

    derived = [r for r in first.created_records if r.type is MemoryType.SEMANTIC]
    assert len(derived) == 1
    assert not second.created_records
    (restated,) = second.resolved_records
    assert restated.id == derived[0].id
    assert restated.resolution is not None and restated.resolution.outcome == "reinforced"
    assert second.primary_record.id != first.primary_record.id  # turns are never merged
    assert any(s.ref == second.primary_record.id for s in restated.provenance.sources)
    assert any(
        r.predicate == "derived_semantic" and r.target_id == restated.id
        for r in second.primary_record.relations
    )


def test_a_capture_and_an_observation_of_one_fact_match(store: Membrane) -> None:
    captured = store.capture_memory(
        {"subject": "Dana", "predicate": "employer", "object": "Acme"}, source_kind="observation"
    )
    (fact,) = [r for r in captured.created_records if r.type is MemoryType.SEMANTIC]
    again = store.ingest_observation("Dana", "employer", "acme")
    assert again.id == fact.id  # the subject is the entity's id, compared by its name
    moved = store.capture_memory(
        {"subject": "Dana", "predicate": "employer", "object": "Globex"},
        source_kind="observation",
    )
    (new,) = moved.created_records
    assert new.resolution is not None and new.resolution.outcome == "superseded"
    assert new.resolution.records == [fact.id]


def test_create_record_resolves_entities_and_competences(store: Membrane) -> None:
    postgres = store.create_record(entity("Postgres"))
    again = store.create_record(entity("postgres"))
    aliased = store.create_record(
        entity(
            "Postgres",
            payload={"kind": "entity", "canonical_name": "Postgres", "aliases": [{"value": "pg"}]},
        )
    )
    skill = store.create_record(competence("deploy"))
    skill_again = store.create_record(competence("Deploy"))

    assert again.id == postgres.id
    assert aliased.id != postgres.id  # an alias the known entity lacks is not lost
    assert skill_again.id == skill.id


def test_a_record_with_its_own_id_or_resolve_false_is_stored_as_given(store: Membrane) -> None:
    first = store.create_record(semantic())
    own = store.create_record(semantic(id="fact-2"))
    plain = store.create_record(semantic(), resolve=False)
    observed = store.ingest_observation("service", "runs_on", "port 8080", resolve=False)

    assert len({first.id, own.id, plain.id, observed.id}) == 4
    assert own.resolution is None and plain.resolution is None
    with pytest.raises(ValidationError, match="resolve"):
        store.create_record(semantic(), resolve="no")  # type: ignore[arg-type]


def test_a_store_opened_without_resolution_keeps_every_write(clock: MonotonicClock) -> None:
    memory = Membrane.in_memory(clock=clock, embedder=None, resolve_writes=False)
    try:
        a = memory.ingest_observation("Dana", "city", "Lisbon")
        b = memory.ingest_observation("Dana", "city", "Lisbon")
        c = memory.ingest_observation("Dana", "city", "Faro", resolve=True)
        assert a.id != b.id and a.resolution is None
        assert c.resolution is not None and c.resolution.outcome == "superseded"
        assert set(c.resolution.records) == {a.id, b.id}
    finally:
        memory.close()


def test_an_earlier_value_written_late_is_stored_already_superseded(store: Membrane) -> None:
    faro = store.ingest_observation("Dana", "city", "Faro", timestamp="2026-06-01T00:00:00Z")
    lisbon = store.ingest_observation("Dana", "city", "Lisbon", timestamp="2026-01-01T00:00:00Z")

    assert lisbon.resolution is not None and lisbon.resolution.outcome == "outdated"
    assert lisbon.resolution.records == [faro.id]
    assert [r.id for r in active(store, "city")] == [faro.id]


class MovesInterpreter:
    """A deterministic interpreter deciding, for a predicate the store does not know, from
    the words of the new value: "moved to …" supersedes, "also …" keeps both, the same
    place in other words restates."""

    def interpret(self, request: CaptureMemory) -> None:
        return None

    def reconcile(self, record: MemoryRecord, existing: Sequence[MemoryRecord]) -> Any:
        value = str(getattr(record.payload, "object", ""))
        if value.startswith("moved to "):
            return {"action": "supersede", "rationale": "the new value says it moved"}
        if value.startswith("also "):
            return {"action": "keep"}
        for old in existing:
            if value.removeprefix("at ") == str(getattr(old.payload, "object", "")):
                return {"action": "reinforce", "records": [old.id]}
        return None


def test_an_interpreter_decides_for_a_predicate_the_store_does_not_know(
    clock: MonotonicClock,
) -> None:
    memory = Membrane.in_memory(clock=clock, embedder=None, interpreter=MovesInterpreter())
    try:
        home = memory.ingest_observation("Dana", "base", "Lisbon office")
        same = memory.ingest_observation("Dana", "base", "at Lisbon office")
        moved = memory.ingest_observation("Dana", "base", "moved to Faro office")
        also = memory.ingest_observation("Dana", "base", "also Porto office")
        unsure = memory.ingest_observation("Dana", "base", "Braga office")

        assert same.id == home.id and same.resolution is not None
        assert same.resolution.outcome == "reinforced"
        assert moved.resolution is not None and moved.resolution.outcome == "superseded"
        assert moved.resolution.rationale == "the new value says it moved"
        assert also.resolution is not None and also.resolution.outcome == "kept_alongside"
        assert unsure.resolution is not None and unsure.resolution.outcome == "kept_alongside"
        assert {r.id for r in active(memory, "base")} == {moved.id, also.id, unsure.id}
    finally:
        memory.close()


def test_fact_keys_survive_a_checkpoint(tmp_path: Path) -> None:
    memory = Membrane.open(tmp_path / "store", embedder=None)
    lisbon = memory.ingest_observation("Dana", "city", "Lisbon")
    memory.checkpoint()
    memory.close()
    reopened = Membrane.open(tmp_path / "store", embedder=None)
    try:
        assert reopened.ingest_observation("Dana", "city", "Lisbon").id == lisbon.id
        faro = reopened.ingest_observation("Dana", "city", "Faro")
        assert faro.resolution is not None and faro.resolution.records == [lisbon.id]
    finally:
        reopened.close()


def test_writes_in_one_batch_are_resolved_against_each_other(store: Membrane) -> None:
    with store.batch():
        a = store.ingest_observation("Dana", "city", "Lisbon")
        b = store.ingest_observation("Dana", "city", "lisbon")
        c = store.ingest_observation("Dana", "city", "Faro")
    assert b.id == a.id
    assert c.resolution is not None and c.resolution.records == [a.id]
    assert [r.id for r in active(store, "city")] == [c.id]

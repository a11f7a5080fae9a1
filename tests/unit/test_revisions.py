"""Revision operations (spec §4, behaviours R1–R10 and A1–A4 of §10.2–10.3).

Supersede, fork and merge create new records; retract and contest change a record's state.
Nothing is ever deleted: a retracted record stays readable with salience 0.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from membrane_es import (
    AlreadyExistsError,
    AlreadyReplacedError,
    EpisodicImmutableError,
    Membrane,
    MemoryRecord,
    MemoryType,
    NotFoundError,
    RevisionStatus,
    SemanticPayload,
)
from membrane_es.schema import ProvenanceKind
from tests.unit.builders import (
    audit_trail,
    competence,
    entity,
    episodic,
    log_size,
    read,
    semantic,
    working,
)


def revision_of(record: MemoryRecord) -> tuple[str, str, str]:
    """(supersedes, superseded_by, status) of a semantic record."""
    assert isinstance(record.payload, SemanticPayload)
    revision = record.payload.revision
    assert revision is not None
    return revision.supersedes, revision.superseded_by, revision.status


def edges(record: MemoryRecord) -> list[tuple[str, str]]:
    return [(r.predicate, r.target_id) for r in record.relations]


def is_uuid4(value: str) -> bool:
    return uuid.UUID(value).version == 4 and str(uuid.UUID(value)) == value


@pytest.fixture
def fact(memory: Membrane) -> MemoryRecord:
    return memory.create_record(semantic("api", "listens_on", "port 8080"))


# --- supersede ------------------------------------------------------------------------------


def test_a_record_is_replaced_only_once(memory: Membrane, fact: MemoryRecord) -> None:
    """A second supersede or merge of a replaced record would fork its revision chain."""

    def newer(obj: str) -> dict[str, Any]:
        return semantic("api", "listens_on", obj, evidence=True)

    first = memory.supersede(fact.id, newer("port 9090"), "a", "moved")
    before = log_size(memory)
    with pytest.raises(AlreadyReplacedError, match=first.id):
        memory.supersede(fact.id, newer("port 7070"), "b", "racing")
    with pytest.raises(AlreadyReplacedError):
        memory.merge([fact.id, first.id], newer("9090"), "b", "dedupe")
    assert log_size(memory) == before  # nothing written
    other = memory.create_record(semantic("api", "port", "9090"))
    merged = memory.merge([first.id, other.id], newer("9090"), "a", "same")
    with pytest.raises(AlreadyReplacedError, match=merged.id):
        memory.supersede(other.id, newer("1"), "b", "late")
    # forking stays allowed: it derives a variant, it does not replace
    assert memory.fork(first.id, newer("8443"), "a", "tls")


def test_reinforcing_a_retracted_record_audits_it_but_keeps_it_at_zero(
    memory: Membrane, fact: MemoryRecord
) -> None:
    memory.retract(fact.id, "a", "wrong")
    memory.reinforce(fact.id, "b", "still useful?")
    record = read(memory, fact.id)
    assert record.salience == 0.0
    assert [a.action for a in record.audit_log][-1] == "reinforce"
    assert memory.get_metrics()["active_records"] == 0


def test_supersede_retracts_the_old_record(memory: Membrane, fact: MemoryRecord) -> None:
    new = memory.supersede(fact.id, semantic(obj="port 9090", evidence=True), "ops", "moved")

    old = read(memory, fact.id)
    assert old.salience == 0.0
    assert revision_of(old) == ("", new.id, RevisionStatus.RETRACTED)


def test_supersede_generates_a_fresh_id(memory: Membrane, fact: MemoryRecord) -> None:
    new = memory.supersede(fact.id, semantic(evidence=True), "ops", "moved")

    assert is_uuid4(new.id)
    assert new.id != fact.id


def test_supersede_links_the_new_record_to_the_old(memory: Membrane, fact: MemoryRecord) -> None:
    new = memory.supersede(fact.id, semantic(evidence=True), "ops", "moved")

    assert edges(new) == [("supersedes", fact.id)]
    assert new.relations[0].weight == 1.0


def test_supersede_marks_the_new_revision_active(memory: Membrane, fact: MemoryRecord) -> None:
    new = memory.supersede(fact.id, semantic(evidence=True), "ops", "moved")

    assert revision_of(new) == (fact.id, "", RevisionStatus.ACTIVE)


def test_supersede_adds_a_provenance_source_for_the_old_record(
    memory: Membrane, fact: MemoryRecord
) -> None:
    given = semantic(provenance={"sources": [{"kind": "observation", "ref": "obs-1"}]})

    new = memory.supersede(fact.id, given, "ops", "moved")

    first, added = new.provenance.sources
    assert first.ref == "obs-1"
    assert (added.kind, added.ref, added.created_by) == (ProvenanceKind.EVENT, fact.id, "ops")
    assert added.timestamp == new.created_at


def test_superseding_record_is_retrievable_and_salient(
    memory: Membrane, fact: MemoryRecord
) -> None:
    new = memory.supersede(fact.id, semantic(evidence=True), "ops", "moved")

    assert read(memory, new.id).salience > 0


def test_supersede_audits_both_records(memory: Membrane, fact: MemoryRecord) -> None:
    new = memory.supersede(fact.id, semantic(evidence=True), "ops", "port changed")

    assert audit_trail(read(memory, fact.id))[-1] == (
        "revise",
        "ops",
        f"superseded by {new.id}: port changed",
    )
    assert audit_trail(read(memory, new.id)) == [
        ("create", "ops", f"supersedes {fact.id}: port changed")
    ]


def test_supersede_appends_to_a_client_supplied_audit_log(
    memory: Membrane, fact: MemoryRecord
) -> None:
    imported = {"action": "create", "actor": "importer", "timestamp": "2024-01-01T00:00:00Z"}

    new = memory.supersede(fact.id, semantic(evidence=True, audit_log=[imported]), "ops", "why")

    assert [(a, actor) for a, actor, _ in audit_trail(new)] == [
        ("create", "importer"),
        ("create", "ops"),
    ]


def test_supersede_honours_a_client_supplied_id(memory: Membrane, fact: MemoryRecord) -> None:
    new = memory.supersede(fact.id, semantic(id="fact-v2", evidence=True), "ops", "moved")

    assert new.id == "fact-v2"
    assert read(memory, "fact-v2").id == "fact-v2"


def test_supersede_with_a_taken_id_fails_and_changes_nothing(
    memory: Membrane, fact: MemoryRecord
) -> None:
    other = memory.create_record(semantic(id="taken"))
    before = log_size(memory)

    with pytest.raises(AlreadyExistsError):
        memory.supersede(fact.id, semantic(id=other.id, evidence=True), "ops", "moved")

    assert log_size(memory) == before
    assert read(memory, fact.id).salience > 0


def test_supersede_may_change_the_memory_type(memory: Membrane, fact: MemoryRecord) -> None:
    new = memory.supersede(fact.id, competence("restart api"), "ops", "now a skill")

    assert new.type is MemoryType.COMPETENCE
    assert edges(new) == [("supersedes", fact.id)]


def test_supersede_of_a_non_semantic_record_retracts_it(memory: Membrane) -> None:
    note = memory.create_record(working())

    memory.supersede(note.id, working("thread-2"), "agent", "moved on")

    assert read(memory, note.id).salience == 0.0


def test_supersede_of_a_missing_record_is_not_found(memory: Membrane, fact: MemoryRecord) -> None:
    before = log_size(memory)

    with pytest.raises(NotFoundError):
        memory.supersede("no-such-id", semantic(evidence=True), "ops", "moved")

    assert log_size(memory) == before
    assert read(memory, fact.id).salience == pytest.approx(fact.salience)


def test_supersede_overwrites_client_creation_times(memory: Membrane, fact: MemoryRecord) -> None:
    given = semantic(evidence=True, created_at="2001-01-01T00:00:00Z")

    new = memory.supersede(fact.id, given, "ops", "moved")

    assert new.created_at == new.audit_log[-1].timestamp


# --- fork -----------------------------------------------------------------------------------


def test_fork_keeps_the_source_active(memory: Membrane, fact: MemoryRecord) -> None:
    memory.fork(fact.id, semantic(obj="port 3000", evidence=True), "dev", "in dev")

    source = read(memory, fact.id)
    assert source.salience > 0
    assert isinstance(source.payload, SemanticPayload)
    assert source.payload.revision is None


def test_fork_derives_the_new_record_from_the_source(memory: Membrane, fact: MemoryRecord) -> None:
    forked = memory.fork(fact.id, semantic(evidence=True), "dev", "in dev")

    assert is_uuid4(forked.id)
    assert forked.salience > 0
    assert edges(forked) == [("derived_from", fact.id)]


def test_fork_audits_both_records(memory: Membrane, fact: MemoryRecord) -> None:
    forked = memory.fork(fact.id, semantic(evidence=True), "dev", "dev only")

    assert audit_trail(read(memory, fact.id))[-1] == (
        "fork",
        "dev",
        f"forked to {forked.id}: dev only",
    )
    assert audit_trail(forked) == [("create", "dev", f"forked from {fact.id}: dev only")]


def test_fork_keeps_conditional_validity(memory: Membrane, fact: MemoryRecord) -> None:
    given = semantic(evidence=True)
    given["payload"]["validity"] = {"mode": "conditional", "conditions": {"env": "dev"}}

    forked = memory.fork(fact.id, given, "dev", "dev only")

    assert isinstance(forked.payload, SemanticPayload)
    assert forked.payload.validity.conditions == {"env": "dev"}


def test_fork_of_a_missing_record_is_not_found(memory: Membrane) -> None:
    with pytest.raises(NotFoundError):
        memory.fork("no-such-id", working(), "dev", "why")

    assert log_size(memory) == 0


# --- merge ----------------------------------------------------------------------------------


@pytest.fixture
def three_facts(memory: Membrane) -> list[str]:
    return [memory.create_record(semantic("api", "port", p)).id for p in (80, 8080, 9090)]


def test_merge_retracts_every_source(memory: Membrane, three_facts: list[str]) -> None:
    merged = memory.merge(three_facts, semantic(evidence=True), "curator", "dedupe")

    for source_id in three_facts:
        source = read(memory, source_id)
        assert source.salience == 0.0
        _, _, status = revision_of(source)
        assert status == RevisionStatus.RETRACTED
        assert audit_trail(source)[-1] == ("merge", "curator", f"merged into {merged.id}: dedupe")


def test_merged_record_derives_from_each_source_in_order(
    memory: Membrane, three_facts: list[str]
) -> None:
    merged = memory.merge(three_facts, semantic(evidence=True), "curator", "dedupe")

    assert edges(merged) == [("derived_from", i) for i in three_facts]
    assert merged.salience > 0


def test_merge_audits_the_new_record_with_the_source_list(
    memory: Membrane, three_facts: list[str]
) -> None:
    merged = memory.merge(three_facts, semantic(evidence=True), "curator", "dedupe")

    assert audit_trail(merged) == [
        ("create", "curator", f"merged from [{' '.join(three_facts)}]: dedupe")
    ]


def test_merge_collapses_duplicate_ids(memory: Membrane, three_facts: list[str]) -> None:
    a, b, _ = three_facts

    merged = memory.merge([a, b, a], semantic(evidence=True), "curator", "dedupe")

    assert edges(merged) == [("derived_from", a), ("derived_from", b)]
    assert [e.event for e in memory.history(a)].count("MergedInto") == 1


def test_merge_with_a_missing_id_touches_no_source(
    memory: Membrane, three_facts: list[str]
) -> None:
    a, b, _ = three_facts
    before = log_size(memory)

    with pytest.raises(NotFoundError):
        memory.merge([a, b, "missing"], semantic(evidence=True), "curator", "dedupe")

    assert log_size(memory) == before
    assert read(memory, a).salience > 0
    assert read(memory, b).salience > 0


def test_merge_with_an_episodic_source_touches_no_source(
    memory: Membrane, three_facts: list[str]
) -> None:
    episode = memory.create_record(episodic())
    before = log_size(memory)

    with pytest.raises(EpisodicImmutableError):
        memory.merge([*three_facts, episode.id], semantic(evidence=True), "curator", "dedupe")

    assert log_size(memory) == before
    assert all(read(memory, i).salience > 0 for i in three_facts)


def test_merge_into_a_taken_id_touches_no_source(memory: Membrane, three_facts: list[str]) -> None:
    before = log_size(memory)

    with pytest.raises(AlreadyExistsError):
        memory.merge(three_facts, semantic(id=three_facts[0], evidence=True), "curator", "x")

    assert log_size(memory) == before


# --- retract --------------------------------------------------------------------------------


def test_retract_keeps_the_record_readable_with_zero_salience(
    memory: Membrane, fact: MemoryRecord
) -> None:
    memory.retract(fact.id, "ops", "wrong")

    retracted = read(memory, fact.id)
    assert retracted.salience == 0.0
    assert isinstance(retracted.payload, SemanticPayload)
    assert retracted.payload.object == "port 8080"


def test_retract_marks_a_semantic_record_retracted(memory: Membrane, fact: MemoryRecord) -> None:
    memory.retract(fact.id, "ops", "wrong")

    assert revision_of(read(memory, fact.id)) == ("", "", RevisionStatus.RETRACTED)


def test_retract_audits_a_delete_with_the_rationale_verbatim(
    memory: Membrane, fact: MemoryRecord
) -> None:
    memory.retract(fact.id, "ops", "measured wrong")

    assert audit_trail(read(memory, fact.id))[-1] == ("delete", "ops", "measured wrong")


def test_retract_of_a_missing_record_is_not_found(memory: Membrane) -> None:
    with pytest.raises(NotFoundError):
        memory.retract("no-such-id", "ops", "wrong")


def test_retract_works_on_every_revisable_type(memory: Membrane) -> None:
    ids = [memory.create_record(r).id for r in (working(), competence(), entity())]

    for record_id in ids:
        memory.retract(record_id, "ops", "gone")

    assert [read(memory, i).salience for i in ids] == [0.0, 0.0, 0.0]


# --- contest --------------------------------------------------------------------------------


def test_contest_marks_the_record_contested(memory: Membrane, fact: MemoryRecord) -> None:
    rival = memory.create_record(semantic(obj="port 8081"))

    memory.contest(fact.id, rival.id, "auditor", "conflicts")

    contested = read(memory, fact.id)
    assert revision_of(contested)[2] == RevisionStatus.CONTESTED
    assert edges(contested) == [("contested_by", rival.id)]


def test_contest_leaves_salience_unchanged(memory: Membrane, fact: MemoryRecord, time: Any) -> None:
    memory.contest(fact.id, "", "auditor", "doubt")

    assert read(memory, fact.id).salience == pytest.approx(1.0)


def test_contest_audits_a_revise_with_the_rationale_verbatim(
    memory: Membrane, fact: MemoryRecord
) -> None:
    memory.contest(fact.id, "", "auditor", "looks stale")

    assert audit_trail(read(memory, fact.id))[-1] == ("revise", "auditor", "looks stale")


def test_contest_with_an_empty_ref_adds_no_relation(memory: Membrane, fact: MemoryRecord) -> None:
    memory.contest(fact.id, "", "auditor", "doubt")

    contested = read(memory, fact.id)
    assert revision_of(contested)[2] == RevisionStatus.CONTESTED
    assert contested.relations == []


def test_contest_twice_by_the_same_record_keeps_one_relation(
    memory: Membrane, fact: MemoryRecord
) -> None:
    rival = memory.create_record(semantic(obj="port 8081"))

    memory.contest(fact.id, rival.id, "auditor", "once")
    memory.contest(fact.id, rival.id, "auditor", "twice")

    assert edges(read(memory, fact.id)) == [("contested_by", rival.id)]


def test_contest_by_a_ref_that_is_not_a_record_is_not_found(
    memory: Membrane, fact: MemoryRecord
) -> None:
    before = log_size(memory)

    with pytest.raises(NotFoundError) as info:
        memory.contest(fact.id, "not-a-record", "auditor", "doubt")

    assert info.value.record_id == "not-a-record"
    assert log_size(memory) == before


def test_contest_of_a_missing_record_is_not_found(memory: Membrane) -> None:
    with pytest.raises(NotFoundError):
        memory.contest("no-such-id", "", "auditor", "doubt")


# --- episodic records refuse every revision -------------------------------------------------

REVISIONS: dict[str, Callable[[Membrane, str], Any]] = {
    "supersede": lambda m, i: m.supersede(i, semantic(evidence=True), "a", "r"),
    "fork": lambda m, i: m.fork(i, semantic(evidence=True), "a", "r"),
    "merge": lambda m, i: m.merge([i], semantic(evidence=True), "a", "r"),
    "retract": lambda m, i: m.retract(i, "a", "r"),
    "contest": lambda m, i: m.contest(i, "", "a", "r"),
}


@pytest.mark.parametrize("revision", sorted(REVISIONS))
def test_episodic_record_refuses_revision(memory: Membrane, revision: str) -> None:
    episode = memory.create_record(episodic())
    before = log_size(memory)

    with pytest.raises(EpisodicImmutableError) as info:
        REVISIONS[revision](memory, episode.id)

    assert info.value.record_id == episode.id
    assert log_size(memory) == before


def test_episodic_record_may_still_be_reinforced(memory: Membrane) -> None:
    episode = memory.create_record(episodic(salience=0.5))

    memory.reinforce(episode.id, "agent", "useful")

    assert read(memory, episode.id).salience == pytest.approx(0.6)


def test_episodic_record_may_get_an_outcome(memory: Membrane) -> None:
    episode = memory.create_record(episodic())

    memory.record_outcome(episode.id, "success", actor="runner")

    recorded = read(memory, episode.id)
    assert recorded.payload is not None and recorded.payload.outcome == "success"
    assert audit_trail(recorded)[-1] == ("revise", "runner", "Outcome recorded: success")
    assert recorded.provenance.sources[-1].kind is ProvenanceKind.OUTCOME


# --- the store keeps working after failures (A4) --------------------------------------------


def test_store_works_after_failed_revisions(memory: Membrane, fact: MemoryRecord) -> None:
    failures: list[Callable[[], Any]] = [
        lambda: memory.supersede("missing", semantic(evidence=True), "a", "r"),
        lambda: memory.merge([fact.id, "missing"], semantic(evidence=True), "a", "r"),
        lambda: memory.fork("missing", working(), "a", "r"),
        lambda: memory.retract("missing", "a", "r"),
    ]
    for failing in failures:
        with pytest.raises(NotFoundError):
            failing()

    created = [memory.create_record(semantic()) for _ in range(3)]

    assert len({r.id for r in created} | {fact.id}) == 4
    assert all(read(memory, r.id).id == r.id for r in created)
    assert read(memory, fact.id).salience > 0


# --- the revision lifecycle of R10 ----------------------------------------------------------


def test_revision_lifecycle(memory: Membrane) -> None:
    """Supersede, retract another fact, fork with conditions, then contest the source."""
    port = memory.create_record(semantic("api", "port", 8080))
    host = memory.create_record(semantic("api", "host", "a.example"))

    new_port = memory.supersede(port.id, semantic("api", "port", 9090, evidence=True), "a", "r")
    memory.retract(host.id, "a", "host decommissioned")
    dev = semantic("api", "port", 3000, evidence=True)
    dev["payload"]["validity"] = {"mode": "conditional", "conditions": {"env": "dev"}}
    forked = memory.fork(new_port.id, dev, "a", "dev differs")
    memory.contest(new_port.id, forked.id, "a", "dev disagrees")

    assert read(memory, port.id).salience == 0.0
    assert read(memory, host.id).salience == 0.0
    assert edges(forked) == [("derived_from", new_port.id)]
    source = read(memory, new_port.id)
    assert source.salience > 0
    assert revision_of(source) == (port.id, "", RevisionStatus.CONTESTED)
    assert ("contested_by", forked.id) in edges(source)


# --- a returned record is the caller's own ----------------------------------------------------

WRITES_RETURNING_A_RECORD: dict[str, Callable[[Membrane, str], MemoryRecord]] = {
    "create": lambda m, i: m.create_record(semantic(tags=["kept"])),
    "supersede": lambda m, i: m.supersede(i, semantic(evidence=True, tags=["kept"]), "a", "r"),
    "fork": lambda m, i: m.fork(i, semantic(evidence=True, tags=["kept"]), "a", "r"),
    "merge": lambda m, i: m.merge([i], semantic(evidence=True, tags=["kept"]), "a", "r"),
}


@pytest.mark.parametrize("write", sorted(WRITES_RETURNING_A_RECORD))
def test_changing_a_returned_record_does_not_change_the_store(
    memory: Membrane, fact: MemoryRecord, write: str
) -> None:
    returned = WRITES_RETURNING_A_RECORD[write](memory, fact.id)

    returned.tags.append("scribbled")
    assert isinstance(returned.payload, SemanticPayload)
    returned.payload.subject = "scribbled"

    stored = read(memory, returned.id)
    assert stored.tags == ["kept"]
    assert isinstance(stored.payload, SemanticPayload)
    assert stored.payload.subject == "service"


def test_changing_a_record_returned_inside_a_batch_does_not_change_what_is_written(
    memory: Membrane,
) -> None:
    with memory.batch():
        returned = memory.create_record(semantic(tags=["kept"]))
        returned.tags.append("scribbled")

    assert read(memory, returned.id).tags == ["kept"]

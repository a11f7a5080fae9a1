"""Capture (spec §2.4; behaviours I6–I15 of §10.10, A5 of §10.3, the §9.3 SDK scenario).

One capture writes a primary record, the entities its content names (reused when they are
known), a semantic fact derived from subject/predicate/object content, and paired edges, all
in one atomic write.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from membrane_es import (
    CaptureMemoryResult,
    EntityPayload,
    EpisodicPayload,
    Membrane,
    MemoryRecord,
    MemoryType,
    SemanticPayload,
    TrustContext,
    ValidationError,
    WorkingPayload,
)
from membrane_es.commands import CaptureMemory
from membrane_es.commands.capture import (
    candidate_pool,
    constraint_list,
    entity_type_of_kind,
    fallback_interpretation,
    infer_entity_kind,
    infer_proposed_type,
    inverse_predicate,
    looks_like_entity_id,
    merge_interpretation,
    query_terms,
    score_candidate,
    semantic_fact,
    string_list,
    summarize,
    term_matches,
)
from membrane_es.schema import (
    Constraint,
    GraphEdge,
    Interpretation,
    Mention,
    ProvenanceKind,
    ReferenceCandidate,
    RelationCandidate,
    Sensitivity,
)
from membrane_es.timekeeping.clock import MonotonicClock
from membrane_es.timekeeping.decay import DAY
from tests.unit.builders import (
    FULL_TRUST,
    audit_trail,
    entity,
    log_size,
    read,
    semantic,
)
from tests.unit.test_atomicity import InjectedFault, fail_part_way, spy_inserts

ORCHID_EVENT = {"ref": "evt-1", "text": "Remember Orchid", "project": "Orchid"}
ORCHID_FACT = {"subject": "Orchid", "predicate": "deploy_target_for", "object": "staging"}
ALPHA = "project:alpha"


def edge_list(result: CaptureMemoryResult) -> list[tuple[str, str, str]]:
    return [(e.source_id, e.predicate, e.target_id) for e in result.edges]


def predicates(result: CaptureMemoryResult) -> list[str]:
    return [e.predicate for e in result.edges]


def interpretation_of(record: MemoryRecord) -> Interpretation:
    assert record.interpretation is not None
    return record.interpretation


def episodic_payload(record: MemoryRecord) -> EpisodicPayload:
    assert isinstance(record.payload, EpisodicPayload)
    return record.payload


def entity_payload(record: MemoryRecord) -> EntityPayload:
    assert isinstance(record.payload, EntityPayload)
    return record.payload


def semantic_payload(record: MemoryRecord) -> SemanticPayload:
    assert isinstance(record.payload, SemanticPayload)
    return record.payload


class FakeInterpreter:
    """An interpreter that answers what the test says (and remembers what it was asked)."""

    def __init__(self, answer: Any = None, *, error: Exception | None = None) -> None:
        self.answer = answer
        self.error = error
        self.requests: list[CaptureMemory] = []

    def interpret(self, request: CaptureMemory) -> Any:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        return self.answer


class FakeResolver(FakeInterpreter):
    """... that also resolves, against the candidates capture hands it."""

    def __init__(self, answer: Any = None, resolution: Any = None) -> None:
        super().__init__(answer)
        self.resolution = resolution
        self.candidates: list[MemoryRecord] = []

    def resolve(
        self,
        request: CaptureMemory,
        interpretation: Interpretation,
        candidates: Sequence[MemoryRecord],
    ) -> Any:
        self.candidates = list(candidates)
        return self.resolution


@pytest.fixture
def engine_with(clock: MonotonicClock) -> Any:
    """Make an in-memory engine with an interpreter (closed at the end of the test)."""
    engines: list[Membrane] = []

    def make(interpreter: Any = None, **kwargs: Any) -> Membrane:
        engine = Membrane.in_memory(clock=clock, interpreter=interpreter, **kwargs)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


# --- the worked examples (spec §2.4, I6) ------------------------------------------------------


def test_event_capture_creates_one_project_entity_and_two_edges(memory: Membrane) -> None:
    result = memory.capture_memory(
        ORCHID_EVENT, source_kind="event", reason_to_remember="deploy target matters"
    )

    primary = result.primary_record
    assert isinstance(result, CaptureMemoryResult)
    assert primary.type is MemoryType.EPISODIC
    [orchid] = result.created_records
    assert orchid.type is MemoryType.ENTITY
    assert entity_payload(orchid).canonical_name == "Orchid"
    assert entity_payload(orchid).primary_type == "Project"
    assert edge_list(result) == [
        (primary.id, "mentions_entity", orchid.id),
        (orchid.id, "mentioned_in", primary.id),
    ]
    interpretation = interpretation_of(primary)
    assert interpretation.status == "resolved"
    assert [m.canonical_entity_id for m in interpretation.mentions] == [orchid.id]
    context = episodic_payload(primary).environment
    assert context is not None
    assert context.context == {
        "capture_content": ORCHID_EVENT,
        "capture_context": None,
        "reason_to_remember": "deploy target matters",
    }


def test_what_capture_returns_is_what_the_store_holds(memory: Membrane) -> None:
    result = memory.capture_memory(ORCHID_EVENT, source_kind="event")

    for record in (result.primary_record, *result.created_records):
        stored = read(memory, record.id)
        assert msgspec.structs.replace(stored, salience=1.0) == msgspec.structs.replace(
            record, salience=1.0
        )
    [orchid] = result.created_records
    assert [(r.predicate, r.target_id) for r in read(memory, orchid.id).relations] == [
        ("mentioned_in", result.primary_record.id)
    ]


def test_a_second_capture_reuses_the_entity(memory: Membrane) -> None:
    first = memory.capture_memory(ORCHID_EVENT, source_kind="event", scope=ALPHA)
    [orchid] = first.created_records

    second = memory.capture_memory(
        {"text": "Orchid deployed again", "project": "orchid"}, source_kind="event", scope=ALPHA
    )

    assert second.created_records == []
    assert edge_list(second)[0] == (second.primary_record.id, "mentions_entity", orchid.id)
    assert [(r.predicate, r.target_id) for r in read(memory, orchid.id).relations] == [
        ("mentioned_in", first.primary_record.id),
        ("mentioned_in", second.primary_record.id),
    ]


def test_observation_capture_derives_a_fact_about_a_new_concept_entity(memory: Membrane) -> None:
    result = memory.capture_memory(ORCHID_FACT, source_kind="observation")

    primary = result.primary_record
    person, fact = result.created_records
    assert primary.type is MemoryType.EPISODIC  # the primary of an observation is the event
    # a "subject" key says nothing of what the entity is: a concept, not a person
    assert entity_payload(person).primary_type == "Concept"
    assert fact.type is MemoryType.SEMANTIC
    payload = semantic_payload(fact)
    assert (payload.subject, payload.predicate, payload.object) == (
        person.id,
        "deploy_target_for",
        "staging",
    )
    assert (primary.id, "derived_semantic", fact.id) in edge_list(result)
    assert (fact.id, "derived_from", primary.id) in edge_list(result)
    assert (fact.id, "subject_entity", person.id) in edge_list(result)
    assert (person.id, "fact_subject_of", fact.id) in edge_list(result)
    assert [(r.predicate, r.target_id) for r in primary.relations] == [
        ("mentions_entity", person.id),
        ("derived_semantic", fact.id),
    ]


def test_working_state_capture_keeps_typed_constraints(memory: Membrane) -> None:
    constraints = [
        {"type": "deadline", "key": "due", "value": "friday", "required": True},
        {"type": "budget", "key": "max_usd", "value": 250, "required": "yes"},
        "not a constraint",
    ]
    result = memory.capture_memory(
        {
            "thread_id": "thread-9",
            "state": "not-a-state",
            "next_actions": ["ship it", " Ship it ", "", 42],
            "open_questions": ["who reviews?"],
            "active_constraints": constraints,
        },
        source_kind="working_state",
        reason_to_remember="release prep",
    )

    primary = result.primary_record
    assert primary.type is MemoryType.WORKING
    assert result.created_records == []
    payload = primary.payload
    assert isinstance(payload, WorkingPayload)
    assert payload.thread_id == "thread-9"
    assert payload.state == "executing"  # an invalid state becomes executing (I8)
    assert payload.context_summary == "release prep"
    assert payload.next_actions == ["ship it", "42"]
    assert payload.open_questions == ["who reviews?"]
    assert payload.active_constraints == [
        Constraint(type="deadline", key="due", value="friday", required=True),
        Constraint(type="budget", key="max_usd", value=250, required=False),
    ]
    assert primary.provenance.sources[0].ref == "thread-9"
    assert primary.confidence == 1.0
    assert primary.lifecycle.decay.half_life_seconds == 7 * DAY


# --- the primary record by source kind (I7–I9) ------------------------------------------------


def test_event_ref_comes_from_ref_then_id_then_a_new_uuid(memory: Membrane) -> None:
    by_id = memory.capture_memory({"id": "evt-123", "text": "x"}, source_kind="event")
    generated = memory.capture_memory({"text": "no ref"}, source_kind="event")

    assert episodic_payload(by_id.primary_record).timeline[0].ref == "evt-123"
    ref = episodic_payload(generated.primary_record).timeline[0].ref
    assert ref not in ("", "id")
    assert len(ref) == 36


def test_event_timeline_and_provenance(memory: Membrane) -> None:
    moment = datetime(2024, 6, 1, 12, 30, tzinfo=UTC)
    result = memory.capture_memory(
        "deployed orchid", source_kind="event", source="agent-7", timestamp="2024-06-01T12:30:00Z"
    )

    primary = result.primary_record
    [event] = episodic_payload(primary).timeline
    assert (event.t, event.event_kind, event.summary) == (moment, "event", "deployed orchid")
    [source] = primary.provenance.sources
    assert (source.kind, source.ref, source.created_by, source.timestamp) == (
        ProvenanceKind.EVENT,
        event.ref,
        "agent-7",
        moment,
    )
    assert primary.provenance.created_by == "ingestion-service"
    assert primary.created_at == moment  # event time: when it happened (the log keeps the rest)


def test_agent_turn_is_the_default_source_kind(memory: Membrane) -> None:
    result = memory.capture_memory({"text": "hello"})

    assert result.primary_record.type is MemoryType.EPISODIC
    assert episodic_payload(result.primary_record).timeline[0].event_kind == "agent_turn"
    assert interpretation_of(result.primary_record).summary == '{"text":"hello"}'


def test_tool_output_capture_stores_the_tool_node(memory: Membrane) -> None:
    content = {
        "tool_name": "rg",
        "args": {"pattern": "TODO"},
        "result": {"matches": 3},
        "depends_on": ["node-1"],
    }
    result = memory.capture_memory(content, source_kind="tool_output", context={"cwd": "/src"})

    primary = result.primary_record
    payload = episodic_payload(primary)
    [node] = payload.tool_graph
    assert (node.tool, node.args, node.result, node.depends_on) == (
        "rg",
        {"pattern": "TODO"},
        {"matches": 3},
        ["node-1"],
    )
    assert payload.timeline[0].ref == node.id
    assert payload.timeline[0].summary == "tool_call: rg"
    assert payload.environment is not None
    assert payload.environment.context["capture_context"] == {"cwd": "/src"}
    assert primary.provenance.sources[0].kind is ProvenanceKind.TOOL_CALL
    assert primary.provenance.sources[0].ref == node.id
    assert primary.confidence == 0.9
    assert audit_trail(primary) == [
        ("create", "ingestion-service", "Ingested tool_output from python-client")
    ]
    assert [entity_payload(r).primary_type for r in result.created_records] == ["Tool"]


@pytest.mark.parametrize(
    ("content", "source_kind", "source", "message"),
    [
        ({"thread": ""}, "working_state", "me", "thread ID is required"),
        ({"result": 1}, "tool_output", "me", "tool name is required"),
        ({"text": "x"}, "event", "", "candidate source is required"),
    ],
)
def test_policy_errors_are_validation_errors_and_write_nothing(
    memory: Membrane, content: dict[str, Any], source_kind: str, source: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        memory.capture_memory(content, source_kind=source_kind, source=source)

    assert "ingestion policy:" in str(caught.value)
    assert log_size(memory) == 0


# --- defaults (spec §2.1, §2.4 step 1, §1.7) ----------------------------------------------------


def test_defaults_and_audit_texts(memory: Membrane) -> None:
    result = memory.capture_memory(ORCHID_FACT, source_kind="observation", source="agent-7")

    primary = result.primary_record
    person, fact = result.created_records
    assert primary.sensitivity is Sensitivity.LOW
    assert (primary.confidence, primary.lifecycle.decay.half_life_seconds) == (0.8, DAY)
    assert primary.salience == pytest.approx(1.0)
    assert audit_trail(primary) == [("create", "ingestion-service", "Ingested event from agent-7")]
    assert audit_trail(person) == [
        ("create", "agent-7", "Created canonical entity during capture resolution")
    ]
    assert audit_trail(fact) == [
        ("create", "agent-7", "Derived semantic record during capture interpretation")
    ]
    assert (person.confidence, person.lifecycle.decay.half_life_seconds) == (1.0, 365 * DAY)
    assert person.provenance.created_by == "agent-7"
    assert [i.namespace for i in entity_payload(person).identifiers] == ["membrane"]
    assert (fact.confidence, fact.lifecycle.decay.half_life_seconds) == (0.8, 365 * DAY)
    assert fact.salience == pytest.approx(1.0)
    assert fact.provenance.created_by == "agent-7"
    evidence = semantic_payload(fact).evidence
    assert [(e.source_type, e.source_id) for e in evidence] == [("episodic", primary.id)]
    assert interpretation_of(fact).status == "resolved"


def test_capture_ignores_the_configured_default_sensitivity(engine_with: Any) -> None:
    engine = engine_with(default_sensitivity="high")

    result = engine.capture_memory({"project": "Orchid"}, sensitivity="")

    assert result.primary_record.sensitivity is Sensitivity.LOW
    assert result.created_records[0].sensitivity is Sensitivity.LOW


def test_entities_and_facts_take_the_capture_scope_sensitivity_and_time(
    memory: Membrane,
) -> None:
    moment = datetime(2024, 6, 1, tzinfo=UTC)
    result = memory.capture_memory(
        ORCHID_FACT,
        source_kind="observation",
        scope=ALPHA,
        sensitivity="medium",
        tags=["Deploy", "ops"],
        timestamp=moment,
    )

    for record in result.created_records:
        assert (record.scope, record.sensitivity, record.created_at) == (
            ALPHA,
            Sensitivity.MEDIUM,
            moment,
        )
    assert result.created_records[1].tags == ["Deploy", "ops"]
    assert all(edge.created_at == moment for edge in result.edges)


# --- entity resolution (step 9, I10) ------------------------------------------------------------


def test_an_entity_is_found_by_alias(memory: Membrane) -> None:
    payload = {
        "kind": "entity",
        "canonical_name": "Postgres",
        "primary_type": "Database",
        "aliases": ["PG", {"value": "psql"}],
    }
    known = memory.create_record({"type": "entity", "payload": payload})

    result = memory.capture_memory({"entity": " pg "})

    assert result.created_records == []
    assert edge_list(result)[0][2] == known.id


def test_an_unscoped_entity_is_found_from_any_scope(memory: Membrane) -> None:
    unscoped = memory.create_record(entity("Orchid"))

    result = memory.capture_memory({"project": "Orchid"}, scope=ALPHA)

    assert result.created_records == []
    assert edge_list(result)[0][2] == unscoped.id


def test_same_scope_entities_come_before_unscoped_ones(memory: Membrane) -> None:
    memory.create_record(entity("Orchid", id="a-unscoped"))
    scoped = memory.create_record(entity("Orchid", id="z-scoped", scope=ALPHA))

    result = memory.capture_memory({"project": "Orchid"}, scope=ALPHA)

    assert edge_list(result)[0][2] == scoped.id


def test_a_retracted_entity_is_not_reused(memory: Membrane) -> None:
    old = memory.create_record(entity("Orchid"))
    memory.retract(old.id, "curator", "wrong")

    result = memory.capture_memory({"project": "Orchid"})

    [created] = result.created_records
    assert created.id != old.id


def test_interpreter_mention_of_a_known_entity_creates_nothing(engine_with: Any) -> None:
    engine = engine_with(FakeInterpreter({"mentions": [{"surface": "Postgres"}]}))
    known = engine.create_record(entity("Postgres"))

    result = engine.capture_memory("we moved the database", source_kind="event")

    assert result.created_records == []
    assert result.edges[0] == GraphEdge(
        source_id=result.primary_record.id,
        predicate="mentions_entity",
        target_id=known.id,
        weight=1.0,
        created_at=result.edges[0].created_at,
    )
    [mention] = interpretation_of(result.primary_record).mentions
    assert (mention.canonical_entity_id, mention.confidence) == (known.id, 1.0)


def test_interpreter_canonical_id_is_used_when_it_names_an_entity(engine_with: Any) -> None:
    interpreter = FakeInterpreter()
    engine = engine_with(interpreter)
    known = engine.create_record(entity("Postgres"))
    interpreter.answer = Interpretation(
        mentions=[Mention(surface="the db", canonical_entity_id=known.id)]
    )

    result = engine.capture_memory("we moved the database")

    assert result.created_records == []
    assert edge_list(result)[0][2] == known.id


def test_two_mentions_of_one_new_name_make_one_entity(engine_with: Any) -> None:
    engine = engine_with(
        FakeInterpreter(
            {
                "mentions": [
                    {"surface": "Orchid", "entity_kind": "project"},
                    {"surface": "orchid service", "aliases": ["ORCHID"]},
                ]
            }
        )
    )

    result = engine.capture_memory("orchid notes")

    [orchid] = result.created_records
    assert [t for _, p, t in edge_list(result) if p == "mentions_entity"] == [orchid.id]
    assert [m.canonical_entity_id for m in interpretation_of(result.primary_record).mentions] == [
        orchid.id,
        orchid.id,
    ]


def test_new_entities_get_kind_types_and_aliases(engine_with: Any) -> None:
    engine = engine_with(
        FakeInterpreter(
            {
                "mentions": [
                    {"surface": "Ada", "entity_kind": "person", "aliases": ["ada", "A. L."]},
                    {"surface": "", "entity_kind": "martian"},
                ]
            }
        )
    )

    result = engine.capture_memory("note")

    ada, unnamed = (entity_payload(r) for r in result.created_records)
    assert (ada.canonical_name, ada.primary_type, ada.types) == ("Ada", "Person", ["Person"])
    assert [a.value for a in ada.aliases] == ["Ada", "A. L."]
    assert ada.summary == "Ada"
    assert (unnamed.canonical_name, unnamed.primary_type) == ("entity", "Other")


# --- references and relation candidates (steps 10–11, I12, I13) -------------------------------


def test_a_ref_naming_the_capture_itself_resolves_without_edges(memory: Membrane) -> None:
    result = memory.capture_memory({"ref": "evt-1", "text": "x"}, source_kind="event")

    [reference] = interpretation_of(result.primary_record).reference_candidates
    assert (reference.resolved, reference.target_record_id) == (True, result.primary_record.id)
    assert result.edges == []


def test_an_older_record_with_the_same_ref_wins_over_the_capture(memory: Membrane) -> None:
    first = memory.capture_memory({"ref": "evt-9", "text": "first"}, source_kind="event")

    second = memory.capture_memory({"ref": "evt-9", "text": "again"}, source_kind="event")

    older = first.primary_record.id
    assert edge_list(second) == [
        (second.primary_record.id, "references_record", older),
        (older, "referenced_by", second.primary_record.id),
    ]


def test_context_refs_resolve_to_existing_records(memory: Membrane) -> None:
    fact = memory.create_record(semantic())

    result = memory.capture_memory({"text": "about that"}, context={"record_id": fact.id})

    [reference] = interpretation_of(result.primary_record).reference_candidates
    assert (reference.resolved, reference.target_record_id, reference.confidence) == (
        True,
        fact.id,
        0.5,
    )
    assert (result.primary_record.id, "references_record", fact.id) in edge_list(result)
    assert (fact.id, "referenced_by", result.primary_record.id) in edge_list(result)


def test_an_unknown_ref_leaves_the_interpretation_tentative(memory: Membrane) -> None:
    result = memory.capture_memory({"text": "x"}, context={"parent_ref": "nowhere"})

    [reference] = interpretation_of(result.primary_record).reference_candidates
    assert reference.resolved is False
    assert interpretation_of(result.primary_record).status == "tentative"


def test_interpreter_and_resolver_link_relations_and_references(engine_with: Any) -> None:
    resolver = FakeResolver(
        {
            "mentions": [{"surface": "Postgres", "entity_kind": "tool"}],
            "relation_candidates": [{"predicate": " Depends_On ", "confidence": 0.6}],
            "reference_candidates": [{"ref": "incident-7"}],
            "extraction_confidence": 0.3,
        }
    )
    engine = engine_with(resolver)
    postgres = engine.create_record(entity("Postgres"))
    incident = engine.create_record(semantic("incident-7", "caused", "outage"))
    resolver.resolution = Interpretation(
        relation_candidates=[
            RelationCandidate(
                predicate=" Depends_On ", target_record_id=incident.id, confidence=0.6
            )
        ],
        reference_candidates=[ReferenceCandidate(ref="incident-7", target_record_id=incident.id)],
    )

    result = engine.capture_memory("the api needs postgres", source_kind="event")

    primary = result.primary_record.id
    assert edge_list(result) == [
        (primary, "mentions_entity", postgres.id),
        (postgres.id, "mentioned_in", primary),
        (primary, "references_record", incident.id),
        (incident.id, "referenced_by", primary),
        (primary, "depends_on", incident.id),
        (incident.id, "dependency_of", primary),
    ]
    assert [e.weight for e in result.edges if e.predicate in ("depends_on", "dependency_of")] == [
        0.6,
        0.6,
    ]
    interpretation = interpretation_of(result.primary_record)
    assert interpretation.status == "resolved"
    [relation] = interpretation.relation_candidates
    assert (relation.resolved, relation.target_record_id) == (True, incident.id)
    [reference] = interpretation.reference_candidates
    assert (reference.resolved, reference.target_record_id, reference.confidence) == (
        True,
        incident.id,
        1.0,
    )
    assert {r.id for r in resolver.candidates} >= {postgres.id, incident.id}
    assert [(r.predicate, r.target_id) for r in read(engine, incident.id).relations] == [
        ("referenced_by", primary),
        ("dependency_of", primary),
    ]


def test_unresolvable_relation_candidates_write_no_edges(engine_with: Any) -> None:
    engine = engine_with(
        FakeResolver(
            {"relation_candidates": [{"predicate": "supports", "target_record_id": "missing"}]},
            resolution={
                "relation_candidates": [
                    {"predicate": "supports", "target_entity_id": "also-missing", "resolved": True}
                ]
            },
        )
    )

    result = engine.capture_memory("text")

    [relation] = interpretation_of(result.primary_record).relation_candidates
    assert (relation.resolved, relation.target_record_id, relation.target_entity_id) == (
        False,
        "",
        "",
    )
    assert result.edges == []
    assert interpretation_of(result.primary_record).status == "tentative"


def test_a_resolver_may_link_any_candidate(engine_with: Any) -> None:
    class ToolLinker(FakeInterpreter):
        def resolve(self, request: Any, interpretation: Any, candidates: Any) -> Any:
            tool = next(c for c in candidates if c.type is MemoryType.ENTITY)
            return {"relation_candidates": [{"predicate": "uses", "target_entity_id": tool.id}]}

    engine = engine_with(ToolLinker())
    tool = engine.create_record(entity("rg"))

    result = engine.capture_memory({"text": "searched"})

    assert edge_list(result) == [
        (result.primary_record.id, "uses", tool.id),
        (tool.id, "used_by", result.primary_record.id),
    ]
    [relation] = interpretation_of(result.primary_record).relation_candidates
    assert (relation.target_entity_id, relation.resolved, relation.confidence) == (
        tool.id,
        True,
        1.0,
    )


def test_any_other_predicate_gets_an_inverse_of_name(engine_with: Any) -> None:
    interpreter = FakeInterpreter()
    engine = engine_with(interpreter)
    target = engine.create_record(semantic())
    interpreter.answer = {
        "relation_candidates": [{"predicate": "Blocks", "target_record_id": target.id}]
    }

    result = engine.capture_memory("text")

    assert predicates(result) == ["blocks", "inverse_of_blocks"]


# --- the interpreter hook (steps 3, 5) ------------------------------------------------------


def test_the_interpreter_sees_the_validated_request(engine_with: Any) -> None:
    interpreter = FakeInterpreter()
    engine = engine_with(interpreter)

    engine.capture_memory({"a": (1, 2)}, tags=["x"], timestamp="2024-01-01T00:00:00+02:00")

    [request] = interpreter.requests
    assert request.content == {"a": [1, 2]}
    assert request.timestamp == datetime(2023, 12, 31, 22, tzinfo=UTC)
    assert request.sensitivity == "low"


def test_a_failing_interpreter_is_ignored(engine_with: Any) -> None:
    engine = engine_with(FakeInterpreter(error=RuntimeError("LLM down")))

    result = engine.capture_memory(ORCHID_EVENT, source_kind="event")

    assert len(result.created_records) == 1
    assert interpretation_of(result.primary_record).extraction_confidence == 0.25


def test_an_answer_of_the_wrong_shape_is_ignored(engine_with: Any) -> None:
    engine = engine_with(FakeInterpreter({"mentions": "not a list"}))

    result = engine.capture_memory(ORCHID_EVENT, source_kind="event")

    assert len(result.created_records) == 1


def test_interpreter_labels_are_unioned_and_fields_override(engine_with: Any) -> None:
    engine = engine_with(
        FakeInterpreter(
            {
                "summary": "LLM summary",
                "proposed_type": "semantic",
                "topical_labels": ["OPS", "release"],
                "extraction_confidence": 0.9,
            }
        )
    )

    result = engine.capture_memory(ORCHID_FACT, source_kind="event", tags=["ops"])

    interpretation = interpretation_of(result.primary_record)
    assert interpretation.summary == "LLM summary"
    assert interpretation.topical_labels == ["ops", "release"]
    assert interpretation.mentions[0].surface == "Orchid"  # empty lists keep the fallback's
    fact = result.created_records[-1]
    assert fact.type is MemoryType.SEMANTIC  # derived: proposed semantic, confidence 0.9
    assert fact.confidence == 0.9
    assert fact.tags == ["ops", "release"]


# --- the derived semantic record (step 12, I11) ---------------------------------------------------


def test_an_event_with_fact_content_derives_nothing_without_a_semantic_signal(
    memory: Membrane,
) -> None:
    result = memory.capture_memory(ORCHID_FACT, source_kind="event")

    assert [r.type for r in result.created_records] == [MemoryType.ENTITY]
    assert "derived_semantic" not in predicates(result)


def test_a_nested_fact_with_proposed_type_semantic_is_derived(memory: Membrane) -> None:
    result = memory.capture_memory(
        {"fact": {"subject": "api", "predicate": "listens_on", "object": 8080}},
        source_kind="event",
        proposed_type="semantic",
    )

    [fact] = result.created_records
    payload = semantic_payload(fact)
    assert (payload.subject, payload.predicate, payload.object) == ("api", "listens_on", 8080)
    assert "subject_entity" not in predicates(result)


def test_a_string_object_naming_a_mention_becomes_its_entity(memory: Membrane) -> None:
    content = {"subject": "api", "predicate": "uses", "object": "postgres", "entity": "Postgres"}
    result = memory.capture_memory(content, source_kind="observation")

    api, postgres, fact = result.created_records
    payload = semantic_payload(fact)
    assert (payload.subject, payload.object) == (api.id, postgres.id)
    assert (fact.id, "object_entity", postgres.id) in edge_list(result)
    assert (postgres.id, "fact_object_of", fact.id) in edge_list(result)
    assert [m.canonical_entity_id for m in interpretation_of(fact).mentions] == [
        api.id,
        postgres.id,
    ]


def test_a_fact_needs_an_object_key(memory: Membrane) -> None:
    result = memory.capture_memory(
        {"subject": "api", "predicate": "listens_on"}, source_kind="observation"
    )

    assert [r.type for r in result.created_records] == [MemoryType.ENTITY]


# --- validation (spec §8.4, in its order) -------------------------------------------------------


def _nested(depth: int) -> list[Any]:
    """A list holding a list ... ``depth`` deep, "x" innermost."""
    outer: list[Any] = ["x"]
    for _ in range(depth - 1):
        outer = [outer]
    return outer


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"source": "s" * 100_001}, "source", "source exceeds maximum length of 100000"),
        ({"source_kind": "k" * 100_001}, "source_kind", "exceeds maximum length"),
        ({"reason_to_remember": "r" * 100_001}, "reason_to_remember", "exceeds maximum length"),
        ({"summary": "s" * 100_001}, "summary", "exceeds maximum length"),
        ({"scope": "s" * 100_001}, "scope", "exceeds maximum length"),
        ({"tags": [f"t{i}" for i in range(101)]}, "tags", "too many tags: 101 \\(max 100\\)"),
        ({"tags": ["t" * 257]}, "tags[0]", "tag exceeds maximum length of 256"),
        ({"sensitivity": "secret"}, "sensitivity", "sensitivity must be one of: public, low"),
        ({"proposed_type": "fact"}, "proposed_type", "proposed_type must be one of: episodic"),
        (
            {"content": "x" * (10 * 1024 * 1024)},
            "content",
            "content exceeds maximum payload size of 10485760 bytes",
        ),
        (
            {"context": ["x" * (10 * 1024 * 1024)]},
            "context",
            "context exceeds maximum payload size",
        ),
        ({"timestamp": "yesterday"}, "timestamp", "invalid timestamp"),
        ({"timestamp": datetime(2024, 1, 1)}, "timestamp", "invalid timestamp"),
        ({"content": {"when": object()}}, "content.when", "JSON"),
        ({"content": {1: "a", "1": "b"}}, "content", "two keys that read the same"),
        ({"context": {"a": {1: "x", "1": "y"}}}, "context", "two keys that read the same"),
        ({"content": _nested(101)}, "content" + "[0]" * 101, "nested deeper than 100 levels"),
        ({"content": _nested(5_000)}, "content", "nested deeper than 100 levels"),
        ({"context": _nested(5_000)}, "context", "nested deeper than 100 levels"),
    ],
)
def test_invalid_captures_are_rejected_before_anything_is_written(
    memory: Membrane, kwargs: dict[str, Any], field: str, message: str
) -> None:
    arguments: dict[str, Any] = {"content": {"project": "Orchid"}, **kwargs}
    content = arguments.pop("content")

    with pytest.raises(ValidationError, match=message) as caught:
        memory.capture_memory(content, **arguments)

    assert caught.value.field == field
    assert log_size(memory) == 0


def test_the_first_failing_check_wins(memory: Membrane) -> None:
    with pytest.raises(ValidationError) as caught:
        memory.capture_memory(
            "x" * (11 * 1024 * 1024), source="s" * 100_001, sensitivity="secret", timestamp="bad"
        )

    assert caught.value.field == "source"


# --- one atomic write (A5, DESIGN §3) -------------------------------------------------------------


def test_a_capture_is_one_insert_including_relations_on_existing_entities(
    memory: Membrane, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory.capture_memory(ORCHID_EVENT, source_kind="event")
    spy = spy_inserts(memory, monkeypatch)

    result = memory.capture_memory(
        {"project": "Orchid", "subject": "api", "predicate": "p", "object": "o"},
        source_kind="observation",
    )

    # primary + new api entity + fact created; Orchid (existing) gets one relation event
    assert len(result.created_records) == 2
    assert spy.calls == [4]


@pytest.mark.parametrize("allow", [0, 1, 2])
def test_a_capture_failing_part_way_leaves_the_store_empty(
    memory: Membrane, monkeypatch: pytest.MonkeyPatch, allow: int
) -> None:
    fail_part_way(memory, monkeypatch, allow=allow)

    with pytest.raises(InjectedFault):
        memory.capture_memory(ORCHID_FACT, source_kind="observation")

    assert log_size(memory) == 0
    assert memory.retrieve("Orchid", trust=FULL_TRUST).records == []


def test_a_failed_capture_leaves_existing_entities_untouched(
    memory: Membrane, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = memory.capture_memory(ORCHID_EVENT, source_kind="event")
    [orchid] = first.created_records
    before = log_size(memory)
    fault = fail_part_way(memory, monkeypatch, allow=1)

    with pytest.raises(InjectedFault):
        memory.capture_memory({"project": "Orchid"}, source_kind="event")
    fault.armed = False

    assert log_size(memory) == before
    assert len(read(memory, orchid.id).relations) == 1
    again = memory.capture_memory({"project": "Orchid"}, source_kind="event")
    assert again.created_records == []


def test_captures_in_one_batch_share_new_entities_and_log_in_time_order(
    memory: Membrane,
) -> None:
    with memory.batch():
        first = memory.capture_memory({"project": "Nimbus"}, source_kind="event")
        second = memory.capture_memory({"project": "nimbus"}, source_kind="event")

    [nimbus] = first.created_records
    assert second.created_records == []
    assert edge_list(second)[0][2] == nimbus.id
    recorder = memory.application.recorder
    notifications = recorder.select_notifications(start=1, limit=100)
    mapper = memory.application.mapper
    times = [mapper.to_domain_event(n).timestamp for n in notifications]
    assert times == sorted(times)
    assert [(r.predicate, r.target_id) for r in read(memory, nimbus.id).relations] == [
        ("mentioned_in", first.primary_record.id),
        ("mentioned_in", second.primary_record.id),
    ]
    rebuilt = memory.views.rebuild(memory.application)
    assert rebuilt.graph.outgoing == memory.views.graph.outgoing
    rebuilt.close()


# --- determinism ------------------------------------------------------------------------------


def test_mentions_follow_the_contents_key_order(memory: Membrane) -> None:
    forward = memory.capture_memory({"tool_name": "rg", "project": "Orchid", "file": "a.py"})
    backward = memory.capture_memory({"file": "b.py", "project": "Lotus", "tool_name": "fd"})

    assert [m.surface for m in interpretation_of(forward.primary_record).mentions] == [
        "rg",
        "Orchid",
        "a.py",
    ]
    assert [entity_payload(r).primary_type for r in forward.created_records] == [
        "Tool",
        "Project",
        "File",
    ]
    assert [entity_payload(r).canonical_name for r in backward.created_records] == [
        "b.py",
        "Lotus",
        "fd",
    ]


def test_the_same_capture_gives_the_same_shape_every_time(clock: MonotonicClock) -> None:
    shapes = []
    for _ in range(2):
        engine = Membrane.in_memory(clock=clock)
        engine.capture_memory({"project": "Orchid"})
        result = engine.capture_memory(
            {"subject": "Orchid", "predicate": "p", "object": "Lotus", "entity": "Lotus"},
            source_kind="observation",
        )
        ids = {result.primary_record.id: "P"}
        ids.update({r.id: f"C{i}" for i, r in enumerate(result.created_records)})
        shapes.append([(ids.get(s, "old"), p, ids.get(t, "old")) for s, p, t in edge_list(result)])
        engine.close()

    assert shapes[0] == shapes[1]


# --- what the SDK integration test does (spec §9.3) -----------------------------------------------


def test_graph_retrieval_after_two_orchid_captures(memory: Membrane) -> None:
    first = memory.capture_memory(
        {"text": "Remember Orchid as the staging deploy target.", "project": "Orchid"},
        scope=ALPHA,
        tags=["python", "integration"],
        sensitivity="low",
    )
    assert any(r.type is MemoryType.ENTITY for r in first.created_records)
    second = memory.capture_memory(
        {"text": "Orchid was deployed again.", "project": "Orchid"}, scope=ALPHA
    )
    [orchid] = first.created_records
    assert [e.target_id for e in second.edges if e.predicate == "mentions_entity"] == [orchid.id]

    graph = memory.retrieve_graph(
        "Orchid deploy target",
        trust=TrustContext(
            max_sensitivity="medium", authenticated=True, actor_id="py-test", scopes=[ALPHA]
        ),
        root_limit=10,
        node_limit=20,
        edge_limit=20,
        max_hops=1,
    )

    node_ids = [node.record.id for node in graph.nodes]
    assert graph.root_ids
    assert first.primary_record.id in node_ids
    assert any(node.record.type is MemoryType.ENTITY for node in graph.nodes)
    assert "mentions_entity" in [edge.predicate for edge in graph.edges]
    memory.retrieve_by_id(first.primary_record.id, trust=TrustContext(max_sensitivity="medium"))


def test_the_result_encodes_as_json(memory: Membrane) -> None:
    result = memory.capture_memory(ORCHID_FACT, source_kind="observation")

    decoded = msgspec.json.decode(msgspec.json.encode(result), type=CaptureMemoryResult)

    assert decoded == result


# --- the pieces (I14, I15) ------------------------------------------------------------------------


NOW = datetime(2025, 1, 1, tzinfo=UTC)


def request(**fields: Any) -> CaptureMemory:
    fields.setdefault("timestamp", NOW)
    return CaptureMemory(**fields)


def record(record_id: str, *, hours_old: float = 0.0, **fields: Any) -> MemoryRecord:
    created = NOW - timedelta(hours=hours_old)
    base = semantic("s", "p", "o") | {"id": record_id, "created_at": created, **fields}
    return msgspec.convert(base, MemoryRecord, strict=False)


def test_a_future_record_scores_exactly_one() -> None:
    future = record("r1", hours_old=-5)
    req = request(content="x")

    assert score_candidate(future, req, fallback_interpretation(req), [], NOW) == 1.0


def test_scope_entity_type_tag_and_term_bonuses() -> None:
    req = request(content={"subject": "Orchid"}, scope=ALPHA, tags=["Deploy"])
    interpretation = Interpretation(proposed_type="entity", topical_labels=["Deploy"])
    interpretation.mentions = fallback_interpretation(req).mentions
    matching = msgspec.convert(
        entity("Orchid", scope=ALPHA, tags=["deploy"], created_at=NOW - timedelta(hours=24)),
        MemoryRecord,
    )

    terms = query_terms(req, interpretation)
    score = score_candidate(matching, req, interpretation, terms, NOW)

    assert terms == ["deploy", "orchid"]
    assert score == 100 + 15 + 10 + 8 + 25 * 2 + 0.5  # scope, entity, type, tag, terms, age
    assert score >= 180


class PoolUnitOfWork:
    """Lists what the test gives it and remembers the List calls."""

    def __init__(self, scoped: list[MemoryRecord], everything: list[MemoryRecord]) -> None:
        self.scoped, self.everything = scoped, everything
        self.calls: list[tuple[str | None, int]] = []

    def candidate_pool(self, scope: str | None, limit: int) -> list[MemoryRecord]:
        self.calls.append((scope, limit))
        return list(self.scoped if scope is not None else self.everything)

    def now(self) -> datetime:
        return NOW


def test_the_pool_lists_scoped_then_everything_and_ranks() -> None:
    matching = record("matching", hours_old=48, scope=ALPHA, tags=["deploy"])
    recent = record("recent", hours_old=0)
    duplicate = record("duplicate", hours_old=300)
    uow = PoolUnitOfWork([matching, duplicate], [recent, duplicate])
    req = request(content="x", scope=ALPHA, tags=["deploy"])

    pool = candidate_pool(req, fallback_interpretation(req), uow)  # type: ignore[arg-type]

    assert uow.calls == [(ALPHA, 80), (None, 80)]
    assert [r.id for r in pool] == ["matching", "recent", "duplicate"]


def test_an_unscoped_capture_lists_once_and_keeps_twenty_newest_first() -> None:
    # all in the future, so every score is exactly 1: the newest win the tie
    records = [record(f"r{i:02d}", hours_old=-float(i)) for i in range(30)]
    uow = PoolUnitOfWork([], records)
    req = request(content="x")

    pool = candidate_pool(req, fallback_interpretation(req), uow)  # type: ignore[arg-type]

    assert uow.calls == [(None, 80)]
    assert [r.id for r in pool] == [f"r{i:02d}" for i in range(29, 9, -1)]


def test_term_matching_is_equality_substring_or_word() -> None:
    assert term_matches(["orchid"], "orchid")
    assert term_matches(["orchid staging"], "staging")
    assert term_matches(["orchid"], "orchid deploy target")
    assert not term_matches(["orch"], "orchid")


def test_helpers() -> None:
    assert summarize("as is") == "as is"
    assert summarize({"b": 1, "a": "<x>"}) == '{"a":"\\u003cx\\u003e","b":1}'
    assert summarize(None) == "null"
    assert inverse_predicate("depends_on") == "dependency_of"
    assert inverse_predicate("caused_by") == "causes"
    assert inverse_predicate("supports") == "supported_by"
    assert inverse_predicate("contradicts") == "contradicted_by"
    assert inverse_predicate("mentions_entity") == "mentioned_in"
    assert inverse_predicate("Owns") == "inverse_of_owns"
    assert [entity_type_of_kind(k) for k in ("person", "tool", "project", "file", "concept")] == [
        "Person",
        "Tool",
        "Project",
        "File",
        "Concept",
    ]
    assert entity_type_of_kind("planet") == "Other"
    assert [
        infer_entity_kind(k)
        for k in ("tool_name", "project", "file_path", "user", "subject", "topic")
    ] == ["tool", "project", "file", "person", "concept", "concept"]
    assert [infer_proposed_type(k) for k in ("working_state", "observation", "event", "")] == [
        "working",
        "semantic",
        "episodic",
        "episodic",
    ]
    assert semantic_fact({"fact": {"subject": "a", "predicate": "b", "object": None}}) == (
        "a",
        "b",
        None,
    )
    assert semantic_fact({"fact": {}, "subject": "a", "predicate": "b", "object": 1}) == (
        "a",
        "b",
        1,
    )
    assert semantic_fact({"subject": "a", "predicate": "b"}) is None
    assert semantic_fact({"subject": " ", "predicate": "b", "object": 1}) is None
    assert string_list(["a", "A", " b ", "", 3, 2.5]) == ["a", "b", "3", "2.5"]
    assert string_list("not a list") == []
    assert constraint_list([{"required": 1}, {"required": True, "key": "k"}]) == [
        Constraint(required=False),
        Constraint(key="k", required=True),
    ]
    assert looks_like_entity_id("entity-1")
    assert looks_like_entity_id("0b7c7a3e-7a39-4c3e-9c1f-1d2e3f4a5b6c")
    assert not looks_like_entity_id("deploy-target")


def test_fallback_interpretation() -> None:
    req = request(
        content={"project": "Orchid", "Project": "ignored", "my_entity": 7, "ref": "r-1", "id": 5},
        context={"parent_ref": "r-0", "record_id": "", "id": "c-1"},
        tags=[" ops", "OPS", "", "release"],
        source_kind="observation",
    )

    interpretation = fallback_interpretation(req)

    assert interpretation.status == "tentative"
    assert interpretation.proposed_type == "semantic"
    assert interpretation.topical_labels == ["ops", "release"]
    assert interpretation.extraction_confidence == 0.25
    assert [(m.surface, m.entity_kind, m.confidence) for m in interpretation.mentions] == [
        ("Orchid", "project", 0.5),
        ("7", "concept", 0.5),
    ]
    assert [r.ref for r in interpretation.reference_candidates] == ["r-1", "5", "r-0", "c-1"]


def test_merging_an_interpretation() -> None:
    base = Interpretation(
        status="tentative",
        summary="base",
        topical_labels=["a"],
        mentions=[Mention(surface="x")],
        extraction_confidence=0.25,
    )
    offered = Interpretation(summary=" ", topical_labels=["A", "b"], extraction_confidence=0.0)

    merged = merge_interpretation(base, offered)

    assert merged.summary == "base"
    assert merged.topical_labels == ["a", "b"]
    assert merged.mentions == [Mention(surface="x")]
    assert merged.extraction_confidence == 0.25
    assert merge_interpretation(base, None) is base

"""The older API's ingest operations (spec §2.1–2.3, history §2.1; I1–I5, A6, V2, V5).

Each maps onto the same events as everything else: a ``Created`` record (and, for an
observation about known entities, ``RelationAdded`` on them in the same write), or an
``OutcomeRecorded`` on the target episode.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from membrane_es import (
    EpisodicPayload,
    Membrane,
    MemoryRecord,
    MemoryType,
    NotFoundError,
    SemanticPayload,
    ValidationError,
    WorkingPayload,
)
from membrane_es.schema import Constraint, ProvenanceKind, Sensitivity
from membrane_es.timekeeping.clock import MonotonicClock
from membrane_es.timekeeping.decay import DAY
from tests.unit.builders import FULL_TRUST, audit_trail, entity, log_size, read, semantic
from tests.unit.conftest import START
from tests.unit.test_atomicity import InjectedFault, fail_part_way, spy_inserts

MOMENT = datetime(2024, 6, 1, 9, 0, tzinfo=UTC)


def episodic_payload(record: MemoryRecord) -> EpisodicPayload:
    assert isinstance(record.payload, EpisodicPayload)
    return record.payload


def semantic_payload(record: MemoryRecord) -> SemanticPayload:
    assert isinstance(record.payload, SemanticPayload)
    return record.payload


def same(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Equal but for salience (it decays between two reads)."""
    return msgspec.structs.replace(a, salience=0.0) == msgspec.structs.replace(b, salience=0.0)


def relations(memory: Membrane, record_id: str) -> list[tuple[str, str]]:
    return [(r.predicate, r.target_id) for r in read(memory, record_id).relations]


@pytest.fixture
def medium_default(clock: MonotonicClock) -> Iterator[Membrane]:
    engine = Membrane.in_memory(clock=clock, default_sensitivity="medium")
    yield engine
    engine.close()


# --- events ---------------------------------------------------------------------------------------


def test_ingest_event(memory: Membrane) -> None:
    record = memory.ingest_event(
        "deploy",
        "evt-1",
        summary="deployed api",
        source="ci",
        tags=["release"],
        scope="alpha",
        timestamp=MOMENT,
    )

    assert record.type is MemoryType.EPISODIC
    [event] = episodic_payload(record).timeline
    assert (event.t, event.event_kind, event.ref, event.summary) == (
        MOMENT,
        "deploy",
        "evt-1",
        "deployed api",
    )
    assert (record.confidence, record.sensitivity) == (0.8, Sensitivity.LOW)
    # it fades from when it happened (event time), not from when it was written
    assert record.created_at == MOMENT
    elapsed = (START - MOMENT).total_seconds()
    assert record.salience == pytest.approx(2 ** (-elapsed / DAY), rel=1e-3)
    assert (record.scope, record.tags) == ("alpha", ["release"])
    decay = record.lifecycle.decay
    assert (decay.half_life_seconds, decay.min_salience, decay.max_age_seconds) == (DAY, 0, 0)
    assert record.lifecycle.deletion_policy == "auto_prune"
    [source] = record.provenance.sources
    assert (source.kind, source.ref, source.created_by, source.timestamp) == (
        ProvenanceKind.EVENT,
        "evt-1",
        "ci",
        MOMENT,
    )
    assert record.provenance.created_by == "ingestion-service"
    assert record.updated_at != MOMENT  # written now; created_at is when it happened
    assert audit_trail(record) == [("create", "ingestion-service", "Ingested event from ci")]
    assert same(read(memory, record.id), record)


def test_ingest_sensitivity_configured_default_and_override(
    memory: Membrane, medium_default: Membrane
) -> None:
    assert memory.ingest_event("k", "r").sensitivity is Sensitivity.LOW
    assert medium_default.ingest_event("k", "r").sensitivity is Sensitivity.MEDIUM
    assert medium_default.ingest_event("k", "r", sensitivity="high").sensitivity == "high"
    assert medium_default.ingest_observation("s", "p", "o").sensitivity is Sensitivity.MEDIUM


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        ({"event_kind": "", "ref": "r"}, "event_kind", "event kind is required for event"),
        ({"event_kind": "k", "ref": ""}, "ref", "event ref is required for event candidates"),
        ({"event_kind": "k", "ref": "r", "source": ""}, "source", "candidate source is required"),
        ({"event_kind": "k", "ref": "r", "sensitivity": "x"}, "sensitivity", "must be one of"),
        ({"event_kind": "k", "ref": "r", "timestamp": "soon"}, "timestamp", "invalid timestamp"),
        ({"event_kind": "k" * 100_001, "ref": "r"}, "event_kind", "exceeds maximum length"),
        ({"event_kind": "k", "ref": "r", "tags": ["a", "a"]}, "tags[1]", "duplicate tag"),
    ],
)
def test_ingest_event_rejects(
    memory: Membrane, arguments: dict[str, Any], field: str, message: str
) -> None:
    event_kind, ref = arguments.pop("event_kind"), arguments.pop("ref")

    with pytest.raises(ValidationError, match=message) as caught:
        memory.ingest_event(event_kind, ref, **arguments)

    assert caught.value.field == field
    assert log_size(memory) == 0


def test_policy_errors_name_the_policy(memory: Membrane) -> None:
    with pytest.raises(ValidationError, match="ingestion policy: event ref is required"):
        memory.ingest_event("k", "")


# --- tool output (I3) -----------------------------------------------------------------------------


def test_ingest_tool_output(memory: Membrane) -> None:
    record = memory.ingest_tool_output(
        "rg",
        args={"pattern": "TODO"},
        result=["a.py:3"],
        depends_on=["node-0"],
        timestamp=MOMENT,
        source="agent",
    )

    payload = episodic_payload(record)
    [node] = payload.tool_graph
    assert (node.tool, node.args, node.result, node.depends_on, node.timestamp) == (
        "rg",
        {"pattern": "TODO"},
        ["a.py:3"],
        ["node-0"],
        MOMENT,
    )
    [event] = payload.timeline
    assert (event.t, event.event_kind, event.ref, event.summary) == (
        MOMENT,
        "tool_call",
        node.id,
        "tool_call: rg",
    )
    assert record.confidence == 0.9
    assert record.lifecycle.decay.half_life_seconds == DAY
    [source] = record.provenance.sources
    assert (source.kind, source.ref) == (ProvenanceKind.TOOL_CALL, node.id)
    assert audit_trail(record) == [
        ("create", "ingestion-service", "Ingested tool_output from agent")
    ]


def test_ingest_tool_output_needs_a_tool_name(memory: Membrane) -> None:
    with pytest.raises(ValidationError, match="tool name is required for tool output candidates"):
        memory.ingest_tool_output("")


def test_ingest_tool_output_result_size_is_limited(memory: Membrane) -> None:
    with pytest.raises(ValidationError, match="result exceeds maximum payload size"):
        memory.ingest_tool_output("rg", result="x" * (10 * 1024 * 1024))


# --- observations (I2, A6) ------------------------------------------------------------------------


def test_ingest_observation(memory: Membrane) -> None:
    record = memory.ingest_observation(
        "api",
        "listens_on",
        {"port": 8080},
        sensitivity="high",
        source="netstat",
        scope="alpha",
        timestamp=MOMENT,
    )

    assert record.type is MemoryType.SEMANTIC
    assert (record.sensitivity, record.confidence, record.scope) == (Sensitivity.HIGH, 0.7, "alpha")
    assert record.lifecycle.decay.half_life_seconds == 365 * DAY
    payload = semantic_payload(record)
    assert (payload.subject, payload.predicate, payload.object) == (
        "api",
        "listens_on",
        {"port": 8080},
    )
    assert payload.validity.mode == "global"
    assert payload.revision_policy == "replace"
    [evidence] = payload.evidence
    assert (evidence.source_type, evidence.source_id, evidence.timestamp) == (
        "observation",
        "netstat",
        MOMENT,
    )
    [source] = record.provenance.sources
    assert (source.kind, source.ref) == (ProvenanceKind.OBSERVATION, "netstat")
    assert record.relations == []


def test_observation_subject_and_object_become_known_entities(
    memory: Membrane, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = memory.create_record(entity("API", scope="alpha"))
    postgres = memory.create_record(entity("Postgres"))
    spy = spy_inserts(memory, monkeypatch)

    record = memory.ingest_observation("api", "depends_on", "postgres", scope="alpha")

    payload = semantic_payload(record)
    assert (payload.subject, payload.object) == (api.id, postgres.id)
    assert [(r.predicate, r.target_id) for r in record.relations] == [
        ("subject_entity", api.id),
        ("object_entity", postgres.id),
    ]
    assert relations(memory, api.id) == [("fact_subject_of", record.id)]
    assert relations(memory, postgres.id) == [("fact_object_of", record.id)]
    assert spy.calls == [3]  # the fact and both reverse edges: one write


def test_observation_about_one_entity_twice(memory: Membrane) -> None:
    api = memory.create_record(entity("API"))

    record = memory.ingest_observation("API", "is", "api")

    assert relations(memory, api.id) == [
        ("fact_subject_of", record.id),
        ("fact_object_of", record.id),
    ]


def test_observation_ignores_entities_of_other_scopes_and_non_string_objects(
    memory: Membrane,
) -> None:
    memory.create_record(entity("Nimbus", scope="beta"))
    memory.create_record(entity("42"))

    record = memory.ingest_observation("Nimbus", "answer", 42, scope="alpha")

    payload = semantic_payload(record)
    assert (payload.subject, payload.object) == ("Nimbus", 42)
    assert record.relations == []


def test_observation_whose_reverse_edge_fails_writes_nothing(
    memory: Membrane, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = memory.create_record(entity("API"))
    before = log_size(memory)
    fail_part_way(memory, monkeypatch, allow=1)

    with pytest.raises(InjectedFault):
        memory.ingest_observation("API", "listens_on", 8080)

    assert log_size(memory) == before
    assert relations(memory, api.id) == []
    assert [r.id for r in memory.retrieve(trust=FULL_TRUST).records] == [api.id]


@pytest.mark.parametrize(
    ("subject", "predicate", "source", "message"),
    [
        ("", "p", "s", "subject is required for observation candidates"),
        ("s", "", "s", "predicate is required for observation candidates"),
        ("s", "p", "", "candidate source is required"),
    ],
)
def test_observation_policy(
    memory: Membrane, subject: str, predicate: str, source: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        memory.ingest_observation(subject, predicate, "o", source=source)


# --- outcomes (I4, V2) ----------------------------------------------------------------------------


def test_ingest_outcome(memory: Membrane) -> None:
    episode = memory.ingest_event("deploy", "evt-1", source="ci")

    updated = memory.ingest_outcome(episode.id, "success", source="monitor")

    assert episodic_payload(updated).outcome == "success"
    first, second = updated.provenance.sources
    assert first.kind is ProvenanceKind.EVENT
    assert (second.kind, second.ref, second.created_by) == (
        ProvenanceKind.OUTCOME,
        f"outcome:{episode.id}:success",
        "monitor",
    )
    assert audit_trail(updated) == [
        ("create", "ingestion-service", "Ingested event from ci"),
        ("revise", "monitor", "Outcome recorded: success"),
    ]
    assert updated.updated_at is not None and episode.updated_at is not None
    assert updated.updated_at > episode.updated_at
    assert same(read(memory, episode.id), updated)


@pytest.mark.parametrize(
    ("status", "source", "message"),
    [
        ("won", "m", 'invalid outcome status "won"'),
        ("", "m", "outcome status is required"),
        ("success", "", "candidate source is required"),
    ],
)
def test_ingest_outcome_rejects(memory: Membrane, status: str, source: str, message: str) -> None:
    episode = memory.ingest_event("deploy", "evt-1")

    with pytest.raises(ValidationError, match=message):
        memory.ingest_outcome(episode.id, status, source=source)


def test_ingest_outcome_needs_an_existing_episodic_target(memory: Membrane) -> None:
    fact = memory.create_record(semantic())

    with pytest.raises(ValidationError, match="target record ID is required"):
        memory.ingest_outcome("", "success")
    with pytest.raises(NotFoundError):
        memory.ingest_outcome("missing", "success")
    with pytest.raises(ValidationError, match=f"target record {fact.id} is not episodic"):
        memory.ingest_outcome(fact.id, "failure")


# --- working state (I5) ---------------------------------------------------------------------------


def test_ingest_working_state(memory: Membrane) -> None:
    record = memory.ingest_working_state(
        "thread-1",
        "blocked",
        next_actions=["ask for review"],
        open_questions=["who owns it?"],
        context_summary="waiting on review",
        active_constraints=[
            {"type": "deadline", "key": "due", "value": "friday", "required": True},
            Constraint(type="budget", key="usd", value=100),
        ],
        timestamp=MOMENT,
    )

    assert record.type is MemoryType.WORKING
    payload = record.payload
    assert isinstance(payload, WorkingPayload)
    assert (payload.thread_id, payload.state, payload.context_summary) == (
        "thread-1",
        "blocked",
        "waiting on review",
    )
    assert payload.next_actions == ["ask for review"]
    assert payload.open_questions == ["who owns it?"]
    assert payload.active_constraints == [
        Constraint(type="deadline", key="due", value="friday", required=True),
        Constraint(type="budget", key="usd", value=100),
    ]
    assert (record.confidence, record.lifecycle.decay.half_life_seconds) == (1.0, 7 * DAY)
    [source] = record.provenance.sources
    assert (source.kind, source.ref, source.timestamp) == (ProvenanceKind.EVENT, "thread-1", MOMENT)
    assert audit_trail(record) == [
        ("create", "ingestion-service", "Ingested working_state from python-client")
    ]


@pytest.mark.parametrize(
    ("thread_id", "state", "message"),
    [
        ("", "executing", "thread ID is required for working state candidates"),
        ("t", "", "task state is required for working state candidates"),
        ("t", "sleeping", "state must be one of: planning, executing"),
    ],
)
def test_ingest_working_state_rejects(
    memory: Membrane, thread_id: str, state: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        memory.ingest_working_state(thread_id, state)


def test_constraints_must_be_objects(memory: Membrane) -> None:
    with pytest.raises(ValidationError) as caught:
        memory.ingest_working_state("t", "done", active_constraints=["not an object"])

    assert caught.value.field == "active_constraints"


# --- configuration (V5) ---------------------------------------------------------------------------


def test_an_invalid_default_sensitivity_is_refused(clock: MonotonicClock) -> None:
    with pytest.raises(ValidationError, match='invalid default sensitivity "secret"'):
        Membrane.in_memory(clock=clock, default_sensitivity="secret")

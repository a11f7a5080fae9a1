"""Records ⇄ ``membrane.v1`` messages (spec §8.3, §10.13 P13)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from membrane_es import Membrane, TrustContext
from membrane_es.errors import ValidationError
from membrane_es.grpc_server import convert
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.schema.records import GraphEdge, MemoryRecord
from membrane_es.schema.validation import coerce_record

FULL_RECORDS: list[dict[str, Any]] = [
    {
        "type": "episodic",
        "payload": {
            "kind": "episodic",
            "timeline": [{"t": "2026-05-01T12:00:00.5Z", "event_kind": "run", "ref": "r1"}],
            "tool_graph": [
                {"id": "n1", "tool": "bash", "args": {"cmd": "ls", "n": 2}, "depends_on": []},
                {"id": "n2", "tool": "bash", "result": {"ok": True}, "depends_on": ["n1"]},
            ],
            "environment": {
                "os": "linux",
                "tool_versions": {"go": "1.22"},
                "context": {"cwd": "/tmp"},
            },
            "outcome": "success",
            "artifacts": ["log.txt"],
        },
    },
    {
        "type": "working",
        "payload": {
            "kind": "working",
            "thread_id": "t-1",
            "state": "executing",
            "active_constraints": [
                {"type": "limit", "key": "budget", "value": 10, "required": True},
                {"type": "note", "key": "empty"},
            ],
            "next_actions": ["test"],
            "open_questions": ["why?"],
            "context_summary": "halfway",
        },
    },
    {
        "type": "semantic",
        "provenance": {"sources": [{"kind": "observation", "ref": "obs-1"}]},
        "payload": {
            "kind": "semantic",
            "subject": "Orchid",
            "predicate": "deploy_target",
            "object": {"env": "staging", "replicas": 3},
            "validity": {
                "mode": "conditional",
                "conditions": {"region": "eu"},
                "start": "2026-01-01T00:00:00Z",
                "end": "2027-01-01T00:00:00Z",
            },
            "evidence": [{"source_type": "observation", "source_id": "obs-1"}],
            "revision_policy": "replace",
        },
    },
    {
        "type": "competence",
        "payload": {
            "kind": "competence",
            "skill_name": "deploy",
            "triggers": [{"signal": "deploy requested", "conditions": {"env": "prod"}}],
            "recipe": [{"step": "build", "tool": "make", "args_schema": {"target": "string"}}],
            "required_tools": ["make"],
            "failure_modes": ["timeout"],
            "fallbacks": ["retry"],
            "performance": {
                "success_count": 9,
                "failure_count": 1,
                "success_rate": 0.9,
                "avg_latency_ms": 120.5,
                "last_used_at": "2026-05-01T12:00:00Z",
            },
            "version": "2",
        },
    },
    {
        "type": "plan_graph",
        "payload": {
            "kind": "plan_graph",
            "plan_id": "p1",
            "version": "1",
            "intent": "release",
            "constraints": {"max_minutes": 30},
            "nodes": [{"id": "a", "op": "build", "params": {"x": 1}}, {"id": "b", "op": "ship"}],
            "edges": [{"from": "a", "to": "b", "kind": "control"}],
            "metrics": {"avg_latency_ms": 5.0, "failure_rate": 0.1, "execution_count": 4},
        },
    },
    {
        "type": "entity",
        "payload": {
            "kind": "entity",
            "canonical_name": "Orchid",
            "primary_type": "Project",
            "types": ["Project"],
            "aliases": [{"value": "orchid-app", "kind": "slug"}],
            "identifiers": [{"namespace": "github", "value": "acme/orchid"}],
            "summary": "the deploy service",
        },
    },
]


@pytest.mark.parametrize("data", FULL_RECORDS, ids=[d["type"] for d in FULL_RECORDS])
def test_every_payload_variant_round_trips(data: dict[str, Any]) -> None:
    record = coerce_record(
        {
            "id": "rec-1",
            "created_at": "2026-05-01T12:00:00.123456Z",
            "updated_at": "2026-05-01T12:00:01Z",
            "tags": ["a", "b"],
            "scope": "alpha",
            "sensitivity": "medium",
            "confidence": 0.75,
            "salience": 0.5,
            "relations": [{"predicate": "supports", "target_id": "rec-2", "weight": 0.5}],
            **data,
        }
    )
    wire = convert.record_to_wire(record)
    assert wire.payload.WhichOneof("kind") == record.type.value
    back = convert.record_from_wire(wire, True, "record")
    assert back == record


def test_times_use_the_reference_form() -> None:
    edge = GraphEdge(
        source_id="a",
        predicate="p",
        target_id="b",
        created_at=datetime(2026, 5, 1, 12, 0, 0, 123400, tzinfo=UTC),
    )
    assert convert.edge_to_wire(edge).created_at == "2026-05-01T12:00:00.1234Z"
    edge = GraphEdge(source_id="a", predicate="p", target_id="b")
    assert convert.edge_to_wire(edge).created_at == ""


def test_absent_values_travel_as_explicit_nulls_and_empty_maps_are_omitted() -> None:
    record = coerce_record(FULL_RECORDS[1])  # the second constraint has no value
    wire = convert.record_to_wire(record)
    constraints = wire.payload.working.active_constraints
    assert constraints[1].HasField("value")
    assert constraints[1].value.WhichOneof("kind") == "null_value"
    episodic = convert.record_to_wire(coerce_record(FULL_RECORDS[0])).payload.episodic
    assert episodic.tool_graph[0].result.WhichOneof("kind") == "null_value"
    assert len(episodic.tool_graph[1].args) == 0


def test_lifecycle_and_provenance_are_always_present() -> None:
    record = coerce_record({"type": "entity", "payload": {"kind": "entity", "canonical_name": "X"}})
    wire = convert.record_to_wire(record)
    assert wire.HasField("lifecycle") and wire.HasField("provenance")
    assert not wire.HasField("interpretation")


def test_a_missing_lifecycle_takes_the_defaults() -> None:
    wire = pb.MemoryRecord(type="entity", confidence=0.5)
    wire.payload.entity.canonical_name = "X"
    record = convert.record_from_wire(wire, True, "new_record")
    assert record.lifecycle.decay.half_life_seconds == 86_400
    assert record.confidence == 0.5
    assert record.salience == 0.0  # proto3 zero is a zero, as on the reference server


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: (pb.MemoryRecord(), False), "invalid new_record: record is required"),
        (
            lambda: (pb.MemoryRecord(type="semantic"), True),
            "invalid new_record: payload is required",
        ),
    ],
)
def test_incoming_errors_name_the_record(build: Any, message: str) -> None:
    wire, present = build()
    with pytest.raises(ValidationError) as caught:
        convert.record_from_wire(wire, present, "new_record")
    assert caught.value.message == message


def test_an_unparseable_time_names_its_field() -> None:
    wire = pb.MemoryRecord(type="entity")
    wire.payload.entity.canonical_name = "X"
    wire.relations.add(predicate="p", target_id="t", created_at="not-a-time")
    with pytest.raises(ValidationError) as caught:
        convert.record_from_wire(wire, True, "merged_record")
    assert caught.value.message.startswith("invalid merged_record: relations[0].created_at")


def test_graph_results_keep_order_and_omit_an_absent_selection() -> None:
    memory = Membrane.in_memory()
    fact = memory.capture_memory(
        {"subject": "Orchid", "predicate": "deploy_target", "object": "staging"},
        source_kind="observation",
    )
    result = memory.retrieve_graph("Orchid", trust=TrustContext(max_sensitivity="hyper"))
    wire = convert.graph_to_wire(result)
    assert [n.record.id for n in wire.nodes] == [n.record.id for n in result.nodes]
    assert list(wire.root_ids) == result.root_ids
    assert not wire.HasField("selection")
    assert fact.primary_record.id


def test_a_redacted_record_has_no_payload_on_the_wire() -> None:
    memory = Membrane.in_memory()
    memory.capture_memory({"ref": "m", "text": "secret"}, source_kind="event", sensitivity="medium")
    result = memory.retrieve_graph(trust=TrustContext(max_sensitivity="low"))
    redacted: MemoryRecord = result.nodes[0].record
    wire = convert.record_to_wire(redacted)
    assert not wire.HasField("payload")
    assert wire.sensitivity == "medium"


@pytest.mark.parametrize("data", FULL_RECORDS, ids=[d["type"] for d in FULL_RECORDS])
def test_the_fast_builder_equals_the_generic_json_mapping(data: dict[str, Any]) -> None:
    """``record_to_wire`` builds messages directly; protobuf's own JSON mapping of the same
    builtins must give the identical message."""
    from google.protobuf import json_format

    record = coerce_record(
        {"interpretation": {"summary": "s", "mentions": [{"surface": "X"}]}, **data}
    )
    reference = pb.MemoryRecord()
    json_format.ParseDict(convert._record_dict(record), reference)
    assert convert.record_to_wire(record) == reference

"""The request checks of spec §8.4 and the status mapping of §8.6, over the wire
(§10.13 P8, P10): every message as the reference words it, and nothing written."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from tests.integration.grpc.conftest import AUTH, FULL, as_dict, code_of, observe, value

Stub = pb_grpc.MembraneServiceStub
SENSITIVITIES = "public, low, medium, high, hyper"
TYPES = "episodic, working, semantic, competence, plan_graph, entity"
LONG = "x" * 100_001


def _capture(**fields: Any) -> Callable[[Stub], Any]:
    fields.setdefault("source", "python-client")
    fields.setdefault("source_kind", "agent_turn")
    fields.setdefault("content", value({"text": "hello"}))
    return lambda stub: stub.CaptureMemory(pb.CaptureMemoryRequest(**fields), metadata=AUTH)


def _graph(**fields: Any) -> Callable[[Stub], Any]:
    fields.setdefault("trust", FULL)
    return lambda stub: stub.RetrieveGraph(pb.RetrieveGraphRequest(**fields), metadata=AUTH)


CASES: list[tuple[str, Callable[[Stub], Any], str]] = [
    ("capture source", _capture(source=LONG), "source exceeds maximum length of 100000"),
    (
        "capture source_kind",
        _capture(source_kind=LONG),
        "source_kind exceeds maximum length of 100000",
    ),
    (
        "capture reason",
        _capture(reason_to_remember=LONG),
        "reason_to_remember exceeds maximum length of 100000",
    ),
    ("capture summary", _capture(summary=LONG), "summary exceeds maximum length of 100000"),
    ("capture scope", _capture(scope=LONG), "scope exceeds maximum length of 100000"),
    ("capture tag count", _capture(tags=["t"] * 101), "too many tags: 101 (max 100)"),
    ("capture tag length", _capture(tags=["t" * 300]), "tag exceeds maximum length of 256"),
    (
        "capture sensitivity",
        _capture(sensitivity="anything"),
        f"sensitivity must be one of: {SENSITIVITIES}",
    ),
    (
        "capture proposed_type",
        _capture(proposed_type="anything"),
        f"proposed_type must be one of: {TYPES}",
    ),
    (
        "capture content size",
        _capture(content=value("x" * (10 * 1024 * 1024 + 1))),
        "content exceeds maximum payload size of 10485760 bytes",
    ),
    (
        "capture context size",
        _capture(context=value("x" * (10 * 1024 * 1024 + 1))),
        "context exceeds maximum payload size of 10485760 bytes",
    ),
    ("capture timestamp", _capture(timestamp="not-a-time"), "invalid timestamp:"),
    ("capture naive timestamp", _capture(timestamp="2026-05-01T12:00:00"), "invalid timestamp:"),
    ("capture empty source", _capture(source=""), "source"),
    (
        "graph trust missing",
        lambda stub: stub.RetrieveGraph(pb.RetrieveGraphRequest(), metadata=AUTH),
        "trust context is required",
    ),
    (
        "graph descriptor",
        _graph(task_descriptor=LONG),
        "task_descriptor exceeds maximum length of 100000",
    ),
    (
        "graph trust level missing",
        _graph(trust=pb.TrustContext()),
        "trust.max_sensitivity is required",
    ),
    (
        "graph trust level",
        _graph(trust=pb.TrustContext(max_sensitivity="anything")),
        f"trust.max_sensitivity must be one of: {SENSITIVITIES}",
    ),
    (
        "graph min_salience",
        _graph(min_salience=math.inf),
        "min_salience must be non-negative and finite",
    ),
    (
        "graph negative min_salience",
        _graph(min_salience=-0.5),
        "min_salience must be non-negative and finite",
    ),
    ("graph root_limit", _graph(root_limit=20_000), "root_limit must be between 0 and 10000"),
    ("graph node_limit", _graph(node_limit=-1), "node_limit must be between 0 and 10000"),
    ("graph edge_limit", _graph(edge_limit=10_001), "edge_limit must be between 0 and 10000"),
    ("graph max_hops", _graph(max_hops=-2), "max_hops must be between -1 and 10000"),
    (
        "graph memory type",
        _graph(memory_types=["semantic", "anything"]),
        f"memory_types[1] must be one of: {TYPES}",
    ),
    (
        "by id trust missing",
        lambda stub: stub.RetrieveByID(pb.RetrieveByIDRequest(id="x"), metadata=AUTH),
        "trust context is required",
    ),
    (
        "by id trust level",
        lambda stub: stub.RetrieveByID(
            pb.RetrieveByIDRequest(id="x", trust=pb.TrustContext(max_sensitivity="anything")),
            metadata=AUTH,
        ),
        f"trust.max_sensitivity must be one of: {SENSITIVITIES}",
    ),
    (
        "merge no ids",
        lambda stub: stub.Merge(pb.MergeRequest(actor="a", rationale="r"), metadata=AUTH),
        "ids must not be empty",
    ),
    (
        "merge too many ids",
        lambda stub: stub.Merge(
            pb.MergeRequest(ids=[f"id-{i}" for i in range(10_001)], actor="a", rationale="r"),
            metadata=AUTH,
        ),
        "too many ids: 10001 (max 10000)",
    ),
    (
        "merge no record",
        lambda stub: stub.Merge(pb.MergeRequest(ids=["a", "b"]), metadata=AUTH),
        "invalid merged_record: record is required",
    ),
    (
        "supersede no record",
        lambda stub: stub.Supersede(pb.SupersedeRequest(old_id="x"), metadata=AUTH),
        "invalid new_record: record is required",
    ),
    (
        "supersede no payload",
        lambda stub: stub.Supersede(
            pb.SupersedeRequest(old_id="x", new_record=pb.MemoryRecord(type="semantic")),
            metadata=AUTH,
        ),
        "invalid new_record: payload is required",
    ),
    (
        "fork no record",
        lambda stub: stub.Fork(pb.ForkRequest(source_id="x"), metadata=AUTH),
        "invalid forked_record: record is required",
    ),
    (
        "penalize negative",
        lambda stub: stub.Penalize(pb.PenalizeRequest(id="x", amount=-0.1), metadata=AUTH),
        "amount must be non-negative and finite",
    ),
    (
        "penalize NaN",
        lambda stub: stub.Penalize(pb.PenalizeRequest(id="x", amount=math.nan), metadata=AUTH),
        "amount must be non-negative and finite",
    ),
    (
        "penalize checks amount before actor",
        lambda stub: stub.Penalize(
            pb.PenalizeRequest(id="x", amount=math.inf, actor=LONG), metadata=AUTH
        ),
        "amount must be non-negative and finite",
    ),
    (
        "reinforce actor",
        lambda stub: stub.Reinforce(pb.ReinforceRequest(id="x", actor=LONG), metadata=AUTH),
        "actor exceeds maximum length of 100000",
    ),
    (
        "contest rationale",
        lambda stub: stub.Contest(
            pb.ContestRequest(id="x", actor="a", rationale=LONG), metadata=AUTH
        ),
        "rationale exceeds maximum length of 100000",
    ),
]


@pytest.mark.parametrize("name, call, message", CASES, ids=[c[0] for c in CASES])
def test_invalid_requests_are_refused_with_the_reference_message(
    stub: Stub, name: str, call: Callable[[Stub], Any], message: str
) -> None:
    code, details = code_of(lambda: call(stub))
    assert code is grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.startswith(message) or message in details, details
    snapshot = as_dict(stub.GetMetrics(pb.GetMetricsRequest(), metadata=AUTH))["snapshot"]
    assert snapshot["total_records"] == 0  # nothing was written


def test_checks_run_in_the_reference_order(stub: Stub) -> None:
    """The first failing check wins: here trust comes before the descriptor's length."""
    code, details = code_of(
        lambda: stub.RetrieveGraph(
            pb.RetrieveGraphRequest(task_descriptor=LONG, root_limit=-5), metadata=AUTH
        )
    )
    assert (code, details) == (grpc.StatusCode.INVALID_ARGUMENT, "trust context is required")
    code, details = code_of(
        lambda: stub.CaptureMemory(
            pb.CaptureMemoryRequest(source=LONG, tags=["t"] * 101), metadata=AUTH
        )
    )
    assert details == "source exceeds maximum length of 100000"


def test_a_max_hops_of_minus_one_is_accepted(stub: Stub) -> None:
    assert stub.RetrieveGraph(pb.RetrieveGraphRequest(trust=FULL, max_hops=-1), metadata=AUTH)


def test_an_invalid_record_names_its_field(stub: Stub) -> None:
    fact = observe(stub, "Orchid", "deploy_target", "staging")
    record = pb.MemoryRecord(type="semantic", created_at="yesterday")
    record.payload.semantic.CopyFrom(
        pb.SemanticPayload(kind="semantic", subject="Orchid", predicate="p", object=value("x"))
    )
    record.provenance.sources.add(kind="observation", ref="r")
    code, details = code_of(
        lambda: stub.Supersede(
            pb.SupersedeRequest(old_id=fact.id, new_record=record, actor="a", rationale="r"),
            metadata=AUTH,
        )
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("invalid new_record: created_at"), details


def test_a_semantic_revision_without_evidence_is_invalid(stub: Stub) -> None:
    fact = observe(stub, "Orchid", "deploy_target", "staging")
    record = pb.MemoryRecord(type="semantic")
    record.payload.semantic.CopyFrom(
        pb.SemanticPayload(kind="semantic", subject="Orchid", predicate="p", object=value("x"))
    )
    code, details = code_of(
        lambda: stub.Supersede(
            pb.SupersedeRequest(old_id=fact.id, new_record=record, actor="a", rationale="r"),
            metadata=AUTH,
        )
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT, details
    assert "evidence" in details

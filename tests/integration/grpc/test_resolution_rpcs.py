"""Over gRPC, writes keep Membrane's behaviour unless asked: every capture adds its fact
(resolution on write off by default, on per call or per daemon), and a revision never reads
more widely than what it revises unless the call says so."""

from __future__ import annotations

import grpc
import pytest

from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from tests.integration.grpc.conftest import (
    AUTH,
    FULL,
    StartDaemon,
    capture,
    code_of,
    value,
)

Stub = pb_grpc.MembraneServiceStub
FACT = {"subject": "Dana", "predicate": "city", "object": "Lisbon"}


def facts(response: pb.CaptureMemoryResponse) -> list[pb.MemoryRecord]:
    return [r for r in response.created_records if r.type == "semantic"]


def test_every_capture_adds_its_fact_unless_the_call_asks_for_resolution(stub: Stub) -> None:
    first = facts(capture(stub, FACT, source_kind="observation"))
    second = facts(capture(stub, FACT, source_kind="observation"))
    assert len(first) == len(second) == 1 and first[0].id != second[0].id

    asked = (*AUTH, ("x-membrane-resolve", "true"))
    moved = capture(stub, {**FACT, "object": "Faro"}, source_kind="observation", metadata=asked)
    (faro,) = facts(moved)
    old = stub.RetrieveByID(pb.RetrieveByIDRequest(id=first[0].id, trust=FULL), metadata=AUTH)
    assert old.record.salience == 0  # superseded: city holds one value at a time
    assert any(r.predicate == "supersedes" for r in faro.relations)
    bad = (*AUTH, ("x-membrane-resolve", "maybe"))
    code, details = code_of(lambda: capture(stub, FACT, source_kind="observation", metadata=bad))
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "x-membrane-resolve" in details


def test_a_daemon_configured_to_resolve_reinforces_a_repeat(start_daemon: StartDaemon) -> None:
    daemon = start_daemon(resolve_writes=True)
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        stub = pb_grpc.MembraneServiceStub(channel)
        first = facts(capture(stub, FACT, source_kind="observation"))
        again = capture(stub, FACT, source_kind="observation")
        assert len(first) == 1 and not facts(again)


@pytest.mark.parametrize("widen", [False, True])
def test_a_supersede_without_a_scope_keeps_the_old_one_unless_widened(
    stub: Stub, widen: bool
) -> None:
    (fact,) = facts(capture(stub, FACT, source_kind="observation", scope="user:dana"))
    new = pb.MemoryRecord(
        type="semantic",
        sensitivity="low",
        provenance=pb.Provenance(sources=[pb.ProvenanceSource(kind="observation", ref="chat")]),
    )
    new.payload.semantic.CopyFrom(
        pb.SemanticPayload(subject="Dana", predicate="city", object=value("Faro"))
    )
    metadata = (*AUTH, ("x-membrane-widen", "true")) if widen else AUTH
    created = stub.Supersede(
        pb.SupersedeRequest(old_id=fact.id, new_record=new, actor="t", rationale="moved"),
        metadata=metadata,
    ).record
    assert created.scope == ("" if widen else "user:dana")

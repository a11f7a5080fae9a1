"""``membrane_es.v1.MembraneEsService/Forget`` on a running daemon: the record reads redacted
through ``membrane.v1`` afterwards, errors map to their statuses, the API key rules and the
log position header apply as on every write RPC."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from membrane_es.grpc_server.server import Daemon
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2 as es_pb
from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2_grpc as es_pb_grpc
from tests.integration.grpc.conftest import AUTH, FULL, StartDaemon, capture, code_of, observe

SECRET = "Zanzibarquux"
LOW_KEY = (("authorization", "Bearer low-ceiling"),)


@pytest.fixture
def daemon(start_daemon: StartDaemon, tmp_path: Path) -> Daemon:
    keys = {
        "keys": [
            {"key_sha256": hashlib.sha256(b"python-integration-secret").hexdigest()},
            {"key": "low-ceiling", "max_sensitivity": "low"},
        ]
    }
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text(yaml.safe_dump(keys))
    return start_daemon(api_keys_file=str(keys_file), api_key="")


@pytest.fixture
def stubs(daemon: Daemon) -> Iterator[tuple[pb_grpc.MembraneServiceStub, Any]]:
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        yield pb_grpc.MembraneServiceStub(channel), es_pb_grpc.MembraneEsServiceStub(channel)


def test_forget_over_grpc(stubs: tuple[pb_grpc.MembraneServiceStub, Any]) -> None:
    stub, extensions = stubs
    fact = observe(stub, SECRET, "lives_in", "Lisbon")
    request = es_pb.ForgetRequest(id=fact.id, actor="dpo", rationale="erasure request")

    response, call = extensions.Forget.with_call(request, metadata=AUTH)

    assert list(response.forgotten_ids) == [fact.id]
    position = dict(call.initial_metadata())["x-membrane-position"]
    assert int(position) > 0
    record = stub.RetrieveByID(pb.RetrieveByIDRequest(id=fact.id, trust=FULL), metadata=AUTH)
    assert not record.record.HasField("payload")
    assert SECRET not in str(record)
    assert record.record.audit_log[-1].rationale == "forgotten: erasure request"
    assert code_of(lambda: extensions.Forget(request, metadata=AUTH)) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        f"record {fact.id} was forgotten: its content is erased",
    )


def test_forget_errors_and_access(stubs: tuple[pb_grpc.MembraneServiceStub, Any]) -> None:
    stub, extensions = stubs
    unknown = es_pb.ForgetRequest(id="nope", actor="dpo", rationale="why")
    assert code_of(lambda: extensions.Forget(unknown, metadata=AUTH))[0] == (
        grpc.StatusCode.NOT_FOUND
    )
    high = capture(stub, {"text": SECRET}, source_kind="event", sensitivity="high")
    record_id = high.primary_record.id
    blank = es_pb.ForgetRequest(id=record_id, actor="", rationale="why")
    code, message = code_of(lambda: extensions.Forget(blank, metadata=AUTH))
    assert (code, "actor" in message) == (grpc.StatusCode.INVALID_ARGUMENT, True)
    request = es_pb.ForgetRequest(id=record_id, actor="dpo", rationale="why")
    # a key whose ceiling is below the record may not erase it
    assert code_of(lambda: extensions.Forget(request, metadata=LOW_KEY))[0] == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    assert code_of(lambda: extensions.Forget(request))[0] == grpc.StatusCode.UNAUTHENTICATED
    assert extensions.Forget(request, metadata=AUTH).forgotten_ids[0] == record_id


def test_the_extension_service_reports_its_health(daemon: Daemon) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service="membrane_es.v1.MembraneEsService")
        answer = health.Check(request, metadata=AUTH)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING

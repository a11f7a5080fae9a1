"""A running daemon per test (loopback, temporary LMDB store) and clients for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import msgspec
import pytest
from google.protobuf import json_format, struct_pb2

from membrane_es.grpc_server.config import DaemonConfig
from membrane_es.grpc_server.server import Daemon
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc

API_KEY = "python-integration-secret"
AUTH = (("authorization", f"Bearer {API_KEY}"),)
FULL = pb.TrustContext(max_sensitivity="hyper", authenticated=True)

StartDaemon = Callable[..., Daemon]


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[StartDaemon]:
    """Starts daemons with config overrides; all are stopped after the test."""
    started: list[Daemon] = []

    def start(**overrides: Any) -> Daemon:
        settings: dict[str, Any] = {
            "db_path": str(tmp_path / f"store{len(started)}"),
            "listen_addr": "127.0.0.1:0",
            "api_key": API_KEY,
            "consolidation_interval": "0",
            **overrides,
        }
        daemon = Daemon(msgspec.convert(settings, DaemonConfig)).start()
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop(grace=0)


@pytest.fixture
def daemon(start_daemon: StartDaemon) -> Daemon:
    return start_daemon()


@pytest.fixture
def channel(daemon: Daemon) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        yield channel


@pytest.fixture
def stub(channel: grpc.Channel) -> pb_grpc.MembraneServiceStub:
    return pb_grpc.MembraneServiceStub(channel)


def value(data: Any) -> struct_pb2.Value:
    """Plain JSON as a google.protobuf.Value (what the SDKs send)."""
    message = struct_pb2.Value()
    json_format.ParseDict(data, message)
    return message


def as_dict(message: Any) -> dict[str, Any]:
    result: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return result


def code_of(call: Callable[[], Any]) -> tuple[grpc.StatusCode, str]:
    """The status a call ends with (OK when it succeeds)."""
    try:
        call()
    except grpc.RpcError as error:
        return error.code(), error.details()
    return grpc.StatusCode.OK, ""


def capture(
    stub: pb_grpc.MembraneServiceStub,
    content: Any,
    *,
    metadata: tuple[tuple[str, str], ...] = AUTH,
    **fields: Any,
) -> pb.CaptureMemoryResponse:
    fields.setdefault("source", "python-client")
    fields.setdefault("source_kind", "agent_turn")
    request = pb.CaptureMemoryRequest(content=value(content), **fields)
    response: pb.CaptureMemoryResponse = stub.CaptureMemory(request, metadata=metadata)
    return response


def observe(
    stub: pb_grpc.MembraneServiceStub, subject: str, predicate: str, obj: Any, **fields: Any
) -> pb.MemoryRecord:
    """Captures an observation and returns the semantic fact it derived."""
    response = capture(
        stub,
        {"subject": subject, "predicate": predicate, "object": obj},
        source_kind="observation",
        **fields,
    )
    facts = [r for r in response.created_records if r.type == "semantic"]
    assert len(facts) == 1, response
    return facts[0]

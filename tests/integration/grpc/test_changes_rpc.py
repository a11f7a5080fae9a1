"""``membrane_es.v1.MembraneEsService/Changes`` on a running daemon: the feed streamed under
the key's ceiling and tenant, followed as writes commit and ended by a cancel, resumed after
a position, and every bad parameter INVALID_ARGUMENT (never a server error)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2 as es_pb
from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2_grpc as es_pb_grpc
from tests.integration.grpc.conftest import AUTH, StartDaemon, capture, code_of

LOW_KEY = (("authorization", "Bearer low-ceiling"),)
ACME = (("authorization", "Bearer acme-key"),)


@pytest.fixture
def channel(start_daemon: StartDaemon, tmp_path: Path) -> Iterator[grpc.Channel]:
    keys = {
        "keys": [
            {"key_sha256": hashlib.sha256(b"python-integration-secret").hexdigest()},
            {"key": "low-ceiling", "max_sensitivity": "low"},
            {"key": "acme-key", "tenant": "acme"},
        ]
    }
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text(yaml.safe_dump(keys))
    daemon = start_daemon(api_keys_file=str(keys_file), api_key="")
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        yield channel


@pytest.fixture
def stubs(channel: grpc.Channel) -> tuple[Any, Any]:
    return pb_grpc.MembraneServiceStub(channel), es_pb_grpc.MembraneEsServiceStub(channel)


def levels(stub: Any) -> dict[str, str]:
    ids = {}
    for level in ("low", "medium", "high"):
        response = capture(
            stub, {"ref": level, "text": level}, source_kind="event", sensitivity=level
        )
        ids[level] = response.primary_record.id
    return ids


def test_the_feed_under_each_key(stubs: tuple[Any, Any]) -> None:
    stub, es = stubs
    ids = levels(stub)
    everything = list(es.Changes(es_pb.ChangesRequest(), metadata=AUTH))
    assert [c.position for c in everything] == sorted(c.position for c in everything)
    assert set(ids.values()) <= {c.record_id for c in everything}
    first = everything[0]
    assert first.operation == "created" and first.record.id == first.record_id
    assert first.log_time.endswith("Z") and first.fields
    low = list(es.Changes(es_pb.ChangesRequest(), metadata=LOW_KEY))
    by_record = {c.record_id: c for c in low}
    assert ids["high"] not in by_record
    assert by_record[ids["medium"]].redacted and not by_record[ids["medium"]].fields
    assert not by_record[ids["low"]].redacted
    assert list(es.Changes(es_pb.ChangesRequest(), metadata=ACME)) == []
    resumed = list(es.Changes(es_pb.ChangesRequest(after=everything[1].position), metadata=AUTH))
    assert resumed == everything[2:]
    limited = list(es.Changes(es_pb.ChangesRequest(limit=2), metadata=AUTH))
    assert limited == everything[:2]


def test_follow_streams_new_writes_until_cancelled(stubs: tuple[Any, Any]) -> None:
    stub, es = stubs
    capture(stub, {"ref": "a", "text": "before"}, source_kind="event")
    head = list(es.Changes(es_pb.ChangesRequest(), metadata=AUTH))[-1].position
    call = es.Changes(es_pb.ChangesRequest(after=head, follow=True), metadata=AUTH)
    writer = threading.Timer(
        0.3, lambda: capture(stub, {"ref": "b", "text": "live"}, source_kind="event")
    )
    writer.start()
    change = next(call)
    writer.join()
    assert change.position > head and change.operation == "created"
    call.cancel()
    with pytest.raises(grpc.RpcError) as ended:
        next(call)
    assert ended.value.code() is grpc.StatusCode.CANCELLED


def test_follow_ends_after_its_timeout(stubs: tuple[Any, Any]) -> None:
    _, es = stubs
    request = es_pb.ChangesRequest(follow=True, timeout_seconds=0.2)
    assert list(es.Changes(request, metadata=AUTH)) == []


@pytest.mark.parametrize(
    "request_fields",
    [{"after": -1}, {"limit": -1}, {"timeout_seconds": -1.0}, {"timeout_seconds": float("nan")}],
)
def test_bad_parameters_are_invalid_argument(
    stubs: tuple[Any, Any], request_fields: dict[str, Any]
) -> None:
    _, es = stubs
    code, message = code_of(
        lambda: list(es.Changes(es_pb.ChangesRequest(**request_fields), metadata=AUTH))
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT, message
    assert next(iter(request_fields)) in message


def test_unauthenticated_calls_are_refused(stubs: tuple[Any, Any]) -> None:
    _, es = stubs
    code, _ = code_of(lambda: list(es.Changes(es_pb.ChangesRequest())))
    assert code is grpc.StatusCode.UNAUTHENTICATED


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    after=st.integers(-(2**63), 2**63 - 1),
    limit=st.integers(-(2**63), 2**63 - 1),
    timeout=st.floats(),  # without follow, nothing waits
)
def test_no_parameter_makes_a_server_error(
    stubs: tuple[Any, Any], after: int, limit: int, timeout: float
) -> None:
    _, es = stubs
    request = es_pb.ChangesRequest(after=after, limit=limit, timeout_seconds=timeout)
    code, message = code_of(lambda: list(es.Changes(request, metadata=AUTH)))
    assert code in (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT), message

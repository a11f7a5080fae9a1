"""Transport behaviour (spec §8.5, §10.13 P1–P3, P14): authentication, rate limiting,
health, TLS, the receive limit and shutdown."""

from __future__ import annotations

import datetime as dt
import ipaddress
import threading
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from membrane_es.grpc_server.config import ConfigError, DaemonConfig
from membrane_es.grpc_server.server import Daemon
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from tests.integration.grpc.conftest import API_KEY, AUTH, StartDaemon, capture, code_of, value

Stub = pb_grpc.MembraneServiceStub
METRICS = pb.GetMetricsRequest()


def _stub(daemon: Daemon) -> tuple[grpc.Channel, Stub]:
    # a channel of its own connection: grpc would otherwise share one between channels
    options = [("grpc.use_local_subchannel_pool", 1)]
    channel = grpc.insecure_channel(f"127.0.0.1:{daemon.port}", options=options)
    return channel, pb_grpc.MembraneServiceStub(channel)


# --- authentication ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metadata",
    [
        (),
        (("authorization", "Bearer wrong"),),
        (("authorization", f"bearer {API_KEY}"),),  # case-sensitive, as the reference
        (("authorization", f"Bearer  {API_KEY}"),),  # exactly one space
        (("authorization", API_KEY),),
        (("authorization", "Bearer wrong"), ("authorization", f"Bearer {API_KEY}")),  # first only
    ],
)
def test_calls_without_the_key_are_unauthenticated(
    stub: Stub, metadata: tuple[tuple[str, str], ...]
) -> None:
    code, message = code_of(lambda: stub.GetMetrics(METRICS, metadata=metadata))
    assert (code, message) == (grpc.StatusCode.UNAUTHENTICATED, "invalid or missing API key")


def test_the_key_lets_calls_through(stub: Stub) -> None:
    assert stub.GetMetrics(METRICS, metadata=AUTH)


def test_without_a_configured_key_no_authentication_is_asked(start_daemon: StartDaemon) -> None:
    channel, stub = _stub(start_daemon(api_key=""))
    with channel:
        assert stub.GetMetrics(METRICS)


def test_health_check_is_guarded_like_every_unary_call(
    daemon: Daemon, channel: grpc.Channel
) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    request = health_pb2.HealthCheckRequest(service="")
    code, _ = code_of(lambda: health.Check(request))
    assert code is grpc.StatusCode.UNAUTHENTICATED
    for service in ("", "membrane.v1.MembraneService"):
        answer = health.Check(health_pb2.HealthCheckRequest(service=service), metadata=AUTH)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING


# --- rate limiting ----------------------------------------------------------------------------


def test_a_rate_of_one_refuses_the_next_immediate_call(start_daemon: StartDaemon) -> None:
    daemon = start_daemon(rate_limit_per_second=1)
    channel, stub = _stub(daemon)
    with channel:
        assert stub.GetMetrics(METRICS, metadata=AUTH)
        codes = [code_of(lambda: stub.GetMetrics(METRICS, metadata=AUTH)) for _ in range(3)]
        assert (grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit exceeded") in codes
        # a second connection, opened while the first is exhausted, has its own bucket
        other, other_stub = _stub(daemon)
        with other:
            assert other_stub.GetMetrics(METRICS, metadata=AUTH)


def test_refused_authentication_spends_no_tokens(start_daemon: StartDaemon) -> None:
    channel, stub = _stub(start_daemon(rate_limit_per_second=1))
    with channel:
        for _ in range(5):
            code, _ = code_of(lambda: stub.GetMetrics(METRICS))
            assert code is grpc.StatusCode.UNAUTHENTICATED
        assert stub.GetMetrics(METRICS, metadata=AUTH)


def test_a_rate_of_zero_disables_the_limit(start_daemon: StartDaemon) -> None:
    channel, stub = _stub(start_daemon(rate_limit_per_second=0))
    with channel:
        for _ in range(150):
            stub.GetMetrics(METRICS, metadata=AUTH)


# --- limits -----------------------------------------------------------------------------------


def test_messages_over_the_receive_limit_are_refused(stub: Stub) -> None:
    code, _ = code_of(lambda: capture(stub, "x" * 11_600_000))
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_messages_under_the_receive_limit_reach_the_checks(stub: Stub) -> None:
    code, message = code_of(lambda: capture(stub, "x" * (10 * 1024 * 1024 + 10)))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert message == "content exceeds maximum payload size of 10485760 bytes"


# --- TLS --------------------------------------------------------------------------------------


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "server.crt", directory / "server.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_tls_serves_clients_that_trust_the_certificate(
    start_daemon: StartDaemon, tmp_path: Path
) -> None:
    cert, key = _self_signed(tmp_path)
    daemon = start_daemon(tls_cert_file=str(cert), tls_key_file=str(key))
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    with grpc.secure_channel(f"localhost:{daemon.port}", credentials) as channel:
        stub = pb_grpc.MembraneServiceStub(channel)
        assert stub.GetMetrics(METRICS, metadata=AUTH, timeout=10)
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as plain:
        code, _ = code_of(
            lambda: pb_grpc.MembraneServiceStub(plain).GetMetrics(METRICS, metadata=AUTH, timeout=3)
        )
        assert code is grpc.StatusCode.UNAVAILABLE


def test_unreadable_tls_files_fail_at_construction(tmp_path: Path) -> None:
    config = DaemonConfig(
        db_path=str(tmp_path / "store"),
        listen_addr="127.0.0.1:0",
        tls_cert_file=str(tmp_path / "missing.crt"),
        tls_key_file=str(tmp_path / "missing.key"),
    )
    with pytest.raises(ConfigError, match="TLS"):
        Daemon(config)


def test_a_cert_without_its_key_is_a_configuration_error(tmp_path: Path) -> None:
    config = DaemonConfig(db_path=str(tmp_path), tls_cert_file="x.crt")
    with pytest.raises(ConfigError, match="tls_cert_file and tls_key_file"):
        Daemon(config)


# --- health and shutdown ----------------------------------------------------------------------


def test_stop_turns_health_to_not_serving_and_closes_the_stores(
    start_daemon: StartDaemon, tmp_path: Path
) -> None:
    daemon = start_daemon(api_key="")
    channel, stub = _stub(daemon)
    health = health_pb2_grpc.HealthStub(channel)
    statuses: list[int] = []
    watching = threading.Event()

    def watch() -> None:
        try:
            for answer in health.Watch(health_pb2.HealthCheckRequest(service="")):
                statuses.append(answer.status)
                watching.set()
        except grpc.RpcError:
            pass

    watcher = threading.Thread(target=watch)
    watcher.start()
    assert watching.wait(10)
    capture(stub, {"ref": "e", "text": "kept"}, source_kind="event", metadata=())
    daemon.stop()
    watcher.join(10)
    channel.close()
    assert statuses[0] == health_pb2.HealthCheckResponse.SERVING
    assert health_pb2.HealthCheckResponse.NOT_SERVING in statuses
    # the store closed cleanly and reopens with what was written
    from membrane_es import Membrane

    with Membrane.open(daemon.config.db_path) as memory:
        assert memory.get_metrics()["total_records"] == 1


def test_stop_is_idempotent(daemon: Daemon) -> None:
    daemon.stop()
    daemon.stop()


def test_listening_on_port_zero_reports_the_bound_port(daemon: Daemon) -> None:
    assert daemon.port > 0


def test_a_capture_round_trips_through_a_restart(start_daemon: StartDaemon, tmp_path: Path) -> None:
    store = str(tmp_path / "kept")
    first = start_daemon(db_path=store)
    channel, stub = _stub(first)
    with channel:
        record = capture(stub, {"ref": "e", "text": "survives"}, source_kind="event").primary_record
    first.stop()
    second = start_daemon(db_path=store)
    channel, stub = _stub(second)
    with channel:
        again = stub.RetrieveByID(
            pb.RetrieveByIDRequest(id=record.id, trust=pb.TrustContext(max_sensitivity="low")),
            metadata=AUTH,
        )
        assert again.record == record or again.record.id == record.id
        assert again.record.payload == record.payload


def test_values_survive_the_wire(stub: Stub) -> None:
    content = {"n": 1.5, "flag": True, "none": None, "list": [1, "two"], "nested": {"k": "v"}}
    response = capture(stub, content, source_kind="agent_turn", context=value({"thread_id": "t"}))
    environment = response.primary_record.payload.episodic.environment
    assert environment.context["capture_content"].struct_value.fields["list"].list_value

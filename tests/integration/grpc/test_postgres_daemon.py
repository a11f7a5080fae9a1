"""The daemon with its log in PostgreSQL (``-postgres-dsn`` / ``backend: postgres``): the RPCs
over gRPC, tenants in schemas of their own, and ``membraned`` restarted on the same database.
Each test has a database of its own (``tests/integration/conftest.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
import yaml
from eventsourcing.persistence import MapperDeserialisationError

from membrane_es import Membrane
from membrane_es.grpc_server import service
from membrane_es.grpc_server.config import DaemonConfig
from membrane_es.grpc_server.server import Daemon
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext
from tests.integration.grpc import test_rpcs, test_tenants
from tests.integration.grpc.conftest import (
    AUTH,
    FULL,
    StartDaemon,
    as_dict,
    capture,
    code_of,
    observe,
    value,
)
from tests.integration.grpc.test_membraned import _free_port, _wait_ready

pytestmark = pytest.mark.postgres

Stub = pb_grpc.MembraneServiceStub


@pytest.fixture
def daemon(postgres_dsn: str, start_daemon: StartDaemon, tmp_path: Path) -> Daemon:
    """A daemon on this test's database, with two tenant keys (acme, globex).

    ``postgres_dsn`` comes first so the database outlives the daemons: they are stopped
    (closing their stores) before it is dropped."""
    keys = {
        "keys": [{"key": "acme-key", "tenant": "acme"}, {"key": "globex-key", "tenant": "globex"}]
    }
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text(yaml.safe_dump(keys))
    return start_daemon(backend="postgres", postgres_dsn=postgres_dsn, api_keys_file=str(keys_file))


def _events_by_schema(dsn: str) -> dict[str, int]:
    """How many events each schema's log holds (schemas with a memory_events table)."""
    with psycopg.connect(dsn) as connection:
        schemas = connection.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'memory_events'"
        ).fetchall()
        counts = {}
        for (schema,) in schemas:
            row = connection.execute(f'SELECT count(*) FROM "{schema}".memory_events').fetchone()
            assert row is not None
            counts[str(schema)] = int(row[0])
    return counts


def test_every_rpc_in_sequence(stub: Stub) -> None:
    test_rpcs.test_the_whole_surface_in_sequence(stub)


def test_as_of_metadata_reads_the_past(stub: Stub) -> None:
    test_rpcs.test_as_of_metadata_reads_the_past(stub)


def test_tenants_are_schemas_that_never_see_each_other(
    stub: Stub, daemon: Daemon, postgres_dsn: str, tmp_path: Path
) -> None:
    test_tenants.test_tenants_never_see_each_other(stub)
    counts = _events_by_schema(postgres_dsn)
    # the default tenant wrote nothing; each tenant's captures are in its own schema only
    assert counts["public"] == 0
    assert counts["tenant_acme"] > 0 and counts["tenant_globex"] > 0
    daemon.stop(grace=0)
    # the read views are checkpointed under -db, per tenant
    store = Path(daemon.config.db_path)
    for views in (store / "views", store / "tenants" / "acme" / "views"):
        assert (views / "current" / "manifest.msgpack").exists(), views


def _membraned(postgres_dsn: str, views: Path, port: int) -> subprocess.Popen[str]:
    """Started as Membrane's SDK tests start it, with ``-postgres-dsn`` added."""
    command = [
        sys.executable,
        "-m",
        "membrane_es.grpc_server.membraned",
        "-addr",
        f"127.0.0.1:{port}",
        "-db",
        str(views),
        "-postgres-dsn",
        postgres_dsn,
    ]
    env = {**os.environ, "MEMBRANE_API_KEY": "python-integration-secret"}
    env.pop("MEMBRANE_POSTGRES_DSN", None)
    return subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err


def _serve(postgres_dsn: str, views: Path, session: Any) -> None:
    port = _free_port()
    process = _membraned(postgres_dsn, views, port)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.MembraneServiceStub(channel)
            _wait_ready(stub, AUTH)
            session(stub)
        _stop(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_membraned_with_postgres_dsn_serves_and_restarts(postgres_dsn: str, tmp_path: Path) -> None:
    views = tmp_path / "views"
    seen: dict[str, Any] = {}

    def first(stub: Stub) -> None:
        fact = observe(stub, "Orchid", "deploy_target", "staging")
        event = capture(stub, {"ref": "e1", "text": "Orchid deployed"}, source_kind="event")
        graph = stub.RetrieveGraph(
            pb.RetrieveGraphRequest(task_descriptor="Orchid", trust=FULL, node_limit=50),
            metadata=AUTH,
        )
        assert fact.id in {node.record.id for node in graph.nodes}
        stub.Retract(pb.RetractRequest(id=fact.id, actor="a", rationale="moved"), metadata=AUTH)
        seen["fact"], seen["event"] = fact.id, event.primary_record.id
        seen["metrics"] = as_dict(stub.GetMetrics(pb.GetMetricsRequest(), metadata=AUTH))

    def second(stub: Stub) -> None:
        # a new process: the log from PostgreSQL, the views from their checkpoint under -db
        record = stub.RetrieveByID(
            pb.RetrieveByIDRequest(id=seen["fact"], trust=FULL), metadata=AUTH
        ).record
        assert [a.action for a in record.audit_log] == ["create", "delete"]
        metrics = as_dict(stub.GetMetrics(pb.GetMetricsRequest(), metadata=AUTH))
        for key in ("total_records", "records_by_type", "total_audit_entries"):
            assert metrics["snapshot"][key] == seen["metrics"]["snapshot"][key]
        graph = stub.RetrieveGraph(
            pb.RetrieveGraphRequest(task_descriptor="Orchid", trust=FULL, node_limit=50),
            metadata=AUTH,
        )
        assert seen["event"] in {node.record.id for node in graph.nodes}

    _serve(postgres_dsn, views, first)
    assert (views / "views" / "current" / "manifest.msgpack").exists()
    _serve(postgres_dsn, views, second)


def _position(call: Any) -> int:
    """The ``x-membrane-position`` a write answered with."""
    values = [v for k, v in call.initial_metadata() if k == "x-membrane-position"]
    assert len(values) == 1, call.initial_metadata()
    return int(values[0])


def test_two_daemons_on_one_log_read_each_others_writes_by_position(
    postgres_dsn: str, start_daemon: StartDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemons = [start_daemon(backend="postgres", postgres_dsn=postgres_dsn) for _ in range(2)]
    channels = [grpc.insecure_channel(f"127.0.0.1:{d.port}") for d in daemons]
    try:
        writer, reader = (pb_grpc.MembraneServiceStub(c) for c in channels)
        request = pb.CaptureMemoryRequest(
            content=value({"subject": "Orchid", "predicate": "runs_on", "object": "arm64"}),
            source="python-client",
            source_kind="observation",
        )
        captured, call = writer.CaptureMemory.with_call(request, metadata=AUTH)
        position = _position(call)
        fact = next(r for r in captured.created_records if r.type == "semantic")
        _, call = writer.Reinforce.with_call(
            pb.ReinforceRequest(id=fact.id, actor="a", rationale="useful"), metadata=AUTH
        )
        assert _position(call) == position + 1

        after = (*AUTH, ("x-membrane-min-position", str(position + 1)))
        record = reader.RetrieveByID(
            pb.RetrieveByIDRequest(id=fact.id, trust=FULL), metadata=after
        ).record
        assert [a.action for a in record.audit_log] == ["create", "reinforce"]
        metrics = as_dict(reader.GetMetrics(pb.GetMetricsRequest(), metadata=after))
        assert metrics["snapshot"]["total_audit_entries"] == position + 1
        graph = reader.RetrieveGraph(
            pb.RetrieveGraphRequest(task_descriptor="Orchid", trust=FULL), metadata=after
        )
        assert fact.id in {node.record.id for node in graph.nodes}

        # the server's bound on the wait (no client deadline): DEADLINE_EXCEEDED past it
        monkeypatch.setattr(service, "POSITION_WAIT_SECONDS", 0.05)
        too_far = (*AUTH, ("x-membrane-min-position", str(position + 1000)))
        code, message = code_of(lambda: reader.GetMetrics(pb.GetMetricsRequest(), metadata=too_far))
        assert code is grpc.StatusCode.DEADLINE_EXCEEDED
        assert f"min_position {position + 1000} not reached" in message
        bad = (*AUTH, ("x-membrane-min-position", "soon"))
        code, message = code_of(lambda: reader.GetMetrics(pb.GetMetricsRequest(), metadata=bad))
        assert code is grpc.StatusCode.INVALID_ARGUMENT
        assert message.startswith("invalid x-membrane-min-position")
    finally:
        for channel in channels:
            channel.close()


def _states(dsn: str, schema: str) -> list[bytes]:
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(f'SELECT state FROM "{schema}".memory_events').fetchall()
    return [bytes(row[0]) for row in rows]


def test_encryption_key_encrypts_the_postgres_log(
    postgres_dsn: str, start_daemon: StartDaemon
) -> None:
    marker, actor = b"tangerine-rationale", b"auditor-7"
    daemon = start_daemon(
        backend="postgres", postgres_dsn=postgres_dsn, encryption_key="daemon passphrase"
    )
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        stub = pb_grpc.MembraneServiceStub(channel)
        fact = observe(stub, "Orchid", "deploy_target", "staging")
        request = pb.ReinforceRequest(id=fact.id, actor=actor.decode(), rationale=marker.decode())
        stub.Reinforce(request, metadata=AUTH)
    states = _states(postgres_dsn, "public")
    assert states and not any(marker in s or actor in s for s in states)

    # without a key the same write leaves its rationale readable (so the check above bites)
    with Membrane.open_postgres(postgres_dsn, schema="plain", follow=False) as plain:
        record = plain.create_record(
            {
                "type": "semantic",
                "payload": {"kind": "semantic", "subject": "Orchid", "predicate": "runs"},
            }
        )
        plain.reinforce(record.id, actor.decode(), marker.decode())
    assert any(marker in s for s in _states(postgres_dsn, "plain"))

    # the log is sealed with the key derived from the passphrase, and with no other
    env = daemon.config.engine_env()
    with Membrane.open_postgres(postgres_dsn, env=env, follow=False) as reader:
        last = reader.history(fact.id, trust=TrustContext(max_sensitivity=Sensitivity.HYPER))[-1]
        assert (last.actor, last.rationale) == (actor.decode(), marker.decode())
        assert reader.verify().ok
    other = DaemonConfig(encryption_key="another passphrase").engine_env()
    with pytest.raises(MapperDeserialisationError, match="MAC check failed"):
        Membrane.open_postgres(postgres_dsn, env=other, follow=False)

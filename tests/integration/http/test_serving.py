"""Serving: ``membrane-es serve --http`` alone or ``membraned -http`` beside gRPC, one store
behind both surfaces, and a clean stop on SIGTERM with the store closed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import httpx
import msgspec
import pytest
from google.protobuf import json_format, struct_pb2

from membrane_es.access.keys import KeyRing
from membrane_es.engine import Membrane
from membrane_es.grpc_server.config import DaemonConfig
from membrane_es.grpc_server.server import Daemon
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from membrane_es.http_api import HttpServer, create_app
from membrane_es.serving.tenants import Tenants

KEY = "serving-secret"
AUTH = {"Authorization": f"Bearer {KEY}"}
_PORT = re.compile(r"HTTP entries API on \S+ \(port (\d+)\)")


def _http_port(process: subprocess.Popen[str]) -> int:
    """The port the server announces on stderr (it binds port 0)."""
    assert process.stderr is not None
    for line in process.stderr:
        found = _PORT.search(line)
        if found:
            return int(found.group(1))
    raise AssertionError(f"the server exited: {process.wait()}")


def test_serve_http_alone_answers_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    store = tmp_path / "store"
    # No embedder: the test is about serving, and loading a model (when the embeddings extra
    # is installed) would outlast the client's timeout.
    config = tmp_path / "membraned.yaml"
    config.write_text("embedding_model: none\n")
    command = [
        *(sys.executable, "-m", "membrane_es.cli", "serve", "-config", str(config)),
        *("-db", str(store), "--http", "127.0.0.1:0", "--no-grpc"),
    ]
    env = {**os.environ, "MEMBRANE_API_KEY": KEY}
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{_http_port(process)}"
        created = httpx.post(
            f"{base}/v1/memory/entries", json={"type": "user", "title": "tea"}, headers=AUTH
        )
        assert created.status_code == 201
        assert httpx.get(f"{base}/v1/memory/entries").status_code == 401
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with Membrane.open(store) as memory:  # closed cleanly: it opens, and the entry is there
        assert [e.title for e in memory.list_entries().entries] == ["tea"]


def test_no_grpc_without_http_is_refused(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "membrane_es.grpc_server.membraned", "-no-grpc"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "-no-grpc needs -http" in result.stderr


def test_one_store_behind_grpc_and_http(tmp_path: Path) -> None:
    config = msgspec.convert(
        {
            "db_path": str(tmp_path / "store"),
            "listen_addr": "127.0.0.1:0",
            "api_key": KEY,
            "consolidation_interval": "0",
        },
        DaemonConfig,
    )
    daemon = Daemon(config).start()
    web = HttpServer(create_app(daemon.tenants, daemon.keys), "127.0.0.1:0")
    daemon.also_stop(web.stop)
    web.start()
    try:
        with (
            httpx.Client(base_url=f"http://127.0.0.1:{web.port}", headers=AUTH) as http,
            grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel,
        ):
            stub = pb_grpc.MembraneServiceStub(channel)
            metadata = (("authorization", f"Bearer {KEY}"),)
            entry = http.post(
                "/v1/memory/entries",
                json={"type": "project", "title": "Orchid rollout", "content": "to staging"},
            ).json()
            found = stub.RetrieveByID(
                pb.RetrieveByIDRequest(
                    id=entry["record_id"],
                    trust=pb.TrustContext(max_sensitivity="hyper", authenticated=True),
                ),
                metadata=metadata,
            )
            assert found.record.id == entry["record_id"] and found.record.type == "semantic"
            record = json_format.MessageToDict(found.record, preserving_proto_field_name=True)
            assert "Orchid rollout" in str(record)
            captured = stub.CaptureMemory(
                pb.CaptureMemoryRequest(
                    source="agent",
                    source_kind="event",
                    content=_value({"text": "the billing service moved to the eu cluster"}),
                ),
                metadata=metadata,
            )
            hits = http.get("/v1/memory/entries", params={"q": "billing cluster"}).json()
            assert captured.primary_record.id in [e["record_id"] for e in hits["entries"]]
    finally:
        daemon.stop(grace=0)  # stops HTTP first, then closes the stores
    assert not web.running


def _value(data: object) -> struct_pb2.Value:
    message = struct_pb2.Value()
    json_format.ParseDict(data, message)
    return message


def test_an_address_in_use_is_named(tmp_path: Path) -> None:
    tenants = Tenants(":memory:", lambda tenant, path: Membrane.in_memory())
    try:
        with HttpServer(create_app(tenants, KeyRing()), "127.0.0.1:0") as taken:
            with pytest.raises(OSError, match=rf"in use \(127\.0\.0\.1:{taken.port}\)"):
                HttpServer(create_app(tenants, KeyRing()), f"127.0.0.1:{taken.port}")
    finally:
        tenants.close()

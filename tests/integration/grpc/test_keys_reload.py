"""``membraned`` reloads its keys file on SIGHUP: a tenant added without a restart writes
and reads at once, a revoked key is refused, and a malformed file changes nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import yaml

from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from tests.integration.grpc.conftest import capture
from tests.integration.grpc.test_membraned import _free_port, _wait_ready


def _keys(path: Path, keys: list[dict[str, str]]) -> None:
    fresh = path.with_suffix(".new")
    fresh.write_text(yaml.safe_dump({"keys": keys}))
    os.replace(fresh, path)


def _bearer(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


def _code(stub: pb_grpc.MembraneServiceStub, key: str) -> grpc.StatusCode:
    try:
        stub.GetMetrics(pb.GetMetricsRequest(), metadata=_bearer(key), timeout=5)
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def _until(stub: pb_grpc.MembraneServiceStub, key: str, code: grpc.StatusCode) -> None:
    deadline = time.monotonic() + 20
    while _code(stub, key) is not code:
        assert time.monotonic() < deadline, f"{key} never answered {code}"
        time.sleep(0.1)


def test_sighup_reloads_the_keys_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    _keys(keys, [{"key": "acme-key", "tenant": "acme"}])
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "membrane_es.grpc_server.membraned",
        "-addr",
        f"127.0.0.1:{port}",
        "-db",
        str(tmp_path / "store"),
        "-keys",
        str(keys),
        "-config",
        str(_config(tmp_path)),
    ]
    env = {k: v for k, v in os.environ.items() if k != "MEMBRANE_API_KEY"}
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.MembraneServiceStub(channel)
            _wait_ready(stub, _bearer("acme-key"))
            assert _code(stub, "globex-key") is grpc.StatusCode.UNAUTHENTICATED
            _keys(keys, [{"key": "globex-key", "tenant": "globex"}])
            process.send_signal(signal.SIGHUP)
            _until(stub, "globex-key", grpc.StatusCode.OK)
            assert _code(stub, "acme-key") is grpc.StatusCode.UNAUTHENTICATED
            written = capture(stub, "globex's first note", metadata=_bearer("globex-key"))
            record_id = written.primary_record.id
            keys.write_text("keys: [{key: broken, tenant: 'no spaces allowed'}]")
            process.send_signal(signal.SIGHUP)
            time.sleep(1.5)  # a reload, had it happened, would have revoked globex-key
            trust = pb.TrustContext(max_sensitivity="hyper", authenticated=True)
            read = stub.RetrieveByID(
                pb.RetrieveByIDRequest(id=record_id, trust=trust), metadata=_bearer("globex-key")
            )
            assert read.record.id == record_id
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert "not reloaded, the previous keys stay" in err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "membrane.yaml"
    config.write_text(yaml.safe_dump({"embedding_model": "none", "consolidation_interval": "0"}))
    return config

"""The ``membraned`` command and its configuration (spec §7, §10.14 F1–F4), including the way
Membrane's SDK integration tests start it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

import grpc
import pytest

from membrane_es.grpc_server.config import (
    ConfigError,
    DaemonConfig,
    apply_overrides,
    load_config,
    parse_duration,
)
from membrane_es.grpc_server.membraned import config_from_flags, main
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc


def test_defaults_are_the_references() -> None:
    config = DaemonConfig()
    # but the address: loopback unless told otherwise (Membrane's ":9090" is every interface)
    assert (config.listen_addr, config.default_sensitivity) == ("127.0.0.1:9090", "low")
    assert (config.decay_interval, config.consolidation_interval) == ("1h", "6h")
    assert config.selection_confidence_threshold == 0.7
    assert config.rate_limit_per_second == 100
    assert (
        config.graph_default_root_limit,
        config.graph_default_node_limit,
        config.graph_default_edge_limit,
        config.graph_default_max_hops,
    ) == (10, 25, 100, 1)


def test_a_config_file_overlays_the_defaults(tmp_path: Path) -> None:
    file = tmp_path / "membrane.yaml"
    file.write_text(
        "decay_interval: 2h\ndefault_sensitivity: medium\nselection_confidence_threshold: 0.82\n"
        "graph_default_root_limit: 7\ngraph_default_node_limit: 44\n"
        "graph_default_edge_limit: 88\ngraph_default_max_hops: 3\ningest_llm_enabled: true\n"
    )
    config = load_config(file)
    assert config.decay_seconds() == 7200
    assert config.default_sensitivity == "medium"
    assert config.selection_confidence_threshold == 0.82
    assert (config.graph_default_root_limit, config.graph_default_max_hops) == (7, 3)
    assert config.ingest_llm_enabled
    assert config.listen_addr == "127.0.0.1:9090"  # unspecified keys keep their defaults


def test_config_file_errors_name_the_step(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^read config file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("decay_interval: [unclosed\n")
    with pytest.raises(ConfigError, match="^parse config file"):
        load_config(bad)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("no_such_key: 1\n")
    with pytest.raises(ConfigError, match="^parse config file.*no_such_key"):
        load_config(unknown)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"default_sensitivity": "secret"}, 'invalid default sensitivity "secret"'),
        ({"backend": "mysql"}, 'unsupported backend "mysql"'),
        ({"backend": "postgres"}, "^membrane: postgres_dsn is required when backend=postgres$"),
        ({"decay_interval": "soon"}, "decay_interval: invalid duration"),
        ({"rate_limit_per_second": -1}, "rate_limit_per_second must be >= 0"),
        ({"listen_addr": "127.0.0.1:99999"}, 'listen_addr "127.0.0.1:99999": expected HOST:PORT'),
        ({"listen_addr": ":70000"}, "a port from 0 to 65535"),
        ({"listen_addr": "localhost"}, 'listen_addr "localhost"'),
        ({"listen_addr": "[::1]:http"}, 'listen_addr "\\[::1\\]:http"'),
    ],
)
def test_invalid_settings_are_refused(
    change: dict[str, object], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import msgspec

    monkeypatch.delenv("MEMBRANE_POSTGRES_DSN", raising=False)

    config = msgspec.structs.replace(DaemonConfig(), **change)
    with pytest.raises(ConfigError, match=message):
        config.validate()


def test_durations_read_like_go() -> None:
    assert parse_duration("x", "1h30m") == 5400
    assert parse_duration("x", "500ms") == 0.5
    assert parse_duration("x", "0") == 0
    with pytest.raises(ConfigError):
        parse_duration("x", "1d")


def _flags(**values: object) -> Namespace:
    base: dict[str, object] = {
        "config": None,
        "db": None,
        "postgres_dsn": None,
        "addr": None,
        "keys": None,
    }
    return Namespace(**{**base, **values})


def test_flags_beat_the_file_and_the_env_key_fills_only_a_gap(tmp_path: Path) -> None:
    file = tmp_path / "membrane.yaml"
    file.write_text("db_path: from-file\nlisten_addr: ':7000'\n")
    config = config_from_flags(
        _flags(config=str(file), db=str(tmp_path / "flag-db"), addr="127.0.0.1:7001"),
        environ={"MEMBRANE_API_KEY": "from-env"},
    )
    assert config.db_path == str(tmp_path / "flag-db")
    assert config.listen_addr == "127.0.0.1:7001"
    assert config.api_key == "from-env"
    file.write_text("api_key: from-file\n")
    config = config_from_flags(_flags(config=str(file)), environ={"MEMBRANE_API_KEY": "from-env"})
    assert config.api_key == "from-file"


def test_postgres_dsn_selects_postgres_and_the_env_dsn_fills_a_gap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MEMBRANE_POSTGRES_DSN", raising=False)
    config = apply_overrides(DaemonConfig(), postgres_dsn="postgres://x", environ={})
    assert (config.backend, config.postgres_dsn) == ("postgres", "postgres://x")
    config.validate()
    assert config.dsn() == "postgres://x"
    # backend: postgres in the file, the DSN from MEMBRANE_POSTGRES_DSN (spec §7.1)
    from_file = DaemonConfig(backend="postgres")
    with pytest.raises(ConfigError, match="postgres_dsn is required when backend=postgres"):
        from_file.validate()
    monkeypatch.setenv("MEMBRANE_POSTGRES_DSN", "host=db dbname=membrane")
    from_file.validate()
    assert from_file.dsn() == "host=db dbname=membrane"
    assert config.dsn() == "postgres://x"  # the configured one wins


def test_backend_postgres_without_a_dsn_fails_to_configure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMBRANE_POSTGRES_DSN", raising=False)
    file = tmp_path / "membrane.yaml"
    file.write_text("backend: postgres\n")
    assert main(["-config", str(file)]) == 1
    assert (
        "failed to run membraned: configure: membrane: postgres_dsn is required when "
        "backend=postgres" in capsys.readouterr().err
    )


def test_a_dsn_the_store_cannot_use_fails_at_startup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = "postgresql://u@db.example/membrane?sslmode=require"
    assert main(["-postgres-dsn", dsn, "-db", str(tmp_path), "-addr", "127.0.0.1:0"]) == 1
    err = capsys.readouterr().err
    assert "failed to run membraned: initialize membrane: postgres_dsn: unsupported" in err
    assert "PGSSLMODE" in err


def test_version_prints_the_program_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("membraned ") and out.endswith("\n")
    assert main(["--version"]) == 0


def test_a_configuration_error_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-config", str(tmp_path / "missing.yaml")]) == 1
    assert "failed to run membraned: configure: read config file" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(stub: pb_grpc.MembraneServiceStub, metadata: tuple[tuple[str, str], ...]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            stub.GetMetrics(pb.GetMetricsRequest(), metadata=metadata, timeout=1)
            return
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_membraned_starts_as_the_sdk_tests_start_it_and_stops_on_signals(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    """``membraned -addr 127.0.0.1:<port> -db <tmp>/membrane.db`` with MEMBRANE_API_KEY."""
    port = _free_port()
    env = {**os.environ, "MEMBRANE_API_KEY": "python-integration-secret"}
    command = [
        sys.executable,
        "-m",
        "membrane_es.grpc_server.membraned",
        "-addr",
        f"127.0.0.1:{port}",
        "-db",
        str(tmp_path / "membrane.db"),
    ]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.MembraneServiceStub(channel)
            auth = (("authorization", "Bearer python-integration-secret"),)
            _wait_ready(stub, auth)
            try:
                stub.GetMetrics(pb.GetMetricsRequest(), timeout=5)
                raise AssertionError("a call without the key went through")
            except grpc.RpcError as error:
                assert error.code() is grpc.StatusCode.UNAUTHENTICATED
        process.send_signal(stop_signal)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # views were checkpointed on the way out
    assert (tmp_path / "membrane.db" / "views").exists()

"""Daemon processes for the benchmarks (and the fleet's test): ``membraned`` serving the HTTP
entries API on loopback, started, measured (resident memory, open descriptors) and stopped.

Each daemon is a process of its own, started as an operator starts one: flags, a keys file,
a config file; its HTTP port is read from what it says on standard error.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_ANNOUNCED = re.compile(r"HTTP entries API on \S+ \(port (\d+)\)")
START_SECONDS = 120.0


def write_keys(path: Path, tenants: list[str]) -> dict[str, str]:
    """A keys file giving each tenant one key (``key-<tenant>``); returns tenant → key."""
    keys = {tenant: f"key-{tenant}" for tenant in tenants}
    body = {"keys": [{"key": key, "tenant": tenant} for tenant, key in keys.items()]}
    fresh = path.with_suffix(".new")
    fresh.write_text(yaml.safe_dump(body))
    os.replace(fresh, path)
    return keys


@dataclass
class Daemon:
    """One ``membraned`` process serving HTTP on 127.0.0.1 (``port``)."""

    process: subprocess.Popen[str]
    port: int = 0
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def resident_bytes(self) -> int:
        """The process's resident set now."""
        fields = Path(f"/proc/{self.process.pid}/statm").read_text().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")

    def peak_resident_bytes(self) -> int:
        """The most the process has held resident (``VmHWM``)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return self.resident_bytes()

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def stop(self) -> None:
        """SIGTERM (stores checkpointed on the way out), then a kill if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.reader is not None:
            self.reader.join(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()


def start_daemon(
    views: Path,
    keys_file: Path,
    *,
    dsn: str = "",
    max_open_stores: int | None = None,
    settings: dict[str, Any] | None = None,
    cwd: Path | None = None,
) -> Daemon:
    """``membraned -no-grpc -http 127.0.0.1:0 -db VIEWS -keys KEYS`` (with ``dsn``: the log in
    PostgreSQL); ``settings`` go in a config file (default: no embedder, no consolidation)."""
    views.mkdir(parents=True, exist_ok=True)
    config = views.parent / f"{views.name}.yaml"
    chosen = {"embedding_model": "none", "consolidation_interval": "0", **(settings or {})}
    config.write_text(yaml.safe_dump(chosen))
    command = [
        sys.executable,
        "-m",
        "membrane_es.grpc_server.membraned",
        "-no-grpc",
        "-http",
        "127.0.0.1:0",
        "-db",
        str(views),
        "-keys",
        str(keys_file),
        "-config",
        str(config),
    ]
    if dsn:
        command += ["-postgres-dsn", dsn]
    if max_open_stores is not None:
        command += ["-max-open-stores", str(max_open_stores)]
    env = {k: v for k, v in os.environ.items() if k != "MEMBRANE_API_KEY"}
    env["MEMBRANE_LOG_LEVEL"] = "WARNING"
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    daemon = Daemon(process)
    announced = threading.Event()

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            daemon.lines.append(line)
            found = _ANNOUNCED.search(line)
            if found:
                daemon.port = int(found.group(1))
                announced.set()
        announced.set()

    daemon.reader = threading.Thread(target=read_stderr, daemon=True)
    daemon.reader.start()
    deadline = time.monotonic() + START_SECONDS
    while not announced.wait(0.1):
        if time.monotonic() > deadline:
            break
    if not daemon.port:
        daemon.stop()
        raise RuntimeError("membraned did not start:\n" + "".join(daemon.lines[-20:]))
    return daemon

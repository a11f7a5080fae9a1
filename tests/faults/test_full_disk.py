"""A full disk: on a small size-limited tmpfs (mounted by the test when it runs as root;
skipped with the reason otherwise), writing until full gives a clear StorageFullError (the
gRPC edge: RESOURCE_EXHAUSTED), nothing acknowledged is lost, a checkpoint that cannot be
written never replaces the good one, close() still releases the store, and the store opens
read-write again once space is freed."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from membrane_es import Membrane, MembraneError, StorageFullError, TrustContext
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from tests.faults.grpc_support import AUTH, event_count, running_daemon

FULL = TrustContext(max_sensitivity="hyper")
SIZE = 8 * 1024 * 1024
BALLAST = 3 * 1024 * 1024  # freed to give the store room again
TEXT = "the quick brown fox jumps over the lazy dog " * 400  # ~18 KB per record


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.strip()}")
    try:
        (mount_point / "ballast").write_bytes(bytes(BALLAST))
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _record(i: int) -> dict[str, object]:
    return {
        "type": "semantic",
        "sensitivity": "low",
        "payload": {"kind": "semantic", "subject": f"s{i}", "predicate": "p", "object": TEXT},
        "provenance": {"sources": [{"kind": "observation", "ref": "r"}]},
    }


def _fill(memory: Membrane, acknowledged: list[str]) -> StorageFullError:
    for i in range(10_000):
        before = memory.application.recorder.max_notification_id()
        try:
            acknowledged.append(memory.create_record(_record(i)).id)
        except StorageFullError as full:
            assert memory.application.recorder.max_notification_id() == before
            return full
    raise AssertionError("the disk never filled")


def test_writing_until_full(small_disk: Path) -> None:
    path = small_disk / "store"
    acknowledged: list[str] = []
    memory = Membrane.open(path)
    acknowledged.append(memory.create_record(_record(-1)).id)
    memory.checkpoint()
    seal = (path / "views" / "current" / "seal").read_bytes()

    full = _fill(memory, acknowledged)
    assert isinstance(full, MembraneError)
    assert full.errno == errno.ENOSPC
    assert "no space left" in str(full)
    # Reads still answer, and a second write fails the same clear way.
    assert memory.retrieve_by_id(acknowledged[-1], trust=FULL).id == acknowledged[-1]
    with pytest.raises(StorageFullError):
        memory.create_record(_record(-2))
    # A checkpoint that cannot be written leaves the good one as it was, and no debris.
    with pytest.raises(StorageFullError):
        memory.checkpoint()
    assert (path / "views" / "current" / "seal").read_bytes() == seal
    assert not (path / "views" / "staging").exists()
    memory.close()  # no exception: the checkpoint is skipped (logged), the store released
    assert (path / "views" / "current" / "seal").read_bytes() == seal

    (small_disk / "ballast").unlink()
    with Membrane.open(path) as reopened:
        for record_id in acknowledged:
            assert reopened.retrieve_by_id(record_id, trust=FULL).id == record_id
        assert reopened.verify().ok
        reopened.create_record(_record(-3))  # read-write again
        views = reopened.views
        assert views.table.size == len(acknowledged) + 1


def test_the_grpc_edge_answers_resource_exhausted(small_disk: Path) -> None:
    with running_daemon(small_disk / "daemon") as daemon:
        with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
            stub = pb_grpc.MembraneServiceStub(channel)
            request = pb.CaptureMemoryRequest(source="c", source_kind="event", summary=TEXT)
            request.content.string_value = TEXT
            for _ in range(10_000):
                before = event_count(daemon)
                try:
                    stub.CaptureMemory(request, metadata=AUTH, timeout=60)
                except grpc.RpcError as error:
                    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
                    assert "no space left" in (error.details() or "")
                    assert event_count(daemon) == before
                    break
            else:
                raise AssertionError("the disk never filled")


def test_the_http_edge_answers_507(small_disk: Path) -> None:
    from litestar.testing import TestClient

    from membrane_es.access.keys import Caller, KeyRing
    from membrane_es.http_api import create_app
    from membrane_es.serving.tenants import Tenants

    key = "http-fault-secret"
    keys = KeyRing("", [(hashlib.sha256(key.encode()).hexdigest(), Caller(tenant="1"))])
    tenants = Tenants(str(small_disk / "http"), lambda tenant, path: Membrane.open(path))
    try:
        with TestClient(create_app(tenants, keys)) as client:
            client.headers["Authorization"] = f"Bearer {key}"
            for i in range(10_000):
                engine = tenants.get("1")
                before = engine.application.recorder.max_notification_id()
                body = {"type": "reference", "title": f"t{i}", "content": TEXT, "source": "s"}
                response = client.post("/v1/memory/entries", json=body)
                if response.status_code == 201:
                    continue
                assert response.status_code == 507, response.text
                assert "no space left" in response.json()["error"]
                assert engine.application.recorder.max_notification_id() == before
                break
            else:
                raise AssertionError("the disk never filled")
    finally:
        tenants.close()

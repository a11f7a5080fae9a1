"""The gRPC daemon with one store open at a time: tenants' captures from concurrent clients
are all kept, each call holding its store until it ends."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import yaml

from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from tests.integration.grpc.conftest import StartDaemon, capture

TENANTS = ["north", "south", "east"]
HYPER = pb.TrustContext(max_sensitivity="hyper", authenticated=True)


def test_captures_survive_stores_closed_between_calls(
    start_daemon: StartDaemon, tmp_path: Path
) -> None:
    keys = {"keys": [{"key": f"key-{name}", "tenant": name} for name in TENANTS]}
    (tmp_path / "keys.yaml").write_text(yaml.safe_dump(keys))
    daemon = start_daemon(api_keys_file=str(tmp_path / "keys.yaml"), max_open_stores=1)
    written: list[tuple[str, str]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def client(worker: int) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
            stub = pb_grpc.MembraneServiceStub(channel)
            try:
                for step in range(6):
                    name = TENANTS[(worker + step) % len(TENANTS)]
                    metadata = (("authorization", f"Bearer key-{name}"),)
                    answer = capture(stub, f"{name} note {worker}/{step}", metadata=metadata)
                    with lock:
                        written.append((name, answer.primary_record.id))
            except BaseException as error:  # reported on the test's thread
                errors.append(error)

    threads = [threading.Thread(target=client, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert daemon.tenants.settle()
    assert daemon.tenants.evicted > 0
    assert len(daemon.tenants.open_tenants()) <= 1
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        stub = pb_grpc.MembraneServiceStub(channel)
        assert len(written) == 24
        for name, record_id in written:
            metadata = (("authorization", f"Bearer key-{name}"),)
            request = pb.RetrieveByIDRequest(id=record_id, trust=HYPER)
            assert stub.RetrieveByID(request, metadata=metadata).record.id == record_id

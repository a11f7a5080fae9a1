"""A daemon keeping at most two tenant stores open serves many tenants over HTTP, clients
writing and reading concurrently: every write is there afterwards, no request fails while
stores are closed and opened under it, and at most the bound stays open once requests end."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path

import httpx
import msgspec
import yaml

from membrane_es.grpc_server.config import DaemonConfig
from membrane_es.grpc_server.server import open_stores
from membrane_es.http_api import HttpServer, create_app

TENANTS = [f"tenant{i}" for i in range(6)]


def test_many_tenants_through_two_open_stores_lose_no_write(tmp_path: Path) -> None:
    keys = {"keys": [{"key": f"key-{name}", "tenant": name} for name in TENANTS]}
    (tmp_path / "keys.yaml").write_text(yaml.safe_dump(keys))
    (tmp_path / "store").mkdir()
    config = msgspec.convert(
        {
            "db_path": str(tmp_path / "store"),
            "api_keys_file": str(tmp_path / "keys.yaml"),
            "embedding_model": "none",
            "consolidation_interval": "0",
            "max_open_stores": 2,
        },
        DaemonConfig,
    )
    tenants, ring = open_stores(config)
    held: list[bool] = []
    hold = tenants._hold

    def noting(tenant: str, slot: object, leases: object) -> None:
        held.append(leases is not None)
        hold(tenant, slot, leases)  # type: ignore[arg-type]

    tenants._hold = noting  # type: ignore[method-assign]
    server = HttpServer(create_app(tenants, ring), "127.0.0.1:0").start()
    base = f"http://127.0.0.1:{server.port}"
    created: Counter[str] = Counter()
    lock = threading.Lock()
    failures: list[str] = []

    def client(worker: int) -> None:
        chooser = random.Random(worker)
        with httpx.Client(base_url=base, timeout=60) as http:
            for step in range(10):
                name = chooser.choice(TENANTS)
                headers = {"Authorization": f"Bearer key-{name}"}
                if chooser.random() < 0.6:
                    body = {"type": "reference", "title": f"{name} w{worker} s{step}"}
                    answer = http.post("/v1/memory/entries", json=body, headers=headers)
                    if answer.status_code != 201:
                        failures.append(answer.text)
                        continue
                    with lock:
                        created[name] += 1
                else:
                    answer = http.get("/v1/memory/entries", headers=headers)
                    if answer.status_code != 200:
                        failures.append(answer.text)

    try:
        threads = [threading.Thread(target=client, args=(w,)) for w in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures[:3]
        assert held and all(held)  # every engine a request took was held by it
        assert tenants.settle()
        # the bound counts every open store, the default tenant's among them
        assert len(tenants.open_tenants()) <= 2
        assert tenants.evicted > 0
        with httpx.Client(base_url=base, timeout=60) as http:
            for name in TENANTS:
                answer = http.get(
                    "/v1/memory/entries",
                    params={"limit": 200},
                    headers={"Authorization": f"Bearer key-{name}"},
                )
                assert answer.status_code == 200, answer.text
                assert len(answer.json()["entries"]) == created[name], name
    finally:
        server.stop()
        tenants.close()

"""``membrane-es ui``: a local store opened read-only in the inspector, on loopback, until
SIGTERM; the address is printed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx

from membrane_es import Membrane
from tests.e2e.test_cli import PROCESS_ENV


def test_serves_a_store_read_only_on_loopback(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Membrane.open(store, embedder=None) as memory:
        fact = memory.create_record(
            {
                "type": "semantic",
                "payload": {
                    "kind": "semantic",
                    "subject": "Orchid",
                    "predicate": "deploys_to",
                    "object": "production",
                },
            }
        )
    before = sorted(p.name for p in store.iterdir())
    server = subprocess.Popen(
        [sys.executable, "-m", "membrane_es", "ui", str(store), "--embedder", "none"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=PROCESS_ENV,
    )
    try:
        assert server.stdout is not None
        address = server.stdout.readline().strip()
        assert address.startswith("http://127.0.0.1:") and address.endswith("/ui/")
        with httpx.Client(timeout=30) as client:
            page = client.get(address, params={"q": "Orchid"})
            assert page.status_code == 200 and fact.id in page.text
            assert "Orchid deploys to production" in page.text
            timeline = client.get(f"{address}records/{fact.id}")
            assert timeline.status_code == 200 and "Created" in timeline.text
            assert client.get(address + "key").status_code == 303  # no key to enter
            # the API is not served: nothing can be written through this server
            base = address.removesuffix("/ui/")
            created = client.post(f"{base}/v1/memory/entries", json={"type": "user", "title": "x"})
            assert created.status_code in (404, 405)
    finally:
        server.send_signal(signal.SIGTERM)
        _, errors = server.communicate(timeout=60)
    assert server.returncode == 0, errors
    assert "(read-only) listening on http://127.0.0.1:" in errors
    assert sorted(p.name for p in store.iterdir()) == before
    with Membrane.open(store, embedder=None) as memory:
        assert memory.get_metrics()["total_records"] == 1

"""A fleet: three ``membraned`` processes on one PostgreSQL, any of them serving any tenant,
each keeping at most two tenant stores open. A client sends every request to a process
picked at random — no sticky routing — and reads what it wrote, through another process,
given the write's ``x-membrane-position`` as ``x-membrane-min-position``: every read sees
its write (read-your-writes across processes), and every tenant's list holds exactly its
own entries at the end, whichever process is asked."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import httpx
import pytest

from bench.daemons import Daemon, start_daemon, write_keys

pytestmark = pytest.mark.postgres

TENANTS = ["acme", "globex", "initech", "umbrella"]
REQUESTS = 60


def test_three_processes_serve_any_tenant_with_read_your_writes(
    postgres_dsn: str, tmp_path: Path
) -> None:
    keys = write_keys(tmp_path / "keys.yaml", TENANTS)
    daemons: list[Daemon] = []
    clients: list[httpx.Client] = []
    try:
        for index in range(3):
            daemons.append(
                start_daemon(
                    tmp_path / f"views{index}",
                    tmp_path / "keys.yaml",
                    dsn=postgres_dsn,
                    max_open_stores=2,
                )
            )
        chooser = random.Random(37)
        clients.extend(httpx.Client(base_url=d.base, timeout=30) for d in daemons)
        written: dict[str, set[str]] = defaultdict(set)
        violations = 0
        last: dict[str, int] = defaultdict(int)  # positions are a tenant's own log's
        for step in range(REQUESTS):
            tenant = chooser.choice(TENANTS)
            auth = {"Authorization": f"Bearer {keys[tenant]}"}
            writer, reader = chooser.sample(range(3), 2)
            answer = clients[writer].post(
                "/v1/memory/entries",
                json={"type": "reference", "title": f"{tenant} note {step}"},
                headers=auth,
            )
            assert answer.status_code == 201, answer.text
            entry_id = str(answer.json()["id"])
            position = answer.headers["x-membrane-position"]
            written[tenant].add(entry_id)
            last[tenant] = max(last[tenant], int(position))
            read = clients[reader].get(
                f"/v1/memory/entries/{entry_id}",
                headers={**auth, "x-membrane-min-position": position},
            )
            if read.status_code != 200 or str(read.json()["id"]) != entry_id:
                violations += 1
        assert violations == 0
        for tenant in TENANTS:
            auth = {"Authorization": f"Bearer {keys[tenant]}"}
            for client in clients:
                listed = client.get(
                    "/v1/memory/entries",
                    params={"limit": 500},
                    headers={**auth, "x-membrane-min-position": str(last[tenant])},
                )
                assert listed.status_code == 200, listed.text
                ids = {str(entry["id"]) for entry in listed.json()["entries"]}
                assert ids == written[tenant]
    finally:
        for client in clients:
            client.close()
        for daemon in daemons:
            daemon.stop()
    for daemon in daemons:
        assert daemon.process.returncode == 0, "".join(daemon.lines[-20:])

"""The entries API served on loopback per test, a real HTTP client, and keys for two tenants."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from membrane_es.access.keys import Caller, KeyRing
from membrane_es.engine import Membrane
from membrane_es.http_api import HttpServer, create_app
from membrane_es.queries.entries import SearchAdvisor
from membrane_es.schema.enums import Sensitivity
from membrane_es.serving.tenants import Tenants
from membrane_es.timekeeping.clock import MonotonicClock

ALPHA = "alpha-secret"  # tenant "1" (Arbiter-style numeric tenant), no ceiling
BETA = "beta-secret"  # tenant "acme"
LOW = "low-secret"  # tenant "1", may read low-sensitivity records in conversation 7 only
START = datetime(2026, 1, 1, tzinfo=UTC)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


KEYS = KeyRing(
    "",
    [
        (_digest(ALPHA), Caller(tenant="1")),
        (_digest(BETA), Caller(tenant="acme")),
        (
            _digest(LOW),
            Caller(tenant="1", max_sensitivity=Sensitivity.LOW, scopes=("conversation:7",)),
        ),
    ],
)


class HandClock:
    """A wall clock the test moves (every engine of a server reads it)."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    @property
    def epoch(self) -> int:
        return int(self.now.timestamp())


class Served:
    """A running server, its stores, and clients for each key."""

    def __init__(self, server: HttpServer, tenants: Tenants, clock: HandClock) -> None:
        self.server = server
        self.tenants = tenants
        self.clock = clock
        self.base = f"http://127.0.0.1:{server.port}"
        self._clients: list[httpx.Client] = []
        self.alpha = self.client(ALPHA)
        self.beta = self.client(BETA)
        self.low = self.client(LOW)

    def client(self, key: str | None) -> httpx.Client:
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        client = httpx.Client(base_url=self.base, headers=headers, timeout=30)
        self._clients.append(client)
        return client

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self.server.stop()
        self.tenants.close()

    def engine(self, tenant: str = "1") -> Membrane:
        return self.tenants.get(tenant)


Serve = Callable[..., Served]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Starts servers (in-memory stores on a hand clock, or LMDB with ``durable=True``)."""
    running: list[Served] = []

    def start(
        *,
        advisor: SearchAdvisor | None = None,
        durable: bool = False,
        keys: KeyRing = KEYS,
        **options: Any,
    ) -> Served:
        clock = HandClock()

        def open_engine(tenant: str, path: Path | None) -> Membrane:
            if durable:
                return Membrane.open(tmp_path / f"store-{len(running)}-{tenant or 'default'}")
            return Membrane.in_memory(clock=MonotonicClock(clock))

        tenants = Tenants(":memory:", open_engine)
        app = create_app(tenants, keys, advisor=advisor, **options)
        served = Served(HttpServer(app, "127.0.0.1:0").start(), tenants, clock)
        running.append(served)
        return served

    yield start
    for served in running:
        served.close()


@pytest.fixture
def served(serve: Serve) -> Served:
    return serve()


@pytest.fixture
def alpha(served: Served) -> httpx.Client:
    return served.alpha


def new_entry(client: httpx.Client, **fields: Any) -> dict[str, Any]:
    """POSTs an entry (type reference and a title by default) and returns it."""
    body = {"type": "reference", "title": "an entry", **fields}
    response = client.post("/v1/memory/entries", json=body)
    assert response.status_code == 201, response.text
    entry: dict[str, Any] = response.json()
    return entry


def ids(response: httpx.Response) -> list[int]:
    assert response.status_code == 200, response.text
    return [entry["id"] for entry in response.json()["entries"]]

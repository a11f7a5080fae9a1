"""Bounded open stores on PostgreSQL: a tenant store closed to make room gives back every
connection and thread it held (its pool, its pool's worker, its LISTEN follower), so the
connections a daemon holds follow the stores it has open, not every tenant it has served; and
requests spread over more tenants than the bound, from several threads at once, all finish
(none is left waiting on a pool that was never given back)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from membrane_es.access.keys import DEFAULT_TENANT
from membrane_es.grpc_server.config import DaemonConfig
from membrane_es.grpc_server.server import open_stores
from membrane_es.queries.entries import EntryQuery
from membrane_es.schema.entries import NewEntry
from membrane_es.serving.tenants import Tenants
from membrane_es.stores.postgres.database import STORE_CONNECTIONS

pytestmark = pytest.mark.postgres

BOUND = 3


def _connections(dsn: str) -> int:
    """Connections to the test's database, this count's own aside."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _threads() -> int:
    """Threads alive, the one that closes evicted stores aside (it stays, for all of them)."""
    return sum(1 for thread in threading.enumerate() if thread.name != "membrane-tenant-closer")


@pytest.fixture
def stores(postgres_dsn: str, tmp_path: Path) -> Iterator[Tenants]:
    settings = {
        "db_path": str(tmp_path / "views"),
        "embedding_model": "none",
        "consolidation_interval": "0",
        "backend": "postgres",
        "postgres_dsn": postgres_dsn,
        "max_open_stores": BOUND,
    }
    (tmp_path / "views").mkdir()
    tenants, _ = open_stores(msgspec.convert(settings, DaemonConfig))
    try:
        yield tenants
    finally:
        tenants.close()


def _write(stores: Tenants, tenant: str, title: str) -> None:
    with stores.lease(tenant) as engine:
        engine.create_entry(NewEntry(type="reference", title=title))


def _titles(stores: Tenants, tenant: str) -> set[str]:
    with stores.lease(tenant, write=False) as engine:
        return {entry.title for entry in engine.list_entries(EntryQuery(limit=100)).entries}


def test_an_evicted_tenant_gives_back_its_connections_and_threads(
    stores: Tenants, postgres_dsn: str
) -> None:
    assert stores.settle()
    before_connections, before_threads = _connections(postgres_dsn), _threads()
    _write(stores, "first", "first note")
    assert stores.settle()
    one_store_threads = _threads() - before_threads
    assert one_store_threads > 0  # the follower, its subscription, the pool's worker...
    assert _connections(postgres_dsn) - before_connections <= STORE_CONNECTIONS

    tenants = [f"tenant{n}" for n in range(4 * BOUND)]
    for tenant in tenants:
        _write(stores, tenant, f"{tenant} note")
    assert stores.settle()
    open_now = [t for t in stores.open_tenants() if t != DEFAULT_TENANT]
    assert len(open_now) < BOUND  # one place kept free
    assert stores.evicted >= len(tenants) + 1 - BOUND
    # What is still held is the open stores' only: the evicted ones' are gone.
    assert _threads() - before_threads <= one_store_threads * len(open_now), [
        thread.name for thread in threading.enumerate()
    ]
    assert _connections(postgres_dsn) - before_connections <= STORE_CONNECTIONS * len(open_now)
    # Nothing written was lost by the evictions.
    assert _titles(stores, "first") == {"first note"}
    assert _titles(stores, tenants[0]) == {f"{tenants[0]} note"}


def test_requests_over_more_tenants_than_the_bound_all_finish(
    stores: Tenants, postgres_dsn: str
) -> None:
    assert stores.settle()
    before_connections = _connections(postgres_dsn)
    tenants = [f"busy{n}" for n in range(3 * BOUND)]
    written: dict[str, list[str]] = {tenant: [] for tenant in tenants}
    failures: list[BaseException] = []
    most_connections = [0]
    lock = threading.Lock()

    def client(seed: int) -> None:
        chooser = random.Random(seed)
        try:
            for step in range(12):
                tenant = chooser.choice(tenants)
                if chooser.random() < 0.5:
                    title = f"{tenant} {seed} {step}"
                    _write(stores, tenant, title)
                    with lock:
                        written[tenant].append(title)
                else:
                    _titles(stores, tenant)
        except BaseException as error:  # reported below, with the others'
            failures.append(error)

    def watch(done: threading.Event) -> None:
        while not done.wait(0.05):
            most_connections[0] = max(most_connections[0], _connections(postgres_dsn))

    done = threading.Event()
    watcher = threading.Thread(target=watch, args=(done,))
    watcher.start()
    clients = [threading.Thread(target=client, args=(seed,)) for seed in range(4)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join()
    done.set()
    watcher.join()
    assert failures == []
    # At most the bound's stores and one per request in flight, each within its pool's size.
    assert most_connections[0] - before_connections <= STORE_CONNECTIONS * (BOUND + 4)
    assert stores.settle()
    for tenant, titles in written.items():
        assert _titles(stores, tenant) == set(titles)

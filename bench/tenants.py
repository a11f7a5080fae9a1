"""Thousands of tenants on one daemon: memory and descriptors with open stores bounded
against unbounded, and the latency of a request to a cold tenant and to a hot one.

Run: ``python -m bench.tenants [--tenants 2000] [--records 50] [--requests 4000]``
(LMDB), and ``bash .ci/with-postgres .venv/bin/python -m bench.tenants --backend postgres``
(or ``--dsn`` naming a server where this role may create a database; the benchmark makes a
database of its own and drops it afterwards).

Setup (not timed): ``--tenants`` stores of ``--records`` entries each, written through the
engine as a daemon opens them. Then, for each bound (``--bounds``, default 50 and 0 — no
bound), a fresh ``membraned`` process (HTTP entries API on loopback, no embedder) over those
stores serves ``--requests`` requests from ``--clients`` concurrent clients: each request
goes, with equal odds, to a tenant drawn Zipf-like (rank k with weight 1/k: a few hot, many
cold) or to the next tenant of a sweep through all of them in random order, so every tenant
is served once in the run. Requests are 70 % searches (``GET /v1/memory/entries?q=``) and
30 % writes (``POST``); the run stops after ``--seconds`` if it has not finished.

Measured: the daemon's resident memory and open descriptors, sampled as it serves, at the
moment it has served 50 tenants and at its peak over the run (the ratio: flat is 1.0); the
latency of a tenant's first request (cold: its store opened for it) and of requests to the
ten hottest tenants after their first (hot), p50 and p99; and requests that failed.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import msgspec

from bench.daemons import Daemon, start_daemon, write_keys
from bench.scale_out import scratch_database

DSN_ENV = "MEMBRANE_TEST_POSTGRES_DSN"
WORDS = ["orchid", "deploy", "staging", "latency", "build", "cache", "token", "budget"]
SEARCH_SHARE = 0.7
HOT = 10  # the hottest tenants (Zipf ranks 1..10)
MARK = 50  # "serving 50 tenants": the reference point for flat memory
SAMPLE_SECONDS = 0.1


def _tenant(i: int) -> str:
    return f"t{i:05d}"


def populate(root: Path, dsn: str, tenants: list[str], records: int, workers: int = 2) -> float:
    """Write ``records`` entries into each tenant's store as the daemon would open it;
    returns seconds taken."""
    from membrane_es.grpc_server.config import DaemonConfig
    from membrane_es.grpc_server.server import open_stores
    from membrane_es.schema.entries import NewEntry

    settings = {
        "db_path": str(root),
        "embedding_model": "none",
        "consolidation_interval": "0",
        "max_open_stores": 8,
    }
    if dsn:
        settings |= {"backend": "postgres", "postgres_dsn": dsn}
    started = time.perf_counter()
    stores, _ = open_stores(msgspec.convert(settings, DaemonConfig))
    queue = list(tenants)
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if not queue:
                    return
                name = queue.pop()
            chooser = random.Random(name)
            with stores.lease(name) as engine:
                for n in range(records):
                    words = " ".join(chooser.choice(WORDS) for _ in range(4))
                    engine.create_entry(NewEntry(type="reference", title=f"{name} {n} {words}"))

    try:
        threads = [threading.Thread(target=work) for _ in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stores.close()
    return time.perf_counter() - started


@dataclass
class Run:
    """One daemon's run: what was sampled and timed."""

    bound: int
    served_at: list[int] = field(default_factory=list)  # tenants served, per sample
    resident: list[int] = field(default_factory=list)
    descriptors: list[int] = field(default_factory=list)
    cold: list[float] = field(default_factory=list)
    hot: list[float] = field(default_factory=list)
    failures: int = 0
    requests: int = 0
    seconds: float = 0.0
    first_failure: str = ""

    def at_mark(self, values: list[int]) -> int:
        """The value sampled when the daemon had first served ``MARK`` tenants."""
        for served, value in zip(self.served_at, values, strict=True):
            if served >= MARK:
                return value
        return values[-1] if values else 0


def _requests(tenants: list[str], count: int, seed: int) -> list[str]:
    """Which tenant each request goes to: Zipf-like or the sweep's next, evenly mixed."""
    chooser = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(tenants))]
    sweep = list(tenants)
    chooser.shuffle(sweep)
    order: list[str] = []
    for _ in range(count):
        if sweep and chooser.random() < 0.5:
            order.append(sweep.pop())
        else:
            order.append(chooser.choices(tenants, weights)[0])
    return order


def serve_and_measure(
    daemon: Daemon,
    keys: dict[str, str],
    tenants: list[str],
    requests: int,
    clients: int,
    seconds: float,
    bound: int,
) -> Run:
    run = Run(bound)
    order = _requests(tenants, requests, seed=7)
    hot = set(tenants[:HOT])
    seen: set[str] = set()
    lock = threading.Lock()
    done = threading.Event()
    position = iter(range(len(order)))
    deadline = time.monotonic() + seconds

    def sample() -> None:
        while not done.wait(SAMPLE_SECONDS):
            try:
                resident, fds = daemon.resident_bytes(), daemon.descriptors()
            except OSError:
                return
            with lock:
                run.served_at.append(len(seen))
                run.resident.append(resident)
                run.descriptors.append(fds)

    def client(worker: int) -> None:
        chooser = random.Random(worker)
        with httpx.Client(base_url=daemon.base, timeout=60) as http:
            while time.monotonic() < deadline:
                with lock:
                    index = next(position, None)
                    if index is None:
                        return
                    tenant = order[index]
                    first = tenant not in seen
                    seen.add(tenant)
                auth = {"Authorization": f"Bearer {keys[tenant]}"}
                began = time.perf_counter()
                try:
                    if chooser.random() < SEARCH_SHARE:
                        query = " ".join(chooser.sample(WORDS, 2))
                        answer = http.get("/v1/memory/entries", params={"q": query}, headers=auth)
                        ok, said = answer.status_code == 200, answer.text
                    else:
                        body = {"type": "reference", "title": f"{tenant} served {index}"}
                        answer = http.post("/v1/memory/entries", json=body, headers=auth)
                        ok, said = answer.status_code == 201, answer.text
                except httpx.HTTPError as error:  # a timeout counts as a failed request
                    ok, said = False, f"{type(error).__name__}: {error}"
                took = time.perf_counter() - began
                with lock:
                    run.requests += 1
                    if not ok:
                        run.failures += 1
                        run.first_failure = run.first_failure or said[:200]
                    elif first:
                        run.cold.append(took)
                    elif tenant in hot:
                        run.hot.append(took)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    began = time.perf_counter()
    threads = [threading.Thread(target=client, args=(w,)) for w in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.seconds = time.perf_counter() - began
    done.set()
    sampler.join()
    return run


def _ms(values: list[float], fraction: float) -> str:
    if not values:
        return "–"
    ordered = sorted(values)
    return f"{1000 * ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]:.1f}"


def _mib(value: int) -> str:
    return f"{value / 2**20:.0f}"


def report(backend: str, tenants: int, records: int, runs: list[Run]) -> str:
    lines = [
        f"### {backend}: {tenants} tenants × {records} records",
        "",
        "| bound | served | RSS at 50 served (MiB) | peak RSS (MiB) | ratio | fds at 50 "
        "| peak fds | ratio | cold p50 / p99 (ms) | hot p50 / p99 (ms) | failed | req/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        rss50, fds50 = run.at_mark(run.resident), run.at_mark(run.descriptors)
        peak_rss = max(run.resident, default=0)
        peak_fds = max(run.descriptors, default=0)
        served = max(run.served_at, default=0)
        lines.append(
            f"| {run.bound or 'none'} | {served} | {_mib(rss50)} | {_mib(peak_rss)} "
            f"| {peak_rss / max(rss50, 1):.2f} | {fds50} | {peak_fds} "
            f"| {peak_fds / max(fds50, 1):.2f} | {_ms(run.cold, 0.5)} / {_ms(run.cold, 0.99)} "
            f"| {_ms(run.hot, 0.5)} / {_ms(run.hot, 0.99)} | {run.failures} "
            f"| {run.requests / max(run.seconds, 1e-9):.0f} |"
        )
    for run in runs:
        if run.first_failure:
            lines.append(f"\nbound {run.bound or 'none'}, first failure: {run.first_failure}")
    return "\n".join(lines)


@contextmanager
def _database(backend: str, dsn: str) -> Iterator[str]:
    if backend != "postgres":
        yield ""
        return
    if not dsn:
        raise SystemExit(f"--backend postgres needs --dsn or {DSN_ENV} (.ci/with-postgres)")
    with scratch_database(dsn) as database:
        yield database


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["lmdb", "postgres"], default="lmdb")
    parser.add_argument("--dsn", default=os.environ.get(DSN_ENV, ""))
    parser.add_argument("--tenants", type=int, default=2000)
    parser.add_argument("--records", type=int, default=50)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=600.0, help="each run's time limit")
    parser.add_argument("--bounds", default="50,0", help="max_open_stores per run (0: none)")
    args = parser.parse_args()
    names = [_tenant(i) for i in range(args.tenants)]
    bounds = [int(b) for b in args.bounds.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-tenants-") as scratch:
        root = Path(scratch)
        (root / "store").mkdir()
        keys = write_keys(root / "keys.yaml", names)
        with _database(args.backend, args.dsn) as dsn:
            took = populate(root / "store", dsn, names, args.records)
            print(f"populated {args.tenants} tenants × {args.records} records in {took:.0f} s")
            runs = []
            for bound in bounds:
                daemon = start_daemon(
                    root / "store", root / "keys.yaml", dsn=dsn, max_open_stores=bound
                )
                try:
                    runs.append(
                        serve_and_measure(
                            daemon,
                            keys,
                            names,
                            args.requests,
                            args.clients,
                            args.seconds,
                            bound,
                        )
                    )
                finally:
                    daemon.stop()
                if runs and runs[-1].bound == bound and runs[-1].failures:
                    said = "".join(daemon.lines[-12:])
                    print(f"bound {bound or 'none'}: the daemon's last lines:\n{said}")
            print(report(args.backend, args.tenants, args.records, runs))


if __name__ == "__main__":
    main()

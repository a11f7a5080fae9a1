"""A fleet: 3 daemon processes against 1 on the same PostgreSQL, under the same request mix.

Run: ``bash .ci/with-postgres .venv/bin/python -m bench.fleet [--tenants 20] [--pairs 600]``
(or ``--dsn`` naming a server where this role may create a database; each run makes a
database of its own and drops it afterwards).

Each run starts its ``membraned`` processes (HTTP entries API on loopback, no embedder,
``--max-open-stores`` each) on a fresh database, then ``--clients`` concurrent clients send
``--pairs`` write→read pairs over ``--tenants`` tenants: a ``POST`` of an entry to a process
picked at random, then a ``GET`` of that entry from a process picked at random (with 3
processes, another one two times in three) carrying the write's ``x-membrane-position`` as
``x-membrane-min-position``. No sticky routing: any process serves any tenant.

Measured: throughput (requests per second, both halves of a pair counted), p50 and p99 of a
request, and read-your-writes violations — a read that did not return the entry just
written (target 0). The ratio of the two runs' throughputs says what two more processes buy
on this machine, whose cores the PostgreSQL server and the clients share with the daemons.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.daemons import Daemon, start_daemon, write_keys
from bench.scale_out import scratch_database

DSN_ENV = "MEMBRANE_TEST_POSTGRES_DSN"


@dataclass
class FleetRun:
    processes: int
    latencies: list[float] = field(default_factory=list)
    violations: int = 0
    failures: int = 0
    pairs: int = 0
    seconds: float = 0.0


def run_fleet(
    dsn: str, root: Path, processes: int, tenants: int, pairs: int, clients: int, bound: int
) -> FleetRun:
    names = [f"t{i:03d}" for i in range(tenants)]
    keys = write_keys(root / "keys.yaml", names)
    daemons: list[Daemon] = []
    run = FleetRun(processes)
    try:
        for index in range(processes):
            daemons.append(
                start_daemon(
                    root / f"views{index}", root / "keys.yaml", dsn=dsn, max_open_stores=bound
                )
            )
        lock = threading.Lock()
        remaining = iter(range(pairs))

        def client(worker: int) -> None:
            chooser = random.Random(worker)
            https = [httpx.Client(base_url=d.base, timeout=60) for d in daemons]
            try:
                while next(remaining, None) is not None:
                    tenant = chooser.choice(names)
                    auth = {"Authorization": f"Bearer {keys[tenant]}"}
                    began = time.perf_counter()
                    wrote = chooser.choice(https).post(
                        "/v1/memory/entries",
                        json={"type": "reference", "title": f"{tenant} by {worker}"},
                        headers=auth,
                    )
                    middle = time.perf_counter()
                    if wrote.status_code != 201:
                        with lock:
                            run.failures += 1
                        continue
                    entry = str(wrote.json()["id"])
                    position = wrote.headers["x-membrane-position"]
                    read = chooser.choice(https).get(
                        f"/v1/memory/entries/{entry}",
                        headers={**auth, "x-membrane-min-position": position},
                    )
                    ended = time.perf_counter()
                    with lock:
                        run.pairs += 1
                        run.latencies += [middle - began, ended - middle]
                        if read.status_code != 200 or str(read.json().get("id")) != entry:
                            run.violations += 1
            finally:
                for http in https:
                    http.close()

        began = time.perf_counter()
        threads = [threading.Thread(target=client, args=(w,)) for w in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        run.seconds = time.perf_counter() - began
    finally:
        for daemon in daemons:
            daemon.stop()
    return run


def _ms(values: list[float], fraction: float) -> float:
    ordered = sorted(values) or [0.0]
    return 1000 * ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(runs: list[FleetRun], tenants: int) -> str:
    lines = [
        f"### The fleet: {tenants} tenants, write→read pairs on one PostgreSQL",
        "",
        "| processes | pairs | requests/s | p50 (ms) | p99 (ms) | RYW violations | failed |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        rate = 2 * run.pairs / max(run.seconds, 1e-9)
        lines.append(
            f"| {run.processes} | {run.pairs} | {rate:.0f} | {_ms(run.latencies, 0.5):.1f} "
            f"| {_ms(run.latencies, 0.99):.1f} | {run.violations} | {run.failures} |"
        )
    if len(runs) == 2 and runs[0].seconds and runs[1].seconds:
        first, second = (2 * r.pairs / r.seconds for r in runs)
        lines.append(
            f"\nthroughput {runs[1].processes} ÷ {runs[0].processes} processes: "
            f"{second / first:.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", default=os.environ.get(DSN_ENV, ""))
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=600)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--max-open-stores", type=int, default=50, dest="bound")
    parser.add_argument("--processes", default="1,3", help="the runs' process counts")
    args = parser.parse_args()
    if not args.dsn:
        raise SystemExit(f"needs --dsn or {DSN_ENV} (bash .ci/with-postgres ...)")
    runs = []
    for processes in (int(p) for p in args.processes.split(",")):
        with (
            tempfile.TemporaryDirectory(prefix="bench-fleet-") as scratch,
            scratch_database(args.dsn) as dsn,
        ):
            runs.append(
                run_fleet(
                    dsn,
                    Path(scratch),
                    processes,
                    args.tenants,
                    args.pairs,
                    args.clients,
                    args.bound,
                )
            )
    print(report(runs, args.tenants))


if __name__ == "__main__":
    main()

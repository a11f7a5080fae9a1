"""Several processes on one PostgreSQL log: write throughput, follower lag, read throughput.

Run: ``bash .ci/with-postgres .venv/bin/python -m bench.scale_out [--writes N] [--write]``
(or ``--dsn`` naming a server where this role may create a database; the benchmark makes a
database of its own and drops it afterwards).

* **Write throughput**: ``--writes`` records created one durable write each (the hashing
  embedder), by one process on an LMDB store, then by 1 and by 2 processes on one PostgreSQL
  log (each its own ``Membrane.open_postgres``, the writes split between them), timed from a
  common start to the last process's end. Ratios: PostgreSQL ÷ LMDB single process.
* **Follower lag**: one process writes at a steady ``--rate`` for ``--lag-writes`` records
  and notes when each write was acknowledged; another process that never writes notes when
  its views reach each write's position (``wait_for_position``). Lag = visible − acknowledged
  (CLOCK_MONOTONIC is one clock for every process on the machine); p50 and p99.
* **Read throughput**: ``--reads`` layered retrievals (ten words, limit 10, full trust) over a
  log of ``--writes`` records, by 1 and by 2 serving processes (each with its own views,
  split evenly), timed as the writes are. Ratio: 2 ÷ 1.

Each process is started (spawn) and opened before the clock starts. The machine's cores are
shared with the PostgreSQL server, so two writer processes contend with it for CPU as well as
for the log's lock.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from bench.core import write_section
from membrane_es import Membrane
from membrane_es.embedding.hashing import HashingEmbedder
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext

TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER)
WORDS = ["orchid", "deploy", "staging", "postgres", "latency", "build", "cache", "token"]
QUERY = "orchid deploy staging latency"
DSN_ENV = "MEMBRANE_TEST_POSTGRES_DSN"


def _record(i: int) -> dict[str, Any]:
    return {
        "type": "semantic",
        "tags": [WORDS[i % len(WORDS)]],
        "payload": {
            "kind": "semantic",
            "subject": f"service-{i}",
            "predicate": "relates_to",
            "object": f"{WORDS[i % 8]} {WORDS[(i * 3) % 8]} host-{i % 11}",
        },
        "provenance": {"sources": [{"kind": "observation", "ref": "bench"}]},
    }


def _open(store: str, schema: str) -> Membrane:
    """The PostgreSQL store ``store`` (a DSN) in ``schema``; with no schema, the LMDB store in
    directory ``store``."""
    embedder = HashingEmbedder(64)
    if schema:
        return Membrane.open_postgres(store, schema=schema, embedder=embedder)
    return Membrane.open(store, embedder=embedder)


# --- the processes -----------------------------------------------------------------------


def _writer(store: str, schema: str, first: int, count: int, start: Barrier, out: Any) -> None:
    with _open(store, schema) as memory:
        start.wait()
        began = time.monotonic()
        for i in range(first, first + count):
            memory.create_record(_record(i))
        out.put(("wrote", began, time.monotonic()))


def _steady_writer(
    dsn: str, schema: str, count: int, rate: float, start: Barrier, out: Any
) -> None:
    with _open(dsn, schema) as memory:
        start.wait()
        acknowledged = []
        began = time.monotonic()
        for i in range(count):
            due = began + i / rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)  # a steady load: one write every 1/rate seconds
            memory.create_record(_record(i))
            acknowledged.append((memory.last_position, time.monotonic()))
        out.put(("acknowledged", acknowledged))


def _follower(dsn: str, schema: str, count: int, start: Barrier, out: Any) -> None:
    with _open(dsn, schema) as memory:
        first = memory.position
        start.wait()
        visible = []
        for position in range(first + 1, first + count + 1):
            memory.wait_for_position(position, timeout=60)
            visible.append((position, time.monotonic()))
        out.put(("visible", visible))


def _reader(dsn: str, schema: str, count: int, start: Barrier, out: Any) -> None:
    with _open(dsn, schema) as memory:
        memory.retrieve(QUERY, trust=TRUST, limit=10)  # warm
        start.wait()
        began = time.monotonic()
        for _ in range(count):
            memory.retrieve(QUERY, trust=TRUST, limit=10)
        out.put(("read", began, time.monotonic()))


def _run(targets: list[tuple[Callable[..., None], tuple[Any, ...]]]) -> list[Any]:
    """Start one process per target, release them together, return what each reported."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(len(targets))
    out = context.Queue()
    processes = [context.Process(target=t, args=(*a, start, out)) for t, a in targets]
    for process in processes:
        process.start()
    results = [out.get(timeout=600) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        if process.exitcode != 0:
            raise RuntimeError(f"a benchmark process failed (exit {process.exitcode})")
    return results


def _span(results: list[Any]) -> float:
    return max(r[2] for r in results) - min(r[1] for r in results)


# --- the measurements --------------------------------------------------------------------


def write_rates(dsn: str, writes: int) -> dict[str, float]:
    rates = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-out-") as directory:
        lmdb = _run([(_writer, (str(Path(directory) / "lmdb"), "", 0, writes))])
        rates["lmdb"] = writes / _span(lmdb)
    one = _run([(_writer, (dsn, "writes_one", 0, writes))])
    rates["postgres 1"] = writes / _span(one)
    half = writes // 2
    two = _run([(_writer, (dsn, "writes_two", i * half, half)) for i in range(2)])
    rates["postgres 2"] = 2 * half / _span(two)
    return rates


def follower_lag(dsn: str, count: int, rate: float) -> list[float]:
    results = _run([(_steady_writer, (dsn, "lag", count, rate)), (_follower, (dsn, "lag", count))])
    found = dict((kind, rows) for kind, rows in results)
    visible = dict(found["visible"])
    return [visible[position] - at for position, at in found["acknowledged"]]


def read_rates(dsn: str, records: int, reads: int) -> dict[int, float]:
    with _open(dsn, "reads") as memory, memory.batch():
        for i in range(records):
            memory.create_record(_record(i))
    rates = {}
    for processes in (1, 2):
        share = reads // processes
        results = _run([(_reader, (dsn, "reads", share))] * processes)
        rates[processes] = share * processes / _span(results)
    return rates


@contextmanager
def scratch_database(server: str) -> Iterator[str]:
    """A database of the benchmark's own on ``server``, dropped afterwards."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    name = f"membrane_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(server, dbname=name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=os.environ.get(DSN_ENV, ""))
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--lag-writes", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="writes/s for the lag")
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = parser.parse_args()
    if not args.dsn:
        parser.error(f"no PostgreSQL server: pass --dsn or run under .ci/with-postgres ({DSN_ENV})")

    with scratch_database(args.dsn) as dsn:
        writes = write_rates(dsn, args.writes)
        lags = follower_lag(dsn, args.lag_writes, args.rate)
        reads = read_rates(dsn, args.writes, args.reads)

    lmdb = writes["lmdb"]
    p50, p99 = _percentile(lags, 0.5), _percentile(lags, 0.99)
    lines = [
        "## Scale-out: several processes on one PostgreSQL log",
        "",
        f"{args.writes} records, one durable write each; follower lag over {args.lag_writes} "
        f"writes at {args.rate:g}/s; {args.reads} retrievals over {args.writes} records.",
        "",
        "| measurement | value | ratio |",
        "| --- | --- | --- |",
        f"| LMDB, 1 writer process (the baseline) | {lmdb:,.0f} writes/s | 1.00× |",
        f"| PostgreSQL, 1 writer process ÷ LMDB, 1 process | {writes['postgres 1']:,.0f} "
        f"writes/s | {writes['postgres 1'] / lmdb:.2f}× |",
        f"| PostgreSQL, 2 writer processes ÷ LMDB, 1 process | {writes['postgres 2']:,.0f} "
        f"writes/s | {writes['postgres 2'] / lmdb:.2f}× |",
        f"| follower lag, write acknowledged → visible in another process, p50 | "
        f"{p50 * 1e3:.1f} ms | |",
        f"| follower lag, p99 | {p99 * 1e3:.1f} ms | |",
        f"| reads, 1 serving process | {reads[1]:,.0f} retrievals/s | 1.00× |",
        f"| reads, 2 serving processes ÷ 1 | {reads[2]:,.0f} retrievals/s | "
        f"{reads[2] / reads[1]:.2f}× |",
    ]
    text = "\n".join(lines)
    print(text)
    print(f"(lag mean {statistics.fmean(lags) * 1e3:.1f} ms, max {max(lags) * 1e3:.1f} ms)")
    if args.write:
        write_section(
            Path(__file__).resolve().parent.parent / "docs/benchmarks.md", "bench.scale_out", text
        )


if __name__ == "__main__":
    main()

"""Benchmark of the change feed: reading it, against exporting the same log; and how soon a
write reaches a consumer that follows the feed in another process.

(a) throughput: the whole log read as changes from position 0 (``Membrane.changes``, the
    owner's trust: every change, decoded, folded, diffed) against ``export_log`` of the same
    log into memory, in events per second, one after the other in each of ``--rounds``
    rounds (which goes first alternates from round to round); the ratio is the median of
    the rounds' (their spread beside it), the rates the best of each; the same ratio in
    this process's CPU time beside it (``process_time``, which other work on a shared
    host disturbs less than the clock); on LMDB, and on PostgreSQL when a server is
    given; the target is a ratio of at least 0.8;
(b) follow lag: a consumer process follows the feed (``changes(follow=True)``) and notes
    the wall-clock moment each change reaches it; this process writes one record at a
    time, noting the moment each write is acknowledged (its position known); the lag of a
    write is the difference (both processes on this host's clock). p50 and p99 on LMDB,
    and on PostgreSQL when a server is given (``--dsn``, or under ``.ci/with-postgres``);
    the host's load average is reported beside them (target p99 ≤ 50 ms on an idle
    machine).

Run: ``python -m bench.changes [--events N] [--rounds N] [--writes N] [--dsn DSN]
[--throughput-only] [--write]``.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.core import BATCH, _record, write_section
from membrane_es import Membrane, Sensitivity, TrustContext

OWNER = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)
DSN_ENV = "MEMBRANE_TEST_POSTGRES_DSN"
ROOT = Path(__file__).resolve().parents[1]


def _fill(memory: Membrane, events: int) -> None:
    """About ``events`` events: records made in batches, a fifth of them reinforced."""
    made = 0
    ids: list[str] = []
    while made < events:
        with memory.batch():
            for i in range(made, min(made + BATCH, events)):
                if i % 5 == 4 and ids:
                    memory.reinforce(ids[i // 2], actor="bench", rationale="used")
                else:
                    ids.append(memory.create_record(_record(i)).id)
        made += BATCH


def _read_feed(memory: Membrane) -> int:
    return sum(1 for _ in memory.changes(trust=OWNER))


def _export(memory: Membrane) -> int:
    return memory.export_log(io.BytesIO())


def throughput(memory: Membrane, events: int, rounds: int) -> dict[str, float]:
    """Events per second: the feed read whole and the export, one after the other in each
    of ``rounds`` rounds (so both meet the same load), which goes first alternating from
    round to round (neither always meets the other's leftovers); the ratio of each round,
    and their median and spread."""
    _fill(memory, events)
    count = memory.event_count()
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    best = {"changes": float("inf"), "export": float("inf")}
    for round_ in range(rounds):
        order = [("changes", _read_feed), ("export", _export)]
        if round_ % 2:
            order.reverse()
        wall: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for name, read in order:
            start, cpu_start = time.perf_counter(), time.process_time()
            assert read(memory) == count
            wall[name] = time.perf_counter() - start
            # This process's CPU time: what other work on the host disturbs least.
            cpu[name] = time.process_time() - cpu_start
        ratios.append(wall["export"] / wall["changes"])
        cpu_ratios.append(cpu["export"] / cpu["changes"])
        for name in best:
            best[name] = min(best[name], wall[name])
    return {
        "events": count,
        "changes_rate": count / best["changes"],
        "export_rate": count / best["export"],
        "ratio": statistics.median(ratios),
        "ratio_low": min(ratios),
        "ratio_high": max(ratios),
        "cpu_ratio": statistics.median(cpu_ratios),
        "cpu_ratio_low": min(cpu_ratios),
        "cpu_ratio_high": max(cpu_ratios),
        "rounds": rounds,
    }


def lmdb_throughput(events: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-changes-") as directory:
        with Membrane.open(directory, sync=False, embedder=None) as memory:
            return throughput(memory, events, rounds)


def postgres_throughput(dsn: str, events: int, rounds: int) -> dict[str, float]:
    schema = f"bench_feed_{os.getpid()}"
    with Membrane.open_postgres(dsn, schema=schema, embedder=None) as memory:
        return throughput(memory, events, rounds)


# --- follow lag ------------------------------------------------------------------------------


def _open(store: str, schema: str) -> Membrane:
    if schema:
        return Membrane.open_postgres(store, schema=schema, embedder=None)
    return Membrane.open(store, embedder=None)


def consume(store: str, schema: str, after: int, count: int) -> None:
    """The consumer process: follow the feed after ``after`` and print, for each of the next
    ``count`` changes, its position and the wall-clock moment it arrived."""
    with _open(store, schema) as memory:
        print("ready", flush=True)
        with memory.changes(after=after, follow=True, timeout=60, trust=OWNER) as feed:
            for n, change in enumerate(feed, 1):
                print(change.position, time.time(), flush=True)
                if n == count:
                    return


def lag(store: str, schema: str, writes: int, pause: float) -> dict[str, float]:
    """Milliseconds from each write's acknowledgement to its change reaching the consumer."""
    with _open(store, schema) as memory:
        memory.create_record(_record(0))
        after = memory.last_position or 0
        consumer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.changes",
                "--consume",
                store,
                schema,
                str(after),
                str(writes),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert consumer.stdout is not None
        assert consumer.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # its follow is listening
        acknowledged: dict[int, float] = {}
        for i in range(1, writes + 1):
            memory.create_record(_record(i))
            acknowledged[memory.last_position or 0] = time.time()
            time.sleep(pause)
        arrived: dict[int, float] = {}
        for line in consumer.stdout:
            position, moment = line.split()
            arrived[int(position)] = float(moment)
        assert consumer.wait(timeout=120) == 0
    lags = sorted(1000 * (arrived[p] - acknowledged[p]) for p in acknowledged)
    return {
        "p50_ms": statistics.median(lags),
        "p99_ms": lags[min(len(lags) - 1, round(0.99 * (len(lags) - 1)))],
        "max_ms": lags[-1],
        "load": os.getloadavg()[0],
    }


def _rates_line(name: str, rates: dict[str, float]) -> str:
    return (
        f"{name}: feed {rates['changes_rate']:,.0f} events/s, export "
        f"{rates['export_rate']:,.0f} events/s (best of {rates['rounds']:.0f}); ratio median "
        f"{rates['ratio']:.2f}x, rounds {rates['ratio_low']:.2f} to {rates['ratio_high']:.2f}; "
        f"in CPU time {rates['cpu_ratio']:.2f}x, rounds {rates['cpu_ratio_low']:.2f} to "
        f"{rates['cpu_ratio_high']:.2f}"
    )


def _report(rates: dict[str, dict[str, float]], lags: dict[str, dict[str, float]]) -> str:
    lines = [
        "## The change feed (`python -m bench.changes`)",
        "",
        "Feed read whole from position 0 (owner's trust: every change, folded and diffed) "
        "against `export_log` of the same log, side by side in each round, which goes first "
        "alternating (target ≥ 0.8×):",
        "",
        "| store | events | feed | export | ratio: median (rounds' spread) | in CPU time |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, figures in rates.items():
        lines.append(
            f"| {name} | {figures['events']:.0f} | {figures['changes_rate']:,.0f} events/s | "
            f"{figures['export_rate']:,.0f} events/s | **{figures['ratio']:.2f}×** "
            f"({figures['ratio_low']:.2f}–{figures['ratio_high']:.2f}, "
            f"{figures['rounds']:.0f} rounds) | **{figures['cpu_ratio']:.2f}×** "
            f"({figures['cpu_ratio_low']:.2f}–{figures['cpu_ratio_high']:.2f}) |"
        )
    lines += [
        "",
        "| follow lag, another process | p50 | p99 | max | load (1 min) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, figures in lags.items():
        lines.append(
            f"| {name} | {figures['p50_ms']:.1f} ms | {figures['p99_ms']:.1f} ms | "
            f"{figures['max_ms']:.1f} ms | {figures['load']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000, help="events in the log read")
    parser.add_argument("--rounds", type=int, default=3, help="reads of each kind; best kept")
    parser.add_argument("--writes", type=int, default=200, help="writes timed for the lag")
    parser.add_argument("--pause", type=float, default=0.02, help="seconds between writes")
    parser.add_argument("--dsn", default=os.environ.get(DSN_ENV, ""), help="PostgreSQL too")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument(
        "--throughput-only", action="store_true", help="measure the feed's rate, not the lag"
    )
    parser.add_argument(
        "--consume", nargs=4, metavar=("STORE", "SCHEMA", "AFTER", "COUNT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.consume:
        store, schema, after, count = args.consume
        consume(store, schema, int(after), int(count))
        return
    rates = {"LMDB": lmdb_throughput(args.events, args.rounds)}
    if args.dsn:
        rates["PostgreSQL"] = postgres_throughput(args.dsn, args.events, args.rounds)
    for name, figures in rates.items():
        print(_rates_line(name, figures))
    if args.throughput_only:
        return
    lags: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-changes-lag-") as directory:
        lags["LMDB"] = lag(directory, "", args.writes, args.pause)
    if args.dsn:
        lags["PostgreSQL"] = lag(args.dsn, f"bench_changes_{os.getpid()}", args.writes, args.pause)
    for name, figures in lags.items():
        print(
            f"{name}: p50 {figures['p50_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms, "
            f"max {figures['max_ms']:.1f} ms, load {figures['load']:.2f}"
        )
    if args.write:
        write_section(ROOT / "docs" / "benchmarks.md", "bench.changes", _report(rates, lags))


if __name__ == "__main__":
    main()

"""Benchmark of the event-sourced core: durable writes, single-op latency, aggregate rebuild.

Every figure is a ratio against a baseline measured side by side in the same run, because
these machines are shared and noisy. Run: ``python -m bench.core [--records N] [--write]``.

(a) record creation through the API: LMDB (durable) against eventsourcing's SQLite
    persistence on a file (same durability: synchronous=FULL) and its in-memory POPO
    persistence, one write per record and in batches;
(b) one durable operation's p50 latency against a bare synced one-put py-lmdb commit;
(c) rebuilding a 1,000-event aggregate against reading its 1,000 rows raw from LMDB.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lmdb

from membrane_es import Membrane
from membrane_es.aggregates import record_key
from membrane_es.wiring.application import MemoryApplication

BATCH = 100


def _record(i: int) -> dict[str, object]:
    return {
        "type": "semantic",
        "scope": f"project:{i % 7}",
        "tags": ["bench"],
        "payload": {
            "kind": "semantic",
            "subject": f"service-{i}",
            "predicate": "runs_on",
            "object": f"host-{i % 13}",
        },
        "provenance": {"sources": [{"kind": "observation", "ref": f"obs-{i}"}]},
    }


@contextmanager
def _store(kind: str) -> Iterator[Membrane]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as directory:
        if kind == "lmdb":
            memory = Membrane.open(directory, embedder=None)
        elif kind == "sqlite":
            memory = Membrane(
                MemoryApplication(
                    {
                        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
                        "SQLITE_DBNAME": str(Path(directory) / "events.db"),
                    }
                ),
                embedder=None,
            )
        else:
            memory = Membrane.in_memory(embedder=None)
        try:
            yield memory
        finally:
            memory.close()


def creation_rate(kind: str, records: int, batch: int) -> float:
    """Records created per second through the API."""
    with _store(kind) as memory:
        start = time.perf_counter()
        if batch == 1:
            for i in range(records):
                memory.create_record(_record(i))
        else:
            for first in range(0, records, batch):
                with memory.batch():
                    for i in range(first, min(first + batch, records)):
                        memory.create_record(_record(i))
        return records / (time.perf_counter() - start)


def single_op_p50(ops: int) -> tuple[float, float]:
    """p50 seconds of one durable reinforce, and of a bare synced one-put LMDB commit."""
    with _store("lmdb") as memory, tempfile.TemporaryDirectory(prefix="bench-raw-") as raw_dir:
        record = memory.create_record(_record(0))
        env = lmdb.open(raw_dir, map_size=1 << 30, sync=True, metasync=True)
        value = b"x" * 400
        api: list[float] = []
        bare: list[float] = []
        for i in range(ops):  # interleaved, so both see the same disk and neighbours
            start = time.perf_counter()
            memory.reinforce(record.id, "bench", "useful")
            api.append(time.perf_counter() - start)
            start = time.perf_counter()
            with env.begin(write=True) as txn:
                txn.put(i.to_bytes(8, "big"), value)
            bare.append(time.perf_counter() - start)
        env.close()
        return statistics.median(api), statistics.median(bare)


def rebuild(events: int, repeats: int) -> tuple[float, float]:
    """Median seconds to rebuild one aggregate of ``events`` events, and to read its rows."""
    with tempfile.TemporaryDirectory(prefix="bench-rebuild-") as directory:
        with Membrane.open(directory, sync=False, embedder=None) as memory:
            record = memory.create_record(_record(0))
            with memory.batch():
                for _ in range(events - 1):
                    memory.reinforce(record.id, "bench", "useful")
        with Membrane.open(directory, embedder=None) as memory:
            app = memory.application
            key = record_key(record.id)
            rebuild_times = _timed(lambda: app.repository.get(key, projector_func=_fold), repeats)
            read_times = _timed(lambda: app.recorder.select_events(key), repeats)
        return statistics.median(rebuild_times), statistics.median(read_times)


def _fold(aggregate: Any, events: Iterable[Any]) -> Any:
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


def _timed(work: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return times


def write_section(path: Path, name: str, text: str) -> None:
    """Replace the generated section ``name`` of a Markdown file, keeping the prose around it."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{text}\n{end}"
    current = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in current and end in current:
        head, rest = current.split(begin, 1)
        current = head + block + rest.split(end, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(current)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--ops", type=int, default=500)
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = parser.parse_args()

    rates = {
        (kind, batch): creation_rate(kind, args.records, batch)
        for kind in ("lmdb", "sqlite", "popo")
        for batch in (1, BATCH)
    }
    api_p50, bare_p50 = single_op_p50(args.ops)
    rebuild_s, read_s = rebuild(1000, 20)

    lines = [
        "## Core: durable writes, latency, rebuild",
        "",
        f"{args.records} records; batches of {BATCH}; {args.ops} single operations.",
        "",
        "| measurement | value | ratio | target |",
        "| --- | --- | --- | --- |",
    ]

    def rate_row(label: str, key: tuple[str, int], base: tuple[str, int], target: str) -> None:
        ratio = rates[key] / rates[base]
        lines.append(f"| {label} | {rates[key]:,.0f} records/s | {ratio:.2f}× | {target} |")

    rate_row(
        "LMDB durable, batched ÷ SQLite file, one write per record",
        ("lmdb", BATCH),
        ("sqlite", 1),
        "≥ 2×",
    )
    rate_row(
        "LMDB durable, batched ÷ POPO in memory, one write per record",
        ("lmdb", BATCH),
        ("popo", 1),
        "≥ 0.5×",
    )
    rate_row("LMDB durable, batched ÷ SQLite file, batched", ("lmdb", BATCH), ("sqlite", BATCH), "")
    rate_row("LMDB durable, batched ÷ POPO, batched", ("lmdb", BATCH), ("popo", BATCH), "")
    rate_row("LMDB durable ÷ SQLite file, one write per record", ("lmdb", 1), ("sqlite", 1), "")
    latency = f"{api_p50 * 1e6:,.0f} µs vs {bare_p50 * 1e6:,.0f} µs"
    lines.append(
        f"| one durable reinforce p50 ÷ bare synced one-put LMDB commit p50 | "
        f"{latency} | {api_p50 / bare_p50:.2f}× | ≤ 1.5× |"
    )
    lines.append(
        f"| rebuild a 1,000-event aggregate ÷ raw read of its 1,000 rows | "
        f"{rebuild_s * 1e3:.1f} ms vs {read_s * 1e3:.2f} ms | {rebuild_s / read_s:.1f}× | |"
    )
    report = "\n".join(lines)
    print(report)
    if args.write:
        write_section(Path("docs/benchmarks.md"), "bench.core", report)


if __name__ == "__main__":
    main()

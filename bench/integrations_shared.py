"""Adapters sharing their engine, and the durable stores they replace, side by side in rounds.

Run: ``python -m bench.integrations_shared [--items 1000 10000] [--rounds 3]``. Each round,
for each size, on durable LMDB stores in a temporary directory (every write synced):

* ``store get, another store writing``: a ``MembraneStore`` reads one item right after a
  second ``MembraneStore`` on the same engine wrote one, against the same read with no
  other writer on its engine (the cost of following the log; target ≤ 2×). The baseline's
  read follows the same untimed write made on another engine (its own directory, filled
  alike): a synced write leaves the process waiting on the disk, and whatever ran meanwhile
  leaves the CPU's caches cold for the next call, which costs a read of a cached item about
  as much as following the log does; writing elsewhere puts both reads after the same wait,
  so the ratio is what sharing the engine costs;
* ``session get_items(10), another session writing``: the same for two
  ``MembraneSession`` objects of one conversation (target ≤ 2×);
* ``session get_items(10)`` and ``session add_items (1 item)`` against the SDK's
  ``SQLiteSession`` on a file (target ≤ 1×);
* ``store put`` against LangGraph's ``SqliteStore`` on a file (target ≤ 1×; no index: the
  stores are measured, not an embedder);
* ``checkpointer put`` and ``get_tuple`` against ``SqliteSaver`` on a file (target ≤ 1.5×),
  from :mod:`bench.integrations_langgraph_checkpoint`.

Calls alternate one by one between the two sides, so a busy machine weighs on both alike;
each figure is a p50. Over the rounds, each ratio is reported as its median with the lowest
and highest round (its spread).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agents.memory import SQLiteSession
from langgraph.store.base import BaseStore, PutOp

from bench import integrations_langgraph_checkpoint as checkpoint_bench
from membrane_es import Membrane
from membrane_es.integrations.langgraph_store import MembraneStore
from membrane_es.integrations.openai_agents_session import MembraneSession

CALLS = 200  # timed calls per operation and side
FILL_BATCH = 500
CHECKPOINT_ITEMS = 1_000  # checkpoints the checkpointer rows are measured on


def _p50_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _pairs(
    ours: Callable[[int], Callable[[], object]],
    theirs: Callable[[int], Callable[[], object]],
    calls: int = CALLS,
) -> tuple[float, float]:
    """p50s of ``ours(i)()`` and ``theirs(i)()``, alternating call by call; each maker may
    do untimed work first (another writer's write) and returns the call to time."""
    mine, other = [], []
    for i in range(calls):
        mine.append(_timed(ours(i)))
        other.append(_timed(theirs(i)))
    return _p50_ms(mine), _p50_ms(other)


def _fill_store(store: BaseStore, items: int) -> None:
    for start in range(0, items, FILL_BATCH):
        store.batch(
            [
                PutOp(("users", f"u{n % 100}"), f"m{n}", {"text": f"memory {n}", "n": n})
                for n in range(start, min(items, start + FILL_BATCH))
            ]
        )


def _message(i: int) -> Any:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}


def _row(operation: str, items: int, baseline: str, ours: float, theirs: float) -> dict[str, Any]:
    return {
        "operation": operation,
        "items": items,
        "baseline": baseline,
        "ours_p50_ms": ours,
        "theirs_p50_ms": theirs,
        "ratio": ours / theirs if theirs else float("inf"),
    }


def store_rows(directory: Path, items: int) -> list[dict[str, Any]]:
    from langgraph.store.sqlite import SqliteStore

    rng = random.Random(items)
    rows = []
    with (
        Membrane.open(directory / "store", embedder=None) as memory,
        Membrane.open(directory / "store-elsewhere", embedder=None) as other_memory,
    ):
        reader, writer = MembraneStore(memory), MembraneStore(memory)
        elsewhere = MembraneStore(other_memory)  # the same writes, on an engine of its own
        _fill_store(reader, items)
        _fill_store(elsewhere, items)

        def key() -> tuple[tuple[str, ...], str]:
            n = rng.randrange(items)
            return ("users", f"u{n % 100}"), f"m{n}"

        def alone(i: int) -> Callable[[], object]:
            elsewhere.put(*key(), {"text": f"revised {i}", "n": i})  # untimed: another engine
            namespace, name = key()
            return lambda: reader.get(namespace, name)

        def shared(i: int) -> Callable[[], object]:
            writer.put(*key(), {"text": f"revised {i}", "n": i})  # untimed: another writer
            namespace, name = key()
            return lambda: reader.get(namespace, name)

        with_writer, without = _pairs(shared, alone)
        rows.append(
            _row(
                "store get, another store writing",
                items,
                "same get, a write on another engine before it",
                with_writer,
                without,
            )
        )
        with SqliteStore.from_conn_string(str(directory / "store.sqlite")) as sqlite_store:
            sqlite_store.setup()
            _fill_store(sqlite_store, items)
            ours, theirs = _pairs(
                lambda i: lambda: reader.put(*key(), {"text": f"put {i}", "n": i}),
                lambda i: lambda: sqlite_store.put(*key(), {"text": f"put {i}", "n": i}),
            )
        rows.append(_row("store put", items, "SqliteStore (file)", ours, theirs))
    return rows


def session_rows(directory: Path, items: int) -> list[dict[str, Any]]:
    rows = []
    with (
        Membrane.open(directory / "session", embedder=None) as memory,
        Membrane.open(directory / "session-elsewhere", embedder=None) as other_memory,
    ):
        reader, writer = MembraneSession("chat", memory), MembraneSession("chat", memory)
        elsewhere = MembraneSession("chat", other_memory)  # the same writes, on its own engine
        reference = SQLiteSession("chat", directory / "sessions.db")
        loop = asyncio.new_event_loop()
        try:
            for start in range(0, items, 1000):
                batch = [_message(i) for i in range(start, min(items, start + 1000))]
                loop.run_until_complete(reader.add_items(batch))
                loop.run_until_complete(elsewhere.add_items(batch))
                loop.run_until_complete(reference.add_items(batch))

            def alone(i: int) -> Callable[[], object]:
                loop.run_until_complete(elsewhere.add_items([_message(items + i)]))  # untimed
                return lambda: loop.run_until_complete(reader.get_items(10))

            def shared(i: int) -> Callable[[], object]:
                loop.run_until_complete(writer.add_items([_message(items + i)]))  # untimed
                return lambda: loop.run_until_complete(reader.get_items(10))

            with_writer, without = _pairs(shared, alone)
            rows.append(
                _row(
                    "session get_items(10), another session writing",
                    items,
                    "same call, a write on another engine before it",
                    with_writer,
                    without,
                )
            )
            ours, theirs = _pairs(
                lambda i: lambda: loop.run_until_complete(reader.get_items(10)),
                lambda i: lambda: loop.run_until_complete(reference.get_items(10)),
            )
            rows.append(_row("session get_items(10)", items, "SQLiteSession (file)", ours, theirs))
            ours, theirs = _pairs(
                lambda i: lambda: loop.run_until_complete(reader.add_items([_message(i)])),
                lambda i: lambda: loop.run_until_complete(reference.add_items([_message(i)])),
            )
            rows.append(
                _row("session add_items (1 item)", items, "SQLiteSession (file)", ours, theirs)
            )
        finally:
            loop.close()
            reference.close()
    return rows


def checkpoint_rows() -> list[dict[str, Any]]:
    return [
        _row(
            f"checkpointer {row['operation']}",
            CHECKPOINT_ITEMS,
            row["baseline"],
            row["ours_p50_ms"],
            row["theirs_p50_ms"],
        )
        for row in checkpoint_bench.measure(CHECKPOINT_ITEMS)
        if row["operation"] in ("put", "get_tuple") and "Sqlite" in row["baseline"]
    ]


def one_round(sizes: Sequence[int]) -> list[dict[str, Any]]:
    rows = []
    for items in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-shared-") as directory:
            rows.extend(store_rows(Path(directory), items))
            rows.extend(session_rows(Path(directory), items))
    rows.extend(checkpoint_rows())
    return rows


def summary(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per operation, size and baseline: the median ratio over rounds and its spread."""
    grouped: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for rows in rounds:
        for row in rows:
            grouped.setdefault((row["operation"], row["items"], row["baseline"]), []).append(row)
    return [
        {
            "operation": operation,
            "items": items,
            "baseline": baseline,
            "ours_p50_ms": statistics.median(r["ours_p50_ms"] for r in runs),
            "theirs_p50_ms": statistics.median(r["theirs_p50_ms"] for r in runs),
            "ratio": statistics.median(r["ratio"] for r in runs),
            "low": min(r["ratio"] for r in runs),
            "high": max(r["ratio"] for r in runs),
            "rounds": len(runs),
        }
        for (operation, items, baseline), runs in grouped.items()
    ]


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| operation | items | against | ours p50 (ms) | theirs p50 (ms) | ratio (median) "
        "| spread |",
        "|---|---:|---|---:|---:|---:|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['operation']} | {row['items']:,} | {row['baseline']} "
            f"| {row['ours_p50_ms']:.3f} | {row['theirs_p50_ms']:.3f} | {row['ratio']:.2f}× "
            f"| {row['low']:.2f}–{row['high']:.2f}× |"
        )
    return "\n".join(lines)


def measure(sizes: Sequence[int], rounds: int) -> list[dict[str, Any]]:
    results = []
    for n in range(rounds):
        print(f"round {n + 1} of {rounds}…", flush=True)
        results.append(one_round(sizes))
    return summary(results)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, nargs="+", default=[1_000, 10_000], help="store sizes")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (at least 1)")
    args = parser.parse_args(argv)
    print(table(measure(args.items, max(args.rounds, 1))))


if __name__ == "__main__":
    main()

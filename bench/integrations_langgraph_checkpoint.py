"""The LangGraph checkpointer beside LangGraph's own savers, side by side in one run.

Run: ``python -m bench.integrations_langgraph_checkpoint [--items N]``. Every saver is given
the same work: ``N`` checkpoints in threads of 100 (each the child of the one before, a
message list that grows by one short message a step and a counter, only the changed channels
in ``new_versions``), then reads of random threads. Operations timed, one call each:

* ``put``: every checkpoint written;
* ``get_tuple``: a thread's latest checkpoint, what every graph invocation starts with;
* ``list``: a thread's ten newest checkpoints, one page of ``get_state_history``.

Ours is :class:`~membrane_es.integrations.langgraph_checkpoint.MembraneSaver` on a durable
LMDB store, no embedder (the checkpointer is measured, not a model); theirs are
``InMemorySaver`` (nothing durable) and, when ``langgraph-checkpoint-sqlite`` is installed
(the ``bench`` extra), ``SqliteSaver`` on a file. Each row: the p50 latency of one operation,
ours and theirs, and ours ÷ theirs.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from membrane_es import Membrane
from membrane_es.integrations.langgraph_checkpoint import MembraneSaver

ADAPTER = "langgraph checkpointer"
PER_THREAD = 100
READS = 500
SEED = 7

Put = tuple[dict[str, Any], Checkpoint, dict[str, Any], dict[str, Any]]


def workload(items: int) -> list[Put]:
    """The puts, in order: thread after thread, each checkpoint the child of the last."""
    puts: list[Put] = []
    threads = max(1, -(-items // PER_THREAD))
    for t in range(threads):
        parent: str | None = None
        messages: list[str] = []
        for step in range(min(PER_THREAD, items - t * PER_THREAD)):
            messages = [*messages, f"message {step} of thread {t}: the deploy went fine"]
            checkpoint = empty_checkpoint()
            checkpoint["id"] = f"{t:06d}-{step:06d}"
            checkpoint["channel_values"] = {"messages": messages, "counter": step // 10}
            checkpoint["channel_versions"] = {"messages": step + 1, "counter": step // 10 + 1}
            new_versions = {"messages": step + 1}
            if step % 10 == 0:
                new_versions["counter"] = step // 10 + 1
            configurable = {"thread_id": f"thread-{t}", "checkpoint_ns": ""}
            if parent is not None:
                configurable["checkpoint_id"] = parent
            metadata = {"source": "loop", "step": step}
            puts.append(({"configurable": configurable}, checkpoint, metadata, new_versions))
            parent = checkpoint["id"]
    return puts


def _p50_ms(call: Callable[[], object], times: int) -> float:
    samples = []
    for _ in range(times):
        start = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1e6


def timings(saver: BaseCheckpointSaver[Any], puts: list[Put]) -> dict[str, float]:
    """p50 milliseconds of each operation on one saver."""
    samples = []
    for config, checkpoint, metadata, new_versions in puts:
        start = time.perf_counter_ns()
        saver.put(config, checkpoint, metadata, new_versions)
        samples.append(time.perf_counter_ns() - start)
    threads = sorted({put[0]["configurable"]["thread_id"] for put in puts})
    picks = iter(random.Random(SEED).choices(threads, k=2 * READS))

    def latest() -> object:
        found = saver.get_tuple({"configurable": {"thread_id": next(picks)}})
        assert found is not None
        return found

    def page() -> object:
        return list(saver.list({"configurable": {"thread_id": next(picks)}}, limit=10))

    return {
        "put": statistics.median(samples) / 1e6,
        "get_tuple": _p50_ms(latest, READS),
        "list": _p50_ms(page, READS),
    }


@contextmanager
def _ours(directory: Path) -> Iterator[MembraneSaver]:
    with Membrane.open(directory / "membrane", embedder=None) as memory:
        yield MembraneSaver(memory)


@contextmanager
def _in_memory(directory: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    yield InMemorySaver()


@contextmanager
def _sqlite(directory: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(directory / "checkpoints.sqlite", check_same_thread=False)
    try:
        yield SqliteSaver(connection)
    finally:
        connection.close()


def baselines() -> dict[str, Callable[[Path], Any]]:
    """LangGraph's savers to compare with: the in-memory one, and SQLite when installed."""
    found: dict[str, Callable[[Path], Any]] = {"InMemorySaver": _in_memory}
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        return found
    found["SqliteSaver"] = _sqlite
    return found


def measure(items: int) -> list[dict[str, Any]]:
    """Rows ``{adapter, operation, baseline, items, ours_p50_ms, theirs_p50_ms, ratio}``."""
    puts = workload(items)
    with tempfile.TemporaryDirectory(prefix="bench-lg-checkpoint-") as directory:
        with _ours(Path(directory)) as saver:
            ours = timings(saver, puts)
        rows = []
        for name, opener in baselines().items():
            with opener(Path(directory)) as saver:
                theirs = timings(saver, puts)
            for operation in ("put", "get_tuple", "list"):
                rows.append(
                    {
                        "adapter": ADAPTER,
                        "operation": operation,
                        "baseline": name,
                        "items": items,
                        "ours_p50_ms": round(ours[operation], 4),
                        "theirs_p50_ms": round(theirs[operation], 4),
                        "ratio": round(ours[operation] / theirs[operation], 2),
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000, help="checkpoints written")
    args = parser.parse_args()
    print(f"{'operation':<10} {'baseline':<14} {'ours ms':>9} {'theirs ms':>10} {'ratio':>7}")
    for row in measure(args.items):
        print(
            f"{row['operation']:<10} {row['baseline']:<14} {row['ours_p50_ms']:>9.3f} "
            f"{row['theirs_p50_ms']:>10.3f} {row['ratio']:>6.2f}×"
        )


if __name__ == "__main__":
    main()

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
(the ``bench`` extra), ``SqliteSaver`` on a file. The savers take turns call by call, so a
busy machine weighs on all alike. Each row: the p50 latency of one operation, ours and
theirs, and ours ÷ theirs. Reads come after the writes, on a store at rest: ours then reads
a thread's listing kept from the last read (a saver keeps it while only its own writes move
the store).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from membrane_es import Membrane
from membrane_es.integrations.langgraph_checkpoint import MembraneSaver

ADAPTER = "langgraph checkpointer"
OURS = "MembraneSaver"
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


def timings(
    savers: dict[str, BaseCheckpointSaver[Any]], puts: list[Put]
) -> dict[str, dict[str, float]]:
    """p50 milliseconds of each operation on each saver. The savers take turns, call by
    call (who goes first rotating), so a machine that gets slower or faster during the run
    weighs on all of them alike."""
    names = list(savers)
    samples: dict[str, dict[str, list[int]]] = {
        name: {"put": [], "get_tuple": [], "list": []} for name in names
    }

    def timed(name: str, operation: str, call: Callable[..., object], *args: Any) -> None:
        start = time.perf_counter_ns()
        call(*args)
        samples[name][operation].append(time.perf_counter_ns() - start)

    def in_turn(i: int) -> list[str]:
        return names[i % len(names) :] + names[: i % len(names)]

    for i, (config, checkpoint, metadata, new_versions) in enumerate(puts):
        for name in in_turn(i):
            timed(name, "put", savers[name].put, config, checkpoint, metadata, new_versions)
    threads = sorted({put[0]["configurable"]["thread_id"] for put in puts})
    picks = random.Random(SEED).choices(threads, k=READS)
    for i, thread_id in enumerate(picks):
        config = {"configurable": {"thread_id": thread_id}}
        for name in in_turn(i):
            timed(name, "get_tuple", _latest, savers[name], config)
            timed(name, "list", _page, savers[name], config)
    return {
        name: {op: statistics.median(values) / 1e6 for op, values in by_op.items()}
        for name, by_op in samples.items()
    }


def _latest(saver: BaseCheckpointSaver[Any], config: RunnableConfig) -> object:
    found = saver.get_tuple(config)
    assert found is not None
    return found


def _page(saver: BaseCheckpointSaver[Any], config: RunnableConfig) -> object:
    return list(saver.list(config, limit=10))


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
    with (
        tempfile.TemporaryDirectory(prefix="bench-lg-checkpoint-") as directory,
        ExitStack() as stack,
    ):
        savers: dict[str, BaseCheckpointSaver[Any]] = {
            OURS: stack.enter_context(_ours(Path(directory)))
        }
        for name, opener in baselines().items():
            savers[name] = stack.enter_context(opener(Path(directory)))
        p50 = timings(savers, puts)
    rows = []
    for name in (name for name in p50 if name != OURS):
        for operation in ("put", "get_tuple", "list"):
            ours, theirs = p50[OURS][operation], p50[name][operation]
            rows.append(
                {
                    "adapter": ADAPTER,
                    "operation": operation,
                    "baseline": name,
                    "items": items,
                    "ours_p50_ms": round(ours, 4),
                    "theirs_p50_ms": round(theirs, 4),
                    "ratio": round(ours / theirs, 2),
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

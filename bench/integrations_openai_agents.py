"""OpenAI Agents SDK: ``MembraneSession`` beside the SDK's own ``SQLiteSession``.

One session is filled with ``items`` conversation items (user and assistant messages, added
1,000 per call), in each store; then each operation is timed on both, side by side, in one
event loop. Ours is durable: an LMDB store in a temporary directory (no embedder, as the
SQLite session has none), every write synced, each item captured as a turn. Theirs twice:
the SDK's default, SQLite in memory, and SQLite in a file beside ours (WAL, SQLite's
defaults).

* ``add_items, 1 item`` and ``add_items, 10 per call`` (per item);
* ``get_items limit=20``: the latest twenty, what a run with a limit reads;
* ``get_items (all)``: every item, what a run without one reads;
* ``pop_item``;
* ``add_items, 1 item (ours unsynced)``: on a session whose store was opened with
  ``sync=False`` (commits not waiting for the disk): what a durable write costs beyond the
  engine's own work.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents.memory import Session, SQLiteSession

from membrane_es import Membrane
from membrane_es.integrations.openai_agents_session import MembraneSession

ADAPTER = "OpenAI Agents Session"
LOAD_BATCH = 1000
REPEATS = 40
UNSYNCED = "add_items, 1 item (ours unsynced: sync=False)"


def item(i: int) -> Any:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"message {i}: about topic {i % 97}"}


async def timed(operation: Callable[[int], Awaitable[Any]], repeats: int) -> float:
    """The p50 of ``operation`` in milliseconds."""
    samples = []
    for i in range(repeats):
        start = time.perf_counter()
        await operation(i)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


async def operations(session: Session, items: int) -> dict[str, float]:
    for start in range(0, items, LOAD_BATCH):
        await session.add_items([item(i) for i in range(start, min(items, start + LOAD_BATCH))])
    return {
        "add_items, 1 item": await timed(lambda i: session.add_items([item(i)]), REPEATS),
        "add_items, 10 per call": await timed(
            lambda i: session.add_items([item(i + n) for n in range(10)]), REPEATS // 2
        )
        / 10,
        "get_items limit=20": await timed(lambda i: session.get_items(20), REPEATS),
        "get_items (all)": await timed(lambda i: session.get_items(), REPEATS // 4),
        "pop_item": await timed(lambda i: session.pop_item(), REPEATS),
    }


async def _measure(items: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as directory:
        with Membrane.open(Path(directory) / "memory", embedder=None) as memory:
            ours = await operations(MembraneSession("bench", memory), items)
        # Where a single add's time goes: the same session with commits left unsynced.
        with Membrane.open(Path(directory) / "unsynced", embedder=None, sync=False) as memory:
            unsynced = await operations(MembraneSession("bench", memory), items)
        ours[UNSYNCED] = unsynced["add_items, 1 item"]
        in_memory = SQLiteSession("bench")
        try:
            theirs = {"SQLiteSession (in memory)": await operations(in_memory, items)}
        finally:
            in_memory.close()
        in_file = SQLiteSession("bench", Path(directory) / "sessions.db")
        try:
            theirs["SQLiteSession (file)"] = await operations(in_file, items)
        finally:
            in_file.close()
    for figures in theirs.values():
        figures[UNSYNCED] = figures["add_items, 1 item"]
    return [
        {
            "adapter": ADAPTER,
            "operation": name,
            "ours_p50_ms": ours[name],
            "theirs_p50_ms": figures[name],
            "ratio": ours[name] / figures[name],
            "baseline": baseline,
        }
        for baseline, figures in theirs.items()
        for name in ours
    ]


def measure(items: int) -> list[dict[str, Any]]:
    return asyncio.run(_measure(items))

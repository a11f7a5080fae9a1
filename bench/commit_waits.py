"""Where a durable write's time goes: the engine's own work, and its wait for the disk.

``python -m bench.commit_waits [--ops 200] [--items 1000] [--write]`` times, side by side
and in turns (one call of each per round, so a disk busy with other work slows them
alike), on files in one temporary directory:

* a session ``add_items`` of one item (:class:`MembraneSession`, ``--items`` items in it
  first) on a durable store, and on one opened with ``sync=False``: their difference is
  what the durable write waits for the disk; the LMDB commit inside it is timed apart;
* a LangGraph checkpointer ``put`` (:class:`MembraneSaver`), durable;
* bare py-lmdb commits in a file filled like ours: one put in one sub-database; the three
  puts ours makes (an event, its log entry, the log's head) in three sub-databases, and in
  one; the same with ``writemap=True``; and, for reference only, with ``metasync=False``
  (the meta page left unsynced: one wait instead of two, but an operating-system crash may
  undo the last commit — not durable);
* what a write-ahead file would wait for: 600 bytes appended to a file, then ``fdatasync``;
* SQLite in WAL mode with ``synchronous=FULL`` (what ``SqliteSaver`` and ``SQLiteSession``
  wait for): one insert committed.

Pages are counted from the process's ``wchar`` (``/proc/self/io``, bytes handed to write
calls) divided by 4 kB, per commit. An LMDB commit with ``sync`` waits twice, in order: the
data pages' ``fdatasync``, then the meta page's write through an ``O_DSYNC`` descriptor;
SQLite's WAL commit and an appended file wait once. ``--write`` puts the table in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb

from bench.core import write_section
from bench.integrations_langgraph_checkpoint import workload
from membrane_es import Membrane
from membrane_es.integrations.langgraph_checkpoint import MembraneSaver
from membrane_es.integrations.openai_agents_session import MembraneSession
from membrane_es.stores.lmdb import environment

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "commit-waits"
PAGE = 4096
VALUE = 500  # bytes of one bare event: a session item's sealed event is about this size


def written_bytes() -> int:
    """Bytes this process has handed to write calls so far (0 where not Linux)."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Timed:
    """One side of the comparison: its latencies, and the pages its commits wrote."""

    def __init__(self, name: str, call: Callable[[int], Any]) -> None:
        self.name = name
        self.call = call
        self.seconds: list[float] = []
        self.pages: list[float] = []

    def run(self, i: int) -> None:
        before = written_bytes()
        start = time.perf_counter()
        self.call(i)
        self.seconds.append(time.perf_counter() - start)
        self.pages.append((written_bytes() - before) / PAGE)


class CommitClock:
    """Times each commit the engine's LMDB environments make (the work inside included)."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}
        self.label = ""
        self._original = environment.LMDBEnvironment._try_commit

    def __enter__(self) -> CommitClock:
        original, clock = self._original, self

        def timed(store: environment.LMDBEnvironment, group: list[Any]) -> Any:
            start = time.perf_counter()
            try:
                return original(store, group)
            finally:
                if clock.label:
                    clock.seconds.setdefault(clock.label, []).append(time.perf_counter() - start)

        setattr(environment.LMDBEnvironment, "_try_commit", timed)  # noqa: B010
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(environment.LMDBEnvironment, "_try_commit", self._original)  # noqa: B010


def bare_environment(path: Path, **options: Any) -> tuple[lmdb.Environment, list[Any]]:
    """An LMDB file with three sub-databases filled with 2,000 events and log entries."""
    env = lmdb.open(str(path), map_size=1 << 30, max_dbs=4, **options)
    dbs = [env.open_db(name) for name in (b"events", b"notifications", b"meta")]
    with env.begin(write=True) as txn:
        for i in range(2000):
            txn.put(event_key(i), os.urandom(VALUE), db=dbs[0])
            txn.put(i.to_bytes(8, "big"), os.urandom(60), db=dbs[1])
        txn.put(b"head", os.urandom(40), db=dbs[2])
    return env, dbs


def event_key(i: int) -> bytes:
    """A key under a random-looking originator, as a new record's event has."""
    return (i * 7919 % 1_000_003).to_bytes(8, "big") + (1 << 63).to_bytes(8, "big")


def bare_commit(
    env: lmdb.Environment, dbs: list[Any], *, puts: int = 3, spread: bool = True
) -> Callable[[int], None]:
    """One commit of one event (``puts`` 1) or of the three puts a write of ours makes (an
    event, its log entry, the log's head), in three sub-databases (``spread``) or in one."""
    events, log, meta = dbs if spread else (dbs[0], dbs[0], dbs[0])

    def commit(i: int) -> None:
        n = 10_000 + i
        with env.begin(write=True) as txn:
            txn.put(event_key(n), os.urandom(VALUE), db=events)
            if puts > 1:
                txn.put(b"\xff" + n.to_bytes(8, "big"), os.urandom(60), db=log)
                txn.put(b"head", os.urandom(40), db=meta)

    return commit


def item(i: int) -> Any:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"message {i}: about topic {i % 97}"}


def measure(ops: int, items: int) -> tuple[list[Timed], dict[str, list[float]]]:
    with tempfile.TemporaryDirectory() as directory, CommitClock() as clock:
        root = Path(directory)
        durable = Membrane.open(root / "durable", embedder=None)
        unsynced = Membrane.open(root / "unsynced", embedder=None, sync=False)
        saved = Membrane.open(root / "saver", embedder=None)
        try:
            sessions = {
                "durable": MembraneSession("bench", durable),
                "unsynced": MembraneSession("bench", unsynced),
            }
            for session in sessions.values():
                asyncio.run(session.add_items([item(i) for i in range(items)]))
            saver = MembraneSaver(saved)
            save: Callable[..., Any] = saver.put  # the workload's dicts are LangGraph's
            puts = workload(2 * ops + 20)
            for config, checkpoint, metadata, versions in puts[:20]:
                save(config, checkpoint, metadata, versions)

            def add(name: str) -> Callable[[int], None]:
                def call(i: int) -> None:
                    clock.label = f"session add_items, 1 item ({name})"
                    sessions[name]._add([f'{{"role": "user", "content": "turn {i}"}}'])
                    clock.label = ""

                return call

            def put(i: int) -> None:
                config, checkpoint, metadata, versions = puts[20 + i]
                clock.label = "checkpointer put"
                save(config, checkpoint, metadata, versions)
                clock.label = ""

            plain = bare_environment(root / "bare")
            one_db = bare_environment(root / "one-db")
            mapped = bare_environment(root / "writemap", writemap=True)
            metasync_off = bare_environment(root / "metasync-off", metasync=False)
            appended = os.open(root / "appended", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            sqlite = sqlite3.connect(root / "sqlite.db", isolation_level=None)
            sqlite.execute("PRAGMA journal_mode=WAL")
            sqlite.execute("PRAGMA synchronous=FULL")
            sqlite.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")

            def append(i: int) -> None:
                os.write(appended, os.urandom(VALUE + 100))
                os.fdatasync(appended)

            def insert(i: int) -> None:
                sqlite.execute("BEGIN")
                sqlite.execute("INSERT INTO t (v) VALUES (?)", (os.urandom(VALUE),))
                sqlite.execute("COMMIT")

            sides = [
                Timed("ours: session add_items, 1 item, durable", add("durable")),
                Timed("ours: session add_items, 1 item, sync=False", add("unsynced")),
                Timed("ours: checkpointer put, durable", put),
                Timed("bare LMDB: 1 put, 1 sub-database", bare_commit(*plain, puts=1)),
                Timed("bare LMDB: 3 puts in 3 sub-databases (as ours)", bare_commit(*plain)),
                Timed("bare LMDB: 3 puts in 1 sub-database", bare_commit(*one_db, spread=False)),
                Timed("bare LMDB: 3 puts in 3, writemap=True", bare_commit(*mapped)),
                Timed(
                    "bare LMDB: 3 puts in 3, metasync=False (not durable)",
                    bare_commit(*metasync_off),
                ),
                Timed("append 600 B + fdatasync (a write-ahead file)", append),
                Timed("SQLite WAL, synchronous=FULL: 1 insert", insert),
            ]
            for i in range(ops):
                for side in sides:
                    side.run(i)
            sqlite.close()
            os.close(appended)
            for env, _ in (plain, one_db, mapped, metasync_off):
                env.close()
        finally:
            for memory in (durable, unsynced, saved):
                memory.close()
        return sides, clock.seconds


def table(sides: list[Timed], commits: dict[str, list[float]]) -> str:
    bare = statistics.median(sides[3].seconds)
    lines = [
        "| operation | p50 (ms) | p25–p75 (ms) | pages written per call | ÷ bare 1-put commit |",
        "|---|---:|---:|---:|---:|",
    ]
    for side in sides:
        ordered = sorted(side.seconds)
        p50 = statistics.median(ordered)
        quarter = len(ordered) // 4
        lines.append(
            f"| {side.name} | {p50 * 1e3:.3f} | {ordered[quarter] * 1e3:.3f}–"
            f"{ordered[-quarter - 1] * 1e3:.3f} | {statistics.median(side.pages):.1f} "
            f"| {p50 / bare:.2f}× |"
        )
    for label, seconds in sorted(commits.items()):
        p50 = statistics.median(seconds)
        lines.append(
            f"| of which its LMDB commit: {label} | {p50 * 1e3:.3f} | | | {p50 / bare:.2f}× |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=200, help="calls of each, in turns")
    parser.add_argument("--items", type=int, default=1000, help="items in each session first")
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = parser.parse_args()
    if args.ops < 4:
        parser.error("--ops must be at least 4")
    sides, commits = measure(args.ops, args.items)
    text = table(sides, commits)
    print(text)
    if args.write:
        write_section(DOCS, SECTION, f"{args.ops} calls of each, in turns.\n\n{text}")


if __name__ == "__main__":
    main()

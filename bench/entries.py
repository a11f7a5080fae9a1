"""The entries API: search and browse at N entries against a bare SQLite FTS5 table, and the
cost of HTTP over an in-process call, measured side by side in one run.

Run: ``python -m bench.entries [--entries 100000] [--queries 300] [--write]``; with
``--restart``, only the first read after a restart (its own section).

* **Floor**: one FTS5 table holding the same title, content, tags and source text with the
  same tokenizer, queried with the same MATCH expression and ``ORDER BY bm25(t, 10, 4, 8, 2)
  LIMIT 50``: what the search costs with nothing around it.
* **Search**: ``list_entries(EntryQuery(q=…))`` in process: the same BM25 with boosts, intent,
  the validity and trust filters, and the entries built (the view caught up first).
* **Browse**: newest 50, and the same filtered by a type.
* **HTTP**: the same search through the server on loopback (one keep-alive client).
* **Restart** (``--restart``): a durable (LMDB) store of N entries is opened and read once
  with a checkpoint that holds no entries view (the log replayed into it: what every restart
  paid before the view was checkpointed), then once more, resuming the view from the
  checkpoint its first close wrote: seconds from open to the first answer, side by side.

Entries are synthetic: words drawn from a Zipf-like vocabulary, so queries of 1 to 4 words
match from a handful to thousands of entries.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.core import write_section
from membrane_es import Membrane
from membrane_es.access.keys import KeyRing
from membrane_es.commands.entries import entry_record
from membrane_es.http_api import HttpServer, create_app
from membrane_es.projections.entries import TOKENIZER
from membrane_es.queries.entries import FIELD_WEIGHTS, EntryQuery, match_expression
from membrane_es.schema.entries import ENTRY_TYPES, NewEntry
from membrane_es.serving.tenants import Tenants

VOCABULARY = 20_000
BATCH = 2_000
SEED = 7


def _words(rng: random.Random, count: int) -> str:
    # rank r drawn with weight ~1/r: a few very common words, a long tail
    return " ".join(f"w{int(VOCABULARY ** rng.random())}" for _ in range(count))


def synthetic_entries(count: int) -> list[NewEntry]:
    rng = random.Random(SEED)
    return [
        NewEntry(
            type=ENTRY_TYPES[i % len(ENTRY_TYPES)],  # type: ignore[arg-type]
            title=_words(rng, rng.randint(3, 6)),
            content=_words(rng, rng.randint(20, 40)),
            source=f"agent-{i % 7}",
            tags=[_words(rng, 1) for _ in range(rng.randint(0, 3))],
            conversation_id=None if i % 3 else i % 50 + 1,
        )
        for i in range(count)
    ]


def queries(count: int) -> list[str]:
    rng = random.Random(SEED + 1)
    return [_words(rng, rng.randint(1, 4)) for _ in range(count)]


def p50_ms(call: Callable[[str], object], inputs: list[str]) -> float:
    return side_by_side([call], inputs)[0]


def side_by_side(calls: list[Callable[[str], object]], inputs: list[str]) -> list[float]:
    """The p50 (ms) of each call over the inputs, the calls taking turns on each input (so a
    busy machine slows them alike and their ratio holds)."""
    for text in inputs[:20]:  # warm caches
        for call in calls:
            call(text)
    times: list[list[float]] = [[] for _ in calls]
    for text in inputs:
        for call, spent in zip(calls, times, strict=True):
            start = time.perf_counter()
            call(text)
            spent.append(time.perf_counter() - start)
    return [statistics.median(spent) * 1000 for spent in times]


def floor_table(entries: list[NewEntry]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute(
        f'CREATE VIRTUAL TABLE t USING fts5(title, content, tags, source, tokenize="{TOKENIZER}")'
    )
    db.executemany(
        "INSERT INTO t(title, content, tags, source) VALUES (?, ?, ?, ?)",
        ((e.title, e.content, " ".join(e.tags), e.source) for e in entries),
    )
    return db


def restart_first_read(entries: list[NewEntry]) -> tuple[float, float]:
    """Seconds from opening a durable store to its first entries answer: replaying the log
    into the entries view, then resuming it from the checkpoint."""
    with tempfile.TemporaryDirectory() as scratch:
        store = Path(scratch) / "store"
        with Membrane.open(store, sync=False, embedder=None) as memory:
            for start in range(0, len(entries), BATCH):
                with memory.batch():
                    for entry in entries[start : start + BATCH]:
                        memory.create_record(entry_record(entry), rationale="bench")
        # Closed: the views are checkpointed, without an entries view (none was read).
        seconds = []
        for _ in range(2):  # the first close checkpoints the entries view it built
            started = time.perf_counter()
            with Membrane.open(store, sync=False, embedder=None) as memory:
                memory.list_entries(EntryQuery(limit=1))
                seconds.append(time.perf_counter() - started)
    return seconds[0], seconds[1]


def restart_report(count: int) -> str:
    replayed, resumed = restart_first_read(synthetic_entries(count))
    return "\n".join(
        [
            "## Entries API: the first read after a restart",
            "",
            f"{count:,} synthetic entries in a durable (LMDB) store; seconds from opening it to "
            "the first entries answer, measured in one run "
            f"(`python -m bench.entries --restart --entries {count} --write`).",
            "",
            "| open + first entries read | seconds | ratio |",
            "| --- | --- | --- |",
            f"| the entries view replayed from the log (no checkpoint of it) | {replayed:.2f} s "
            "| 1.00× |",
            f"| the entries view resumed from the checkpoint | {resumed:.2f} s "
            f"| {resumed / replayed:.2f}× |",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument(
        "--restart", action="store_true", help="only the first read after a restart"
    )
    args = parser.parse_args()
    if args.restart:
        report = restart_report(args.entries)
        print(report)
        if args.write:
            write_section(Path("docs/benchmarks.md"), "bench.entries_restart", report)
        return

    entries = synthetic_entries(args.entries)
    texts = queries(args.queries)
    memory = Membrane.in_memory(embedder=None)
    for start in range(0, len(entries), BATCH):
        with memory.batch():
            for entry in entries[start : start + BATCH]:
                memory.create_record(entry_record(entry), rationale="bench")
    started = time.perf_counter()
    memory.list_entries(EntryQuery(limit=1))  # the entries view follows the log once
    follow_s = time.perf_counter() - started
    floor = floor_table(entries)
    weights = ", ".join(str(w) for w in FIELD_WEIGHTS)
    bare = f"SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t, {weights}) LIMIT 50"

    def floor_search(text: str) -> object:
        return floor.execute(bare, (match_expression(text),)).fetchall()

    def search(text: str) -> object:
        return memory.list_entries(EntryQuery(q=text, limit=50))

    floor_ms, search_ms = side_by_side([floor_search, search], texts)
    kinds = [ENTRY_TYPES[i % len(ENTRY_TYPES)] for i in range(len(texts))]
    browse_ms = p50_ms(lambda _: memory.list_entries(EntryQuery(limit=50)), texts)
    typed_ms = p50_ms(
        lambda text: memory.list_entries(
            EntryQuery(types=(kinds[len(text) % len(kinds)],), limit=50)
        ),
        texts,
    )

    tenants = Tenants(":memory:", lambda tenant, path: memory)
    with HttpServer(create_app(tenants, KeyRing()), "127.0.0.1:0") as server:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}") as client:

            def over_http(text: str) -> object:
                response = client.get("/v1/memory/entries", params={"q": text, "limit": 50})
                response.raise_for_status()
                return response.content

            in_process_ms, http_ms = side_by_side([search, over_http], texts)
    matched = statistics.median(
        len(floor.execute("SELECT rowid FROM t WHERE t MATCH ?", (match_expression(t),)).fetchall())
        for t in texts[:50]
    )
    memory.close()

    lines = [
        "## Entries API: search, browse, HTTP",
        "",
        f"{args.entries:,} synthetic entries (in-memory log), {args.queries} queries of 1–4 "
        f"words (median {matched:,.0f} matching entries), p50 latency, measured in one run "
        "(`python -m bench.entries --write`).",
        "",
        "| measurement | p50 | ratio |",
        "| --- | --- | --- |",
        f"| floor: bare FTS5 table, same text, weights and MATCH | {floor_ms:.2f} ms | 1.00× |",
        f"| search (`q`), in process | {search_ms:.2f} ms "
        f"| {search_ms / floor_ms:.2f}× the floor |",
        f"| browse, newest 50 | {browse_ms:.2f} ms | |",
        f"| browse, one type | {typed_ms:.2f} ms | |",
        f"| search over HTTP (loopback, keep-alive) | {http_ms:.2f} ms "
        f"| {http_ms / in_process_ms:.2f}× in process (measured beside it) |",
        "",
        f"Following the log into the entries view the first time: {follow_s:.1f} s "
        f"for {args.entries:,} entries. Target: search ≤ 1.5× the floor.",
    ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        write_section(Path("docs/benchmarks.md"), "bench.entries", report)


if __name__ == "__main__":
    main()

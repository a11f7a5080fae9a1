"""The framework adapters beside each framework's own implementation, in one run.

``python -m bench.integrations [--items 10000] [--write]`` runs every adapter's benchmark
module (each exposes ``measure(items) -> list[dict]``, one row per operation: ``adapter``,
``operation``, ``ours_p50_ms``, ``theirs_p50_ms``, ``ratio``, and ``baseline``, what theirs
is) and prints one table: our adapter's p50 latency, durable on LMDB in a temporary
directory, beside the framework's in-memory or SQLite implementation doing the same, and
their ratio. A module whose framework is not installed is skipped with a note. Targets: a
write at most 2× theirs, a semantic search at most 1.5× at equal embedder. ``--write``
puts the table in docs/benchmarks.md. ``--shared-rounds N`` (N ≥ 1) also runs
:mod:`bench.integrations_shared` — adapters sharing an engine with another writer, and the
durable stores they replace — in N rounds at 1,000 items and at ``--items``, each ratio with
its spread.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

from bench import integrations_shared
from bench.core import write_section

MODULES = (
    "bench.integrations_langgraph_store",
    "bench.integrations_langgraph_checkpoint",
    "bench.integrations_langchain",
    "bench.integrations_openai_agents",
)
DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "integrations"
SHARED_SECTION = "integrations-shared"


def gather(items: int, modules: tuple[str, ...] = MODULES) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            print(f"skipped {name}: {error}", flush=True)
            continue
        print(f"running {name} ({items} items)…", flush=True)
        rows.extend(module.measure(items))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| adapter | operation | ours p50 (ms) | theirs p50 (ms) | theirs | ratio |",
        "|---|---|---:|---:|---|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['adapter']} | {row['operation']} | {row['ours_p50_ms']:.3f} "
            f"| {row['theirs_p50_ms']:.3f} | {row.get('baseline', '')} | {row['ratio']:.2f}× |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=10_000, help="items in each store")
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    parser.add_argument(
        "--shared-rounds", type=int, default=0, help="rounds of bench.integrations_shared (0: none)"
    )
    args = parser.parse_args()
    rows = gather(args.items)
    text = table(rows)
    print(text)
    if args.write:
        write_section(DOCS, SECTION, f"{args.items:,} items in each store.\n\n{text}")
    if args.shared_rounds > 0:
        sizes = sorted({1_000, args.items})
        shared = integrations_shared.table(integrations_shared.measure(sizes, args.shared_rounds))
        print(shared)
        if args.write:
            rounds = f"{args.shared_rounds} rounds; ratio: median, spread: lowest–highest round."
            write_section(DOCS, SHARED_SECTION, f"{rounds}\n\n{shared}")


if __name__ == "__main__":
    main()

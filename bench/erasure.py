"""Benchmark of per-record content keys: what sealing each record's content costs, and forget.

Every figure is a ratio of the store with per-record keys against the same store with sealing
switched off (content stored as before), measured side by side in one run. Run:
``python -m bench.erasure [--records N] [--write]``.

(a) creating records, one write per record and in batches (commits unsynced: what sealing
    costs, not what the disk does);
(b) reads by id: warm (the record in the engine's cache: nothing decoded, the usual case) and
    cold (cache emptied: every read decodes the record's events, opens its box and looks its
    key up — from the key store file, then from the key cache);
(c) rebuilding the views from the log;
(d) one ``forget`` against one ``retract`` on a durable store (both one synced write; forget
    also destroys the key, synced, empties the key store's log and merges the text index
    anew).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from bench.core import BATCH, _record, write_section
from membrane_es import Membrane
from membrane_es.projections.read_model import ReadModel


@contextmanager
def _stores() -> Iterator[dict[str, Membrane]]:
    """A store with per-record keys and one with sealing switched off, open side by side."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-erasure-") as sealed_dir,
        tempfile.TemporaryDirectory(prefix="bench-erasure-") as plain_dir,
    ):
        # Unsynced commits: a synced one costs milliseconds that vary more, on a shared disk,
        # than everything measured here (sealing adds one sync per 4,096 records made).
        stores = {
            "sealed": Membrane.open(sealed_dir, sync=False, embedder=None),
            "plain": Membrane.open(plain_dir, sync=False, embedder=None),
        }
        stores["plain"].application.mapper.sealer = None  # type: ignore[attr-defined]
        try:
            yield stores
        finally:
            for memory in stores.values():
                memory.close()


def _create(memory: Membrane, first: int, count: int, batch: int) -> tuple[float, list[str]]:
    ids: list[str] = []
    start = time.perf_counter()
    if batch == 1:
        ids = [memory.create_record(_record(i)).id for i in range(first, first + count)]
    else:
        for chunk in range(first, first + count, batch):
            with memory.batch():
                ids += [memory.create_record(_record(i)).id for i in range(chunk, chunk + batch)]
    return count / (time.perf_counter() - start), ids


def _seconds(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


FORGETS = 40  # forgets and retracts measured, alternating
ROUNDS = 9  # each measurement alternates between the two stores this many times; best kept


def _in_turn(stores: dict[str, Membrane], round_: int) -> list[tuple[str, Membrane]]:
    """Both stores, the first going first in even rounds and second in odd ones."""
    items = list(stores.items())
    return items if round_ % 2 == 0 else items[::-1]


def measure(records: int, ops: int) -> dict[str, dict[str, float]]:
    """Figures per store (``sealed``, ``plain``), each the best of its rounds."""
    figures: dict[str, dict[str, list[float]]] = {"sealed": {}, "plain": {}}

    def note(kind: str, name: str, value: float) -> None:
        figures[kind].setdefault(name, []).append(value)

    with _stores() as stores:
        ids: dict[str, list[str]] = {kind: [] for kind in stores}
        per_round = records // ROUNDS
        for round_ in range(ROUNDS):
            for kind, memory in _in_turn(stores, round_):
                first = round_ * per_round
                rate, made = _create(memory, first, per_round // 8, 1)
                note(kind, "create 1", rate)
                rate, made_batched = _create(memory, first + per_round // 8, per_round, BATCH)
                note(kind, "create batch", rate)
                ids[kind] += made + made_batched
        for round_ in range(ROUNDS):
            for kind, memory in _in_turn(stores, round_):
                app = memory.application
                picks = ids[kind][:ops]

                def cold_reads(memory: Membrane = memory, picks: list[str] = picks) -> None:
                    for record_id in picks:
                        memory.application.cache.clear()
                        memory.retrieve_by_id(record_id)

                def warm_reads(memory: Membrane = memory, picks: list[str] = picks) -> None:
                    for record_id in picks:
                        memory.retrieve_by_id(record_id)

                warm_reads()
                note(kind, "warm read", _seconds(warm_reads) / ops)
                app.keys._cache.clear()  # the first pass fetches keys from the file
                note(kind, "cold read, key from file", _seconds(cold_reads) / ops)
                note(kind, "cold read, key cached", _seconds(cold_reads) / ops)
                note(kind, "rebuild", _seconds(partial(ReadModel.rebuild, app)))
    # forget against retract on a durable store (both one synced write, as a user has them)
    with tempfile.TemporaryDirectory(prefix="bench-erasure-") as directory:
        with Membrane.open(directory, embedder=None) as durable:
            with durable.batch():
                made = [durable.create_record(_record(i)).id for i in range(2 * FORGETS)]
            forget: list[float] = []
            retract: list[float] = []
            for erased, withdrawn in zip(made[::2], made[1::2], strict=True):
                forget.append(_seconds(partial(durable.forget, erased, "bench", "erasure")))
                retract.append(_seconds(partial(durable.retract, withdrawn, "bench", "withdrawn")))
    note("sealed", "forget", statistics.median(forget))
    note("sealed", "retract", statistics.median(retract))
    best = {kind: {name: min(v) for name, v in named.items()} for kind, named in figures.items()}
    for kind in best:  # rates: the best is the highest
        for name in ("create 1", "create batch"):
            best[kind][name] = max(figures[kind][name])
    return best


def len_records(records: int) -> int:
    per_round = records // ROUNDS
    return ROUNDS * (per_round + per_round // 8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=4500)
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = parser.parse_args()

    figures = measure(args.records, args.ops)
    sealed, plain = figures["sealed"], figures["plain"]
    rows = [
        (
            "create, one write per record",
            f"{sealed['create 1']:,.0f} vs {plain['create 1']:,.0f} records/s",
            f"{sealed['create 1'] / plain['create 1']:.2f}×",
        ),
        (
            f"create, batches of {BATCH}",
            f"{sealed['create batch']:,.0f} vs {plain['create batch']:,.0f} records/s",
            f"{sealed['create batch'] / plain['create batch']:.2f}×",
        ),
    ]
    for name in ("warm read", "cold read, key from file", "cold read, key cached"):
        rows.append(
            (
                f"{name} (time per read)",
                f"{sealed[name] * 1e6:.0f} µs vs {plain[name] * 1e6:.0f} µs",
                f"{sealed[name] / plain[name]:.2f}×",
            )
        )
    rows.append(
        (
            f"rebuild the views from {len_records(args.records):,} records",
            f"{sealed['rebuild'] * 1e3:.0f} ms vs {plain['rebuild'] * 1e3:.0f} ms",
            f"{sealed['rebuild'] / plain['rebuild']:.2f}×",
        )
    )
    rows.append(
        (
            "one forget ÷ one retract (p50, durable store)",
            f"{sealed['forget'] * 1e3:.1f} ms vs {sealed['retract'] * 1e3:.1f} ms",
            f"{sealed['forget'] / sealed['retract']:.2f}×",
        )
    )
    lines = [
        "## Erasure: the cost of per-record content keys",
        "",
        f"{len_records(args.records):,} records, one by one and in batches; {args.ops:,} cold "
        "reads. Sealed (per-record keys) against the same store with sealing off, open side "
        f"by side; each figure the best of {ROUNDS} alternating rounds.",
        "",
        "| measurement | sealed vs plain | ratio |",
        "| --- | --- | --- |",
        *(f"| {name} | {value} | {ratio} |" for name, value, ratio in rows),
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(Path("docs/benchmarks.md"), "bench.erasure", text)


if __name__ == "__main__":
    main()

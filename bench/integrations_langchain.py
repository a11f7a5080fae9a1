"""LangChain: ``MembraneVectorStore`` beside LangChain's own ``InMemoryVectorStore``.

Both get the same embedder (``DeterministicFakeEmbedding``, 384 dimensions: a hash of the text,
so the embedder costs next to nothing and the stores are what is timed) and the same
``items`` documents, added in calls of 1,000; then each operation is timed on both, side by
side. Ours is durable: an LMDB store in a temporary directory, every write synced to disk;
theirs lives in the process.

* ``add``: one new document (``add_texts`` of one text with its id);
* ``add, 100 per call``: a hundred new documents in one ``add_texts`` (per document);
* ``revise``: one document re-added under its id with new text (ours: a revision, the old
  record retracted and kept; theirs: overwritten);
* ``get_by_ids``: one document by id;
* ``similarity_search k=4``: the four nearest documents to a query;
* ``add (ours unsynced)``: ``add`` again, on a store opened with ``sync=False`` (commits not
  waiting for the disk): what a durable write costs beyond the engine's own work.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from membrane_es import Membrane
from membrane_es.integrations.langchain_vectorstore import LangChainEmbedder, MembraneVectorStore

ADAPTER = "LangChain VectorStore"
DIMENSIONS = 384
LOAD_BATCH = 1000
REPEATS = 60
SEARCH_REPEATS = 15  # theirs scans every document in Python: slow at 10,000
TOPICS = 97
UNSYNCED = "add (ours unsynced: sync=False)"


def text(i: int) -> str:
    return f"document {i} about topic {i % TOPICS}"


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed(operation: Callable[[int], Any], repeats: int) -> list[float]:
    samples = []
    for i in range(repeats):
        start = time.perf_counter()
        operation(i)
        samples.append(time.perf_counter() - start)
    return samples


def load(store: VectorStore, items: int) -> None:
    for start in range(0, items, LOAD_BATCH):
        numbers = range(start, min(items, start + LOAD_BATCH))
        store.add_texts([text(i) for i in numbers], ids=[str(i) for i in numbers])


def operations(store: VectorStore, items: int) -> dict[str, tuple[float, int]]:
    """Each operation's p50 in milliseconds (per document for the batched add)."""

    def add_many(i: int) -> None:
        store.add_texts(
            [f"batched {i}.{n}" for n in range(100)], ids=[f"b{i}.{n}" for n in range(100)]
        )

    runs: dict[str, tuple[Callable[[int], Any], int, int]] = {
        "add": (lambda i: store.add_texts([f"new {i}"], ids=[f"n{i}"]), REPEATS, 1),
        "add, 100 per call": (add_many, REPEATS // 4, 100),
        "revise": (lambda i: store.add_texts([f"revised {i}"], ids=[str(i)]), REPEATS, 1),
        "get_by_ids": (lambda i: store.get_by_ids([str((i * 7919) % items)]), REPEATS, 1),
        "similarity_search k=4": (
            lambda i: store.similarity_search(f"topic {i % TOPICS}", k=4),
            SEARCH_REPEATS,
            1,
        ),
    }
    return {
        name: (p50_ms(timed(operation, repeats)) / per, repeats)
        for name, (operation, repeats, per) in runs.items()
    }


def measure(items: int) -> list[dict[str, Any]]:
    embedding = DeterministicFakeEmbedding(size=DIMENSIONS)
    with tempfile.TemporaryDirectory() as directory:
        with MembraneVectorStore.open(Path(directory) / "memory", embedding) as ours:
            load(ours, items)
            our_figures = operations(ours, items)
        # Where a single add's time goes: the same store with commits left unsynced.
        with Membrane.open(
            Path(directory) / "unsynced", embedder=LangChainEmbedder(embedding), sync=False
        ) as memory:
            unsynced = MembraneVectorStore(memory, embedding)
            load(unsynced, items)
            adds = [lambda i: unsynced.add_texts([f"new {i}"], ids=[f"n{i}"])]
            our_figures[UNSYNCED] = (p50_ms(timed(adds[0], REPEATS)), REPEATS)
    theirs = InMemoryVectorStore(embedding)
    load(theirs, items)
    their_figures = operations(theirs, items)
    their_figures[UNSYNCED] = their_figures["add"]
    return [
        {
            "adapter": ADAPTER,
            "operation": name,
            "ours_p50_ms": our_figures[name][0],
            "theirs_p50_ms": their_figures[name][0],
            "ratio": our_figures[name][0] / their_figures[name][0],
            "baseline": "InMemoryVectorStore",
        }
        for name in our_figures
    ]

"""What relevance feedback costs a read: searched twice (as shipped) against once, side by side.

Run: ``python -m bench.feedback [--sizes 5000,20000] [--queries 60] [--rounds 3]``.

Per size, a fresh in-memory store of semantic records with clustered random unit vectors
(200 clusters, 384 dimensions) and a word of their cluster's; queries with a descriptor and a
vector near a cluster's centre, ``limit=10``. Each query is read with relevance feedback
(:mod:`membrane_es.queries.feedback`) and without it (the engine's feedback step switched off
for the read), alternately, ``--rounds`` times; the figures are medians of each. Below 16,384
vectors a read is exact and searches twice; from there on it shortlists by sign codes and
searches once, so the two columns should meet.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from membrane_es import Membrane
from membrane_es.queries import retrieve
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext

DIMENSIONS = 384
CLUSTERS = 200
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)


@contextmanager
def searched_once() -> Iterator[None]:
    """Reads in this block skip the feedback step (the first search is the answer)."""
    original = retrieve._fed_back
    retrieve._fed_back = lambda snapshot, plan: False
    try:
        yield
    finally:
        retrieve._fed_back = original


def store(size: int, rng: np.random.Generator) -> tuple[Membrane, np.ndarray]:
    centres = rng.normal(size=(CLUSTERS, DIMENSIONS))
    memory = Membrane.in_memory(embedder=None)
    with memory.batch():
        for i in range(size):
            cluster = i % CLUSTERS
            vector = centres[cluster] + 0.5 * rng.normal(size=DIMENSIONS)
            memory.create_record(
                {
                    "type": "semantic",
                    "sensitivity": "low",
                    "payload": {
                        "kind": "semantic",
                        "subject": f"s{cluster}",
                        "predicate": WORDS[cluster % len(WORDS)],
                        "object": f"thing {i}",
                    },
                },
                embedding=(vector / np.linalg.norm(vector)).tolist(),
            )
    return memory, centres


def measure(size: int, queries: int, rounds: int) -> tuple[float, float]:
    """p50 milliseconds of a read searched twice and of one searched once."""
    rng = np.random.default_rng(size)
    memory, centres = store(size, rng)
    asked = []
    for j in range(queries):
        cluster = j % CLUSTERS
        vector = centres[cluster] + 0.5 * rng.normal(size=DIMENSIONS)
        descriptor = f"what is {WORDS[cluster % len(WORDS)]} of s{cluster}"
        asked.append((descriptor, vector / np.linalg.norm(vector)))
    twice: list[float] = []
    once: list[float] = []

    def read(descriptor: str, vector: np.ndarray) -> float:
        started = time.perf_counter()
        memory.retrieve(descriptor, trust=TRUST, limit=10, query_embedding=vector.tolist())
        return time.perf_counter() - started

    try:
        for descriptor, vector in asked[:5]:  # warm the caches both ways
            read(descriptor, vector)
        for _ in range(rounds):
            for descriptor, vector in asked:
                twice.append(read(descriptor, vector))
                with searched_once():
                    once.append(read(descriptor, vector))
    finally:
        memory.close()
    return 1000 * statistics.median(twice), 1000 * statistics.median(once)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5000,20000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("| records | searched twice (p50) | searched once (p50) | ratio |")
    print("| --- | --- | --- | --- |")
    for size in (int(s) for s in args.sizes.split(",")):
        twice, once = measure(size, args.queries, args.rounds)
        print(f"| {size:,} | {twice:.2f} ms | {once:.2f} ms | {twice / once:.2f}× |")


if __name__ == "__main__":
    main()

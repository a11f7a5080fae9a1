"""What the sign-code shortlist keeps of the exact top 10, on the embedding index alone.

The read side's vector search (``membrane_es.queries.vectors``) shortlists a ranked read's
rows by sign code and keeps the shortlist only where the codes vouch for it, else widens it or
scores every vector. This measures that step by itself, without building a store through the
API (so it reaches 1M records in minutes): N vectors go straight into an ``EmbeddingIndex``
(one scope; codes kept), and for each query the rows the read would score are compared with
numpy's exact top 10. Run: ``python -m bench.shortlist [--sizes 100000,1000000] [--write]``.

Two kinds of data: **clustered** (the retrieval benchmark's corpus: clusters of ~1,000, queries
near a cluster's centre) and **unclustered** (vectors and queries drawn evenly over the
sphere). For each: how often the shortlist was kept as it was, widened, or given up for every
vector (exact), the share of the exact top 10 among the rows scored, and the p50 time of the
code scan and shortlist against numpy's exact ``M @ q`` + ``argpartition``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench.core import write_section
from membrane_es.projections.embeddings import EmbeddingIndex
from membrane_es.queries import vectors

DIMENSIONS = 384
TOP = 10
CLUSTER = 1000
SECTION = "bench.shortlist"

Matrix = npt.NDArray[np.float32]


def _normalised(matrix: Matrix) -> Matrix:
    out: Matrix = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)
    return out


def corpus(n: int, kind: str, queries: int, seed: int) -> tuple[Matrix, Matrix]:
    rng = np.random.default_rng(seed)
    matrix = np.empty((n, DIMENSIONS), dtype=np.float32)
    centres = rng.standard_normal((max(10, n // CLUSTER), DIMENSIONS), dtype=np.float32)
    for first in range(0, n, 100_000):
        last = min(n, first + 100_000)
        raw = rng.standard_normal((last - first, DIMENSIONS), dtype=np.float32)
        if kind == "clustered":
            raw += centres[rng.integers(0, len(centres), size=last - first)]
        matrix[first:last] = _normalised(raw)
    raw = rng.standard_normal((queries, DIMENSIONS), dtype=np.float32)
    if kind == "clustered":
        raw += centres[rng.integers(0, len(centres), size=queries)]
    return matrix, _normalised(raw)


@dataclass
class Outcome:
    n: int
    kind: str
    kept: int
    widened: int
    exact: int
    recall: float
    shortlist_p50: float
    numpy_p50: float


def measure(n: int, kind: str, queries: int, seed: int) -> Outcome:
    matrix, query_vectors = corpus(n, kind, queries, seed)
    index = EmbeddingIndex()
    for first in range(0, n, 50_000):
        batch = range(first, min(n, first + 50_000))
        index.add_many([(row, 0, "m", matrix[row].tobytes()) for row in batch])
    for block in index.blocks.values():
        block.keep_codes()
    index.coded = True
    admitted = partial(vectors.held, np.arange(n, dtype=np.int64))
    scope_of = np.zeros(n, dtype=np.int64)  # one block: scope 0
    kept = widened = exact = 0
    overlaps: list[float] = []
    shortlist_times: list[float] = []
    numpy_times: list[float] = []
    wanted = max(vectors.SHORTLIST_PER_RESULT * TOP, n // vectors.SHORTLIST_SHARE)
    for query in query_vectors:
        start = time.perf_counter()
        scan = index.scan_codes(query, None, n)
        found = vectors.nearest(index, query, scan, admitted, TOP, scope_of)
        shortlist_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        scores = matrix @ query
        top = np.argpartition(-scores, TOP)[:TOP]
        numpy_times.append(time.perf_counter() - start)
        if found is None:
            exact += 1
            overlaps.append(1.0)  # the read scores every vector
            continue
        if len(found.rows) > wanted:
            widened += 1
        else:
            kept += 1
        rows = found.rows
        best = rows[np.argsort(-found.cosine, kind="stable")[:TOP]]
        overlaps.append(len(set(best.tolist()) & set(top.tolist())) / TOP)
    return Outcome(
        n,
        kind,
        kept,
        widened,
        exact,
        statistics.mean(overlaps),
        statistics.median(shortlist_times),
        statistics.median(numpy_times),
    )


def report(outcomes: list[Outcome], queries: int) -> str:
    lines = [
        "## Sign-code shortlist: what it keeps of the exact top 10",
        "",
        f"The vector step alone, on an `EmbeddingIndex` of N {DIMENSIONS}-dimension vectors "
        f"(one scope), {queries} top-{TOP} queries per row; the read's rows scored against "
        "numpy's exact top 10. `python -m bench.shortlist --write`.",
        "",
        "| size | data | shortlist kept | widened | every vector scored | exact top 10 kept "
        "| p50 codes + shortlist | p50 numpy exact scan |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        total = o.kept + o.widened + o.exact
        lines.append(
            f"| {o.n:,} | {o.kind} | {o.kept / total:.0%} | {o.widened / total:.0%} | "
            f"{o.exact / total:.0%} | {o.recall:.1%} | {o.shortlist_p50 * 1e3:.2f} ms | "
            f"{o.numpy_p50 * 1e3:.2f} ms |"
        )
    lines += [
        "",
        "Where every vector is scored the read is exact (100 % of the top 10) and costs an exact "
        "scan: the codes cannot tell the nearest vectors from the rest. 'p50 codes + "
        "shortlist' is the scan of every code plus the exact scores of the rows kept (and, "
        "when the read gives the shortlist up, of nothing yet: the exact scan follows).",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = parser.parse_args()
    outcomes = [
        measure(int(n), kind, args.queries, args.seed)
        for n in args.sizes.split(",")
        for kind in ("clustered", "unclustered")
    ]
    text = report(outcomes, args.queries)
    print(text)
    if args.write:
        write_section(Path(__file__).resolve().parent.parent / "docs/benchmarks.md", SECTION, text)


if __name__ == "__main__":
    main()

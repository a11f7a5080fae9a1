"""Side by side with the embedded vector stores users pick: Chroma and LanceDB.

Every figure is measured in one run on one machine, each store in a fresh process of its own
(so peak resident memory is that store's), on the same records and the same queries. Run:
``python -m bench.peers [--sizes 100000,1000000] [--queries N] [--write]`` (needs the
``bench`` extra: ``pip install -e '.[bench]'``).

For each size N and each kind of data — **clustered** (the retrieval benchmark's corpus:
clusters of ~1,000 vectors, queries near a cluster's centre) and **unclustered** (vectors and
queries spread evenly over the sphere: a query's nearest neighbours are barely nearer than
the rest) — N records of 384-dimension float32 vectors with a short text, 5 % of them in one
scope, are inserted in batches of 1,000:

* membrane_es: ``Membrane.open(dir)`` (durable: one synced commit per batch), ``batch()`` of
  ``create_record`` with the record's own vector; reads with ``retrieve(limit=10)``, unscoped
  trust and trust limited to the 5 % scope;
* Chroma (``PersistentClient``, inner-product HNSW, its defaults), ``add`` with the scope as
  metadata; reads with ``query(n_results=10)``, scoped by ``where``;
* LanceDB (``lancedb.connect``, its defaults: no vector index, so reads are exact scans),
  ``add`` of Arrow batches; reads with ``search().distance_type("dot").limit(10)``, scoped by
  a pre-filter ``where``.

Measured: insert rate (records/s, including each store's own indexing), p50 of 10-result
reads unscoped and scoped, the share of the exact top 10 (numpy, by inner product) each read
returns, the store's directory size on disk per record, and the process's peak resident
memory growth (``ru_maxrss`` minus the resident size before the store was opened; the
corpus is generated batch by batch and never held whole, and no harness keeps a table of
the records it wrote: each store is given, or gives back, the row). On-disk bytes are
compared with a record's vector + text, resident bytes with its vector + 256 B.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.core import write_section

Matrix = npt.NDArray[np.float32]

DIMENSIONS = 384
TOP = 10
BATCH = 1000
SCOPES = 20  # scope 0 (every 20th record) is the 5 % scope
FOCUS = "project:focus"
RECORDS_PER_CLUSTER = 1000
KINDS = ("clustered", "unclustered")
STORES = ("membrane_es", "membrane_es_scan", "chroma", "lancedb")
NAMES = {
    "membrane_es": "membrane_es",
    "membrane_es_scan": "membrane_es, no index",
    "chroma": "Chroma",
    "lancedb": "LanceDB",
}
SECTION = "bench.peers"


# --- the corpus, generated batch by batch from the seed ------------------------------------


@dataclass(frozen=True)
class Corpus:
    n: int
    kind: str
    seed: int

    @property
    def clusters(self) -> int:
        return max(10, self.n // RECORDS_PER_CLUSTER)

    def centres(self) -> Matrix:
        rng = np.random.default_rng([self.seed, 0])
        return rng.standard_normal((self.clusters, DIMENSIONS), dtype=np.float32)

    def batches(self) -> Iterator[tuple[int, Matrix, npt.NDArray[np.int64]]]:
        """(first row, vectors, cluster of each) per batch of BATCH rows, in order."""
        centres = self.centres() if self.kind == "clustered" else None
        for first in range(0, self.n, BATCH):
            rng = np.random.default_rng([self.seed, 1, first])
            count = min(BATCH, self.n - first)
            raw = rng.standard_normal((count, DIMENSIONS), dtype=np.float32)
            clusters = rng.integers(0, self.clusters, size=count)
            if centres is not None:
                raw += centres[clusters]
            yield first, _normalised(raw), clusters

    def queries(self, count: int) -> Matrix:
        rng = np.random.default_rng([self.seed, 2])
        raw = rng.standard_normal((count, DIMENSIONS), dtype=np.float32)
        if self.kind == "clustered":
            raw += self.centres()[rng.integers(0, self.clusters, size=count)]
        return _normalised(raw)


def _normalised(matrix: Matrix) -> Matrix:
    out: Matrix = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)
    return out


def scope_of(row: int) -> str:
    return FOCUS if row % SCOPES == 0 else f"project:{row % SCOPES}"


def text_of(row: int, cluster: int) -> str:
    return f"entity{row} concerns topic{cluster}"


def exact_tops(corpus: Corpus, queries: Matrix) -> dict[str, list[list[int]]]:
    """Exact top 10 by inner product, unscoped and within the 5 % scope, streaming."""
    best: dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]] = {}
    for name in ("all", "scoped"):
        best[name] = (
            np.full((len(queries), TOP), -np.inf, dtype=np.float32),
            np.full((len(queries), TOP), -1, dtype=np.int64),
        )
    for first, vectors, _ in corpus.batches():
        rows = np.arange(first, first + len(vectors))
        scores = queries @ vectors.T
        for name, keep in (("all", slice(None)), ("scoped", rows % SCOPES == 0)):
            top_scores, top_rows = best[name]
            merged_scores = np.concatenate([top_scores, scores[:, keep]], axis=1)
            merged_rows = np.concatenate(
                [top_rows, np.broadcast_to(rows[keep], (len(queries), len(rows[keep])))], axis=1
            )
            order = np.argsort(-merged_scores, axis=1, kind="stable")[:, :TOP]
            best[name] = (
                np.take_along_axis(merged_scores, order, axis=1),
                np.take_along_axis(merged_rows, order, axis=1),
            )
    return {name: rows.tolist() for name, (_, rows) in best.items()}


# --- one store, in a process of its own -----------------------------------------------------


class Store:
    """Insert batches, read top 10 unscoped or scoped (record rows), close."""

    def insert(self, first: int, vectors: Matrix, clusters: npt.NDArray[np.int64]) -> None:
        raise NotImplementedError

    def top(self, query: Matrix, scoped: bool) -> list[int]:
        raise NotImplementedError

    def ready(self) -> None:
        """Return once the store's own indexes are built (reads before would not use them)."""

    def close(self) -> None:
        pass


class MembraneStore(Store):
    approximate: bool | None = True  # the approximate index from its threshold on

    def __init__(self, path: str) -> None:
        from membrane_es import Membrane, TrustContext

        self.memory = Membrane.open(path, embedder=None, approximate_index=self.approximate)
        self.everyone = TrustContext()
        self.focused = TrustContext(scopes=[FOCUS])

    def insert(self, first: int, vectors: Matrix, clusters: npt.NDArray[np.int64]) -> None:
        with self.memory.batch():
            for i, (vector, cluster) in enumerate(zip(vectors, clusters, strict=True), first):
                self.memory.create_record(
                    {
                        "type": "semantic",
                        "scope": scope_of(i),
                        "payload": {
                            "kind": "semantic",
                            "subject": f"entity{i}",
                            "predicate": "concerns",
                            "object": f"topic{cluster}",
                        },
                        "provenance": {"sources": [{"kind": "observation", "ref": f"obs-{i}"}]},
                    },
                    embedding=vector,
                )

    def top(self, query: Matrix, scoped: bool) -> list[int]:
        result = self.memory.retrieve(
            trust=self.focused if scoped else self.everyone, limit=TOP, query_embedding=query
        )
        # The row is the record's subject ("entity<row>"): the harness keeps no table of
        # record ids in the measured process (it would count as the store's memory; the
        # other stores are given the row as their id).
        return [_row_of(record) for record in result.records]

    def ready(self) -> None:
        self.memory.wait_for_index()  # the approximate index is built on a thread of its own

    def close(self) -> None:
        self.memory.close()

    def reopened(self, path: str, query: Matrix) -> dict[str, float]:
        """Seconds to open the closed store again (which loads the approximate index the
        checkpoint kept), and for its first unscoped read."""
        start = time.perf_counter()
        again = type(self)(path)
        opened = time.perf_counter() - start
        start = time.perf_counter()
        again.top(query, False)
        first = time.perf_counter() - start
        again.close()
        return {"open": opened, "first_read": first}


class ScanningStore(MembraneStore):
    approximate = False  # reads by the sign codes or every vector, as below the threshold


def _row_of(record: Any) -> int:
    subject = getattr(record.payload, "subject", "")
    if not subject.startswith("entity"):
        raise RuntimeError(f"record {record.id} is not one the benchmark wrote")
    return int(subject.removeprefix("entity"))


class ChromaStore(Store):
    def __init__(self, path: str) -> None:
        import chromadb  # type: ignore[import-not-found,unused-ignore]

        self.client = chromadb.PersistentClient(path=path)
        self.collection = self.client.get_or_create_collection(  # a kept store is reopened
            "bench", metadata={"hnsw:space": "ip"}, embedding_function=None
        )

    def insert(self, first: int, vectors: Matrix, clusters: npt.NDArray[np.int64]) -> None:
        rows = range(first, first + len(vectors))
        self.collection.add(
            ids=[str(i) for i in rows],
            embeddings=vectors,
            documents=[text_of(i, int(c)) for i, c in zip(rows, clusters, strict=True)],
            metadatas=[{"scope": scope_of(i)} for i in rows],
        )

    def top(self, query: Matrix, scoped: bool) -> list[int]:
        found = self.collection.query(
            query_embeddings=[query],  # type: ignore[arg-type,unused-ignore]
            n_results=TOP,
            where={"scope": FOCUS} if scoped else None,
            include=[],
        )
        return [int(i) for i in found["ids"][0]]


class LanceStore(Store):
    def __init__(self, path: str) -> None:
        import lancedb  # type: ignore[import-not-found,unused-ignore]

        self.db = lancedb.connect(path)
        self.table: Any = None

    def insert(self, first: int, vectors: Matrix, clusters: npt.NDArray[np.int64]) -> None:
        import pyarrow as pa  # type: ignore[import-not-found,import-untyped,unused-ignore]

        rows = range(first, first + len(vectors))
        batch = pa.table(
            {
                "row": pa.array(list(rows), pa.int64()),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(vectors.reshape(-1), pa.float32()), DIMENSIONS
                ),
                "text": [text_of(i, int(c)) for i, c in zip(rows, clusters, strict=True)],
                "scope": [scope_of(i) for i in rows],
            }
        )
        if self.table is None:
            self.table = self.db.create_table("bench", batch)
        else:
            self.table.add(batch)

    def top(self, query: Matrix, scoped: bool) -> list[int]:
        search = self.table.search(query).distance_type("dot").limit(TOP).select(["row"])
        if scoped:
            search = search.where(f"scope = '{FOCUS}'", prefilter=True)
        return [int(hit["row"]) for hit in search.to_list()]


OPENERS: dict[str, Callable[[str], Store]] = {
    "membrane_es": MembraneStore,
    "membrane_es_scan": ScanningStore,
    "chroma": ChromaStore,
    "lancedb": LanceStore,
}


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _disk(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def measure_store(
    store_name: str, n: int, kind: str, seed: int, queries: int, keep: str | None = None
) -> dict[str, Any]:
    """In this (fresh) process: insert, read, size; returns the figures. With ``keep``, the
    store is built under that directory and kept; a later run given the same directory
    opens it instead, reads with the code it runs, and reports the insert, disk and peak
    memory figures of the run that built it (``built_by_earlier_run``: true)."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix=f"bench-peers-{store_name}-") as directory:
            path = Path(directory) / "store"
            return _measure_in(path, store_name, n, kind, seed, queries, save=False)
    path = Path(keep) / f"{store_name}-{n}-{kind}-{seed}"
    return _measure_in(path, store_name, n, kind, seed, queries, save=True)


def _measure_in(
    path: Path, store_name: str, n: int, kind: str, seed: int, queries: int, *, save: bool
) -> dict[str, Any]:
    corpus = Corpus(n, kind, seed)
    query_vectors = corpus.queries(queries)
    built_file = path.parent / f"{path.name}.built.json"
    built = json.loads(built_file.read_text()) if built_file.exists() else None
    path.mkdir(parents=True, exist_ok=True)
    before = _rss()
    start = time.perf_counter()
    store = OPENERS[store_name](str(path))
    opened = time.perf_counter() - start
    text_bytes = 0
    if built is None:
        start = time.perf_counter()
        for first, vectors, clusters in corpus.batches():
            store.insert(first, vectors, clusters)
            text_bytes += sum(
                len(text_of(i, int(c))) for i, c in enumerate(clusters.tolist(), first)
            )
        insert_seconds = time.perf_counter() - start
    start = time.perf_counter()
    store.ready()
    index_wait = time.perf_counter() - start
    times: dict[str, list[float]] = {"all": [], "scoped": []}
    tops: dict[str, list[list[int]]] = {"all": [], "scoped": []}
    for q in range(queries):
        for name in ("all", "scoped"):
            begin = time.perf_counter()
            found = store.top(query_vectors[q], name == "scoped")
            times[name].append(time.perf_counter() - begin)
            tops[name].append(found)
    store.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    figures: dict[str, Any] = {
        "p50": {name: statistics.median(samples[1:]) for name, samples in times.items()},
        "tops": tops,
        "index_wait": index_wait,
    }
    if built is None:
        figures |= {
            "insert_seconds": insert_seconds,
            "disk": _disk(path),
            "text_bytes": text_bytes,
            "peak_rss_growth": peak - before,
        }
    else:
        figures |= {
            **built,
            "built_by_earlier_run": True,
            "open_seconds": opened,
            "peak_rss_growth_reopened": peak - before,
        }
    figures["reopened"] = (
        store.reopened(str(path), query_vectors[0]) if isinstance(store, MembraneStore) else None
    )
    if built is None and save:
        kept = {k: figures[k] for k in ("insert_seconds", "disk", "text_bytes", "peak_rss_growth")}
        built_file.write_text(json.dumps(kept))
    return figures


def run_child(args: list[str], keep: str | None = None) -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    kept = ["--keep", keep] if keep else []
    done = subprocess.run(
        [sys.executable, "-m", "bench.peers", *kept, "--child", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"{args} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --- report -------------------------------------------------------------------------------


def recall(tops: list[list[int]], exact: list[list[int]]) -> float:
    return statistics.mean(
        len(set(got) & set(want)) / TOP for got, want in zip(tops, exact, strict=True)
    )


def size_table(n: int, kind: str, figures: dict[str, Any]) -> list[str]:
    exact = figures["exact"]
    ours = next(figures[name] for name in STORES if name in figures)
    lines = [
        f"### {n:,} records, {kind}",
        "",
        "| measurement | " + " | ".join(NAMES[name] for name in STORES) + " |",
        "| --- |" + " --- |" * len(STORES),
    ]
    vector_text = n * DIMENSIONS * 4 + ours["text_bytes"]
    baseline_rss = n * (DIMENSIONS * 4 + 256)
    cells: dict[str, list[str]] = {}
    for name in STORES:
        f = figures.get(name)
        if f is None:
            cells[name] = ["not run"] * 8
            continue
        again = f.get("reopened")
        cells[name] = [
            f"{n / f['insert_seconds']:,.0f}",
            f"{f['p50']['all'] * 1e3:.2f} ms",
            f"{f['p50']['scoped'] * 1e3:.2f} ms",
            f"{recall(f['tops']['all'], exact['all']):.0%}",
            f"{recall(f['tops']['scoped'], exact['scoped']):.0%}",
            f"{f['disk'] / n:,.0f} B ({f['disk'] / vector_text:.2f}×)",
            f"{f['peak_rss_growth'] / n:,.0f} B ({f['peak_rss_growth'] / baseline_rss:.2f}×)",
            "—" if not again else f"{again['open']:.2f} s + {again['first_read']:.2f} s",
        ]
    labels = [
        "inserts/s",
        "p50 read, unscoped",
        "p50 read, 5 % scope",
        "exact top 10 returned, unscoped",
        "exact top 10 returned, 5 % scope",
        "disk per record (÷ vector + text)",
        "peak RSS growth per record (÷ vector + 256 B)",
        "opened again + its first unscoped read",
    ]
    for i, label in enumerate(labels):
        lines.append(f"| {label} | " + " | ".join(cells[name][i] for name in STORES) + " |")
    return lines


def report(results: dict[tuple[int, str], dict[str, Any]], seconds: float, load: str) -> str:
    lines = [
        "## Side by side: Chroma and LanceDB",
        "",
        f"{DIMENSIONS}-dimension float32 vectors with a short text; 5 % of the records in one "
        "scope; batches of 1,000; 10-result reads; each store in a fresh process of its own; "
        f"whole run {seconds / 60:.1f} min; 1-minute load average {load} (2 cores). Command: "
        "`python -m bench.peers --write`.",
    ]
    for (n, kind), figures in results.items():
        lines += ["", *size_table(n, kind, figures)]
    return "\n".join([*lines, "", *READING])


READING = [
    "Reading these figures:",
    "",
    "- Each store runs with its defaults, as a user would start, but for one switch:"
    " membrane_es durable (one synced commit per batch), with `approximate_index=True`: from"
    " 50,000 vectors on its approximate index (FAISS IVF,"
    " 8-bit codes: candidates scored exactly) where the lists it scanned vouch for them, else"
    " its sign-code shortlist where the codes vouch for it, else an exact scan; 'membrane_es,"
    " no index' is the same engine with `approximate_index=False`; Chroma's HNSW index"
    " (inner product, default search breadth); LanceDB without a vector index (its reads are"
    " exact scans until one is built).",
    "- **opened again + its first unscoped read**: the closed store opened in the same"
    " process, then one unscoped read. The checkpoint keeps the approximate index whole"
    " (each vector's 8-bit code and row), so the open loads it and that read scores its"
    " candidates exactly, reading their blocks' vectors back from the log. Reads are"
    " timed once the index is ready (``Membrane.wait_for_index``).",
    "- **exact top 10 returned**: the share of numpy's exact inner-product top 10 in each"
    " read's 10 results (the queries carry no words: vector evidence only).",
    "- **disk**: every file under the store's directory after it is closed, per record,"
    " against the record's vector (1,536 B as given) + its text. membrane_es keeps each event"
    " in LMDB (its vector at half precision, 768 B; the events of a batch over 1,000 B, about"
    " 1.6 kB with their vector, packed together), the log and its hash chain, the read side's"
    " checkpoint (its columns deflated, each vector's 48-byte sign code, no vectors: a load"
    " reads them from the log; with the index, each vector's 392-byte code and row) and the"
    " per-record key store.",
    "- **peak RSS growth**: the process's peak resident set (file pages it mapped included)"
    " minus its size before the store was opened, per record, against the vector + 256 B."
    " membrane_es unmaps the pages of its LMDB file it touched as it goes (the page cache"
    " keeps them, as it keeps the pages SQLite reads for Chroma); the read side's own"
    " anonymous memory is measured apart, in a fresh process (the retrieval benchmark's"
    " 'memory per record').",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    parser.add_argument("--child", nargs=4, metavar=("STORE", "N", "KIND", "QUERIES"))
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="build each store under DIR and keep it; a later run with the same "
        "DIR reads the kept stores instead of inserting again (its insert, disk and memory figures "
        "are the building run's)",
    )
    args = parser.parse_args()
    if args.child:
        store, n, kind, queries = args.child
        corpus = Corpus(int(n), kind, args.seed)
        if store == "exact":
            print(json.dumps(exact_tops(corpus, corpus.queries(int(queries)))))
        else:
            figures = measure_store(store, int(n), kind, args.seed, int(queries), args.keep)
            print(json.dumps(figures))
        return
    start = time.perf_counter()
    load_before = os.getloadavg()[0]
    results: dict[tuple[int, str], dict[str, Any]] = {}
    for n in (int(size) for size in args.sizes.split(",")):
        for kind in args.kinds.split(","):
            measured: dict[str, Any] = {}
            for store in ["exact", *args.stores.split(",")]:
                print(f"{n:,} {kind}: {store}", file=sys.stderr, flush=True)
                keep = args.keep if store != "exact" else None
                measured[store] = run_child([store, str(n), kind, str(args.queries)], keep)
            results[(n, kind)] = measured
    load = f"{load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
    text = report(results, time.perf_counter() - start, load)
    print(text)
    if args.write:
        write_section(Path(__file__).resolve().parent.parent / "docs/benchmarks.md", SECTION, text)


if __name__ == "__main__":
    main()

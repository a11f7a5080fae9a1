"""Retrieval quality on Membrane's recall dataset: recall@k, precision@k, MRR@k, NDCG@k.

Run: ``python -m bench.recall [--embedder minilm|hashing] [--dataset PATH] [--verbose]``.
The dataset is read from ``../shared/data/recall_dataset.jsonl`` beside the repository; it is
not copied into it.

The procedure follows Membrane's evaluation program (spec/membrane.md §11.2): every record is
ingested into a fresh store and its ``text`` embedded as the record's vector; each query runs
``retrieve_graph`` with its trust, memory types and ``min_salience``, ``root_limit = node_limit =
k`` and no expansion, and the roots are scored. The "RAG" column is the same embedder's plain
cosine ranking over the records that query's trust admits, for comparison.

Metrics per query, averaged: recall@k = hits in the top k / |expected|; precision@k = hits / k;
MRR@k = 1 / rank of the first hit; NDCG@k = Σ 1/log2(i + 2) over hits / the ideal.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from membrane_es import Membrane, TrustContext
from membrane_es.embedding import Embedder, HashingEmbedder
from membrane_es.queries.trust import Visibility, record_visibility

DEFAULT_DATASET = Path(__file__).resolve().parent.parent.parent / "shared/data/recall_dataset.jsonl"
# Queries without memory types search the five record types (entities are structure, not
# answers), as Membrane's program does.
RECORD_TYPES = ["episodic", "working", "semantic", "competence", "plan_graph"]
PUBLISHED = {"recall": 0.959, "precision": 0.353, "mrr": 1.000, "ndcg": 0.956}


@dataclass
class Query:
    key: str
    text: str
    expected: list[str]
    k: int
    trust: TrustContext
    memory_types: list[str] | None = None
    min_salience: float = 0.0


@dataclass
class Dataset:
    records: list[dict[str, Any]] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)


def load_dataset(path: Path) -> Dataset:
    data = Dataset()
    for line_number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        item = json.loads(line)
        if item["type"] == "record":
            data.records.append(item)
        elif item["type"] == "query":
            trust = item["trust"]
            data.queries.append(
                Query(
                    key=item["key"],
                    text=item["text"],
                    expected=list(item["expected"]),
                    k=int(item.get("k") or 5),
                    trust=TrustContext(
                        max_sensitivity=trust["max_sensitivity"].lower(),
                        authenticated=bool(trust.get("authenticated")),
                        actor_id=trust.get("actor_id", ""),
                        scopes=list(trust.get("scopes") or []),
                    ),
                    memory_types=item.get("memory_types") or None,
                    min_salience=float(item.get("min_salience") or 0.0),
                )
            )
        else:
            raise ValueError(f"{path}:{line_number}: unknown line type {item['type']!r}")
    return data


def record_for(item: dict[str, Any]) -> dict[str, Any]:
    """The memory record a dataset line describes, with the structure it carries."""
    kind = item["memory_type"]
    payload: dict[str, Any]
    confidence = 0.8
    if kind == "episodic":
        payload = {
            "timeline": [
                {
                    "event_kind": item.get("event_kind", "event"),
                    "ref": item.get("ref", item["key"]),
                    "summary": item.get("summary", item["text"]),
                }
            ]
        }
    elif kind == "working":
        payload = {
            "thread_id": item.get("thread_id", ""),
            "state": item.get("state", "executing"),
            "next_actions": item.get("next_actions", []),
        }
        confidence = 1.0
    elif kind == "semantic":
        payload = {
            "subject": item["subject"],
            "predicate": item["predicate"],
            "object": item["object"],
            "validity": {"mode": "global"},
            "evidence": [{"source_type": "observation", "source_id": "recall-dataset"}],
        }
        confidence = 0.7
    elif kind == "competence":
        payload = {
            "skill_name": item["skill_name"],
            "triggers": [{"signal": t} for t in item.get("triggers", [])],
            "recipe": [{"step": s} for s in item.get("steps", [])],
            "performance": {"success_count": 8, "failure_count": 2, "success_rate": 0.8},
        }
        confidence = 0.85
    elif kind == "plan_graph":
        payload = {
            "plan_id": item["key"],
            "version": "1.0",
            "intent": item.get("intent", ""),
            "nodes": [{"id": n["id"], "op": n["op"]} for n in item.get("nodes", [])],
            "edges": [
                {"from": e["from"], "to": e["to"], "kind": "control"} for e in item.get("edges", [])
            ],
            "metrics": {"execution_count": 3, "failure_rate": 0.1},
        }
        confidence = 0.9
    else:
        raise ValueError(f"unknown memory_type {kind!r} for {item['key']}")
    return {
        "type": kind,
        "sensitivity": item.get("sensitivity", "low").lower(),
        "scope": item.get("scope", ""),
        "tags": list(dict.fromkeys(item.get("tags", []))),
        "confidence": confidence,
        "payload": {"kind": kind, **payload},
    }


@dataclass
class Scores:
    recall: float = 0.0
    precision: float = 0.0
    mrr: float = 0.0
    ndcg: float = 0.0

    def add(self, other: Scores) -> None:
        self.recall += other.recall
        self.precision += other.precision
        self.mrr += other.mrr
        self.ndcg += other.ndcg

    def mean(self, n: int) -> Scores:
        return Scores(self.recall / n, self.precision / n, self.mrr / n, self.ndcg / n)


def score(returned: Sequence[str], expected: Sequence[str], k: int) -> Scores:
    top = list(returned)[:k]
    wanted = set(expected)
    hits = [i for i, key in enumerate(top) if key in wanted]
    recall = len(hits) / len(wanted) if wanted else 1.0
    precision = len(hits) / k if top else 0.0
    mrr = 1.0 / (hits[0] + 1) if hits else 0.0
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(wanted), k)))
    ndcg = sum(1 / math.log2(i + 2) for i in hits) / ideal if ideal else 0.0
    return Scores(recall, precision, mrr, ndcg)


def make_embedder(name: str) -> Embedder:
    if name == "hashing":
        return HashingEmbedder(384)
    from membrane_es.embedding.default import load_minilm

    return load_minilm()  # the default: on ONNX Runtime when it is installed


def evaluate(data: Dataset, embedder: Embedder, *, verbose: bool = False) -> dict[str, Scores]:
    """Mean scores of the engine ("membrane_es") and the plain vector baseline ("rag")."""
    texts = [item["text"] for item in data.records]
    vectors = embedder.embed(texts)
    query_vectors = embedder.embed([q.text for q in data.queries])
    keys_by_id: dict[str, str] = {}
    # Membrane's program stores every line of the dataset, however alike: no resolution.
    with Membrane.in_memory(embedder=embedder, resolve_writes=False) as memory:
        with memory.batch():
            for item, vector in zip(data.records, vectors, strict=True):
                if item["memory_type"] == "semantic":
                    # As Membrane's program does: facts arrive through capture, which links
                    # their subject to an entity (the structure graph roots are boosted by).
                    captured = memory.capture_memory(
                        {k: item[k] for k in ("subject", "predicate", "object")},
                        source_kind="observation",
                        sensitivity=item.get("sensitivity", "low").lower(),
                        tags=list(dict.fromkeys(item.get("tags", []))),
                        scope=item.get("scope", ""),
                        source="recall-dataset",
                    )
                    fact = next(r for r in captured.created_records if r.type.value == "semantic")
                    keys_by_id[fact.id] = item["key"]
                    continue
                record = memory.create_record(record_for(item), embedding=vector.tolist())
                keys_by_id[record.id] = item["key"]
        totals = {"rag": Scores(), "membrane_es": Scores()}
        for query, query_vector in zip(data.queries, query_vectors, strict=True):
            graph = memory.retrieve_graph(
                query.text,
                trust=query.trust,
                memory_types=query.memory_types or RECORD_TYPES,
                min_salience=query.min_salience,
                root_limit=query.k,
                node_limit=query.k,
                max_hops=0,
                query_embedding=query_vector.tolist(),
            )
            ours = [keys_by_id.get(n.record.id, "(other)") for n in graph.nodes if n.root]
            rag = _rag(data, vectors, query, query_vector)
            for name, returned in (("membrane_es", ours), ("rag", rag)):
                result = score(returned, query.expected, query.k)
                totals[name].add(result)
                if verbose:
                    print(f"{query.key} {name:<11} {returned} expected {query.expected}")
    return {name: total.mean(len(data.queries)) for name, total in totals.items()}


def _rag(data: Dataset, vectors: np.ndarray, query: Query, query_vector: np.ndarray) -> list[str]:
    """Cosine ranking over the records the query's trust admits (redacted ones included)."""
    allowed = [
        i
        for i, item in enumerate(data.records)
        if record_visibility(
            query.trust, item.get("sensitivity", "low").lower(), item.get("scope", "")
        )
        is not Visibility.NONE
        and (not query.memory_types or item["memory_type"] in query.memory_types)
    ]
    if not allowed:
        return []
    similarity = vectors[allowed] @ query_vector
    order = np.argsort(-similarity, kind="stable")[: query.k]
    return [data.records[allowed[i]]["key"] for i in order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    data = load_dataset(args.dataset)
    results = evaluate(data, make_embedder(args.embedder), verbose=args.verbose)
    print(f"{len(data.records)} records, {len(data.queries)} queries, embedder {args.embedder}")
    print("| metric | RAG | membrane_es | Membrane (published) |")
    print("| --- | --- | --- | --- |")
    for metric in ("recall", "precision", "mrr", "ndcg"):
        rag = getattr(results["rag"], metric)
        ours = getattr(results["membrane_es"], metric)
        print(f"| {metric}@k | {rag:.3f} | {ours:.3f} | {PUBLISHED[metric]:.3f} |")


if __name__ == "__main__":
    main()

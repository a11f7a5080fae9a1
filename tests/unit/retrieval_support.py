"""Helpers for retrieval tests: trust contexts, id lists, and vectors at a chosen cosine."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from membrane_es import MemoryRecord, RetrieveGraphResult, Sensitivity, TrustContext

ALPHA = "project:alpha"
BETA = "project:beta"
QUERY = [1.0, 0.0, 0.0]  # the query vector of tests that supply their own vectors


def trust(level: str = "low", *scopes: str) -> TrustContext:
    return TrustContext(max_sensitivity=Sensitivity(level), scopes=list(scopes))


def ids(records: Sequence[MemoryRecord]) -> list[str]:
    return [r.id for r in records]


HALF_PRECISION = 1e-3  # the log keeps vectors at half precision: a cosine moves by about 1e-4


def at_cosine(cosine: float) -> list[float]:
    """A unit vector whose cosine with :data:`QUERY` is ``cosine``."""
    return [cosine, math.sqrt(max(0.0, 1.0 - cosine * cosine)), 0.0]


def node_ids(graph: RetrieveGraphResult) -> list[str]:
    return [node.record.id for node in graph.nodes]


def edge_triples(graph: RetrieveGraphResult) -> list[tuple[str, str, str]]:
    return [(e.source_id, e.predicate, e.target_id) for e in graph.edges]


def stats(successes: int, failures: int) -> dict[str, Any]:
    return {"success_count": successes, "failure_count": failures}

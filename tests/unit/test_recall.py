"""The reference recall scenario (spec §10.8 C1), with exact expected lists.

Six observed facts "system observed signal" tagged ``recall``; penalties spread their
salience; three callers ask with different trust, thresholds and limits. Each must get
exactly the expected records, in order (recall@k = precision@k = 1), through both
``retrieve`` and ``retrieve_graph`` roots (the reference's ``retrieveRecords``).
"""

from __future__ import annotations

import pytest

from membrane_es import Membrane, TrustContext
from tests.unit.builders import semantic
from tests.unit.conftest import ManualTime
from tests.unit.retrieval_support import ALPHA, BETA, ids, trust

DESCRIPTOR = "system observed signal"


@pytest.fixture
def facts(memory: Membrane, time: ManualTime) -> dict[str, str]:
    layout = {
        "A": (ALPHA, "low", 0.0),
        "B": (ALPHA, "low", 0.10),
        "C": (ALPHA, "high", 0.05),
        "D": (BETA, "low", 0.15),
        "E": ("", "low", 0.80),
        "F": (ALPHA, "low", 0.95),
    }
    made = {}
    for name, (scope, sensitivity, penalty) in layout.items():
        record = semantic(
            "system", "observed", "signal", scope=scope, sensitivity=sensitivity, tags=["recall"]
        )
        made[name] = memory.create_record({**record, "confidence": 0.7}).id
        if penalty:
            memory.penalize(made[name], penalty, "eval", "spread salience")
    time.advance(seconds=1)  # E sits just below 0.2 now
    return made


CASES = [
    (trust("low", ALPHA), 0.2, 2, ["A", "B"]),
    (trust("high", ALPHA), 0.0, 3, ["A", "C", "B"]),
    (trust("low"), 0.8, 3, ["A", "B", "D"]),
]


@pytest.mark.parametrize(("caller", "threshold", "limit", "expected"), CASES)
def test_retrieve_returns_exactly_the_expected_records(
    memory: Membrane,
    facts: dict[str, str],
    caller: TrustContext,
    threshold: float,
    limit: int,
    expected: list[str],
) -> None:
    result = memory.retrieve(DESCRIPTOR, trust=caller, min_salience=threshold, limit=limit)

    assert ids(result.records) == [facts[name] for name in expected]


@pytest.mark.parametrize(("caller", "threshold", "limit", "expected"), CASES)
def test_graph_roots_are_exactly_the_expected_records(
    memory: Membrane,
    facts: dict[str, str],
    caller: TrustContext,
    threshold: float,
    limit: int,
    expected: list[str],
) -> None:
    graph = memory.retrieve_graph(
        DESCRIPTOR,
        trust=caller,
        min_salience=threshold,
        root_limit=limit,
        node_limit=limit,
        edge_limit=0,
        max_hops=0,
    )

    assert graph.root_ids == [facts[name] for name in expected]
    assert [n.record.id for n in graph.nodes if n.root] == graph.root_ids

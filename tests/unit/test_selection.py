"""The multi-solution selector (spec §3.4, §10.7 S1–S8).

Competences and plans are created with the performance, confidence and last reinforcement
each case names (a 30-day half-life keeps them from decaying out of sight); the engine's
threshold is set per case, as the reference tests set theirs.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.projections.timecodes import micros
from membrane_es.queries import selector
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import competence, plan_graph, semantic
from tests.unit.conftest import START
from tests.unit.retrieval_support import HALF_PRECISION, QUERY, at_cosine, ids, stats, trust

MONTH = 2_592_000


def skill(
    name: str,
    confidence: float,
    successes: int | None,
    failures: int,
    reinforced: timedelta,
    **fields: Any,
) -> dict[str, Any]:
    payload: dict[str, Any] = {"kind": "competence", "skill_name": name}
    if successes is not None:
        payload["performance"] = stats(successes, failures)
    return competence(
        name,
        confidence=confidence,
        payload=payload,
        lifecycle={
            "decay": {"half_life_seconds": MONTH},
            "last_reinforced_at": (START - reinforced).isoformat(),
        },
        **fields,
    )


def plan(
    name: str, confidence: float, runs: int, failure_rate: float, reinforced: timedelta
) -> dict[str, Any]:
    payload = {
        "kind": "plan_graph",
        "plan_id": name,
        "intent": name,
        "metrics": {"execution_count": runs, "failure_rate": failure_rate},
    }
    return plan_graph(
        name,
        confidence=confidence,
        payload=payload,
        lifecycle={
            "decay": {"half_life_seconds": MONTH},
            "last_reinforced_at": (START - reinforced).isoformat(),
        },
    )


@pytest.fixture
def engine(clock: MonotonicClock, request: pytest.FixtureRequest) -> Iterator[Membrane]:
    threshold = getattr(request, "param", 0.3)
    with Membrane.in_memory(clock=clock, selection_threshold=threshold) as memory:
        yield memory


def create(memory: Membrane, record: dict[str, Any], vector: list[float] | None = None) -> str:
    return memory.create_record(record, embedding=vector).id


def test_three_skills_rank_by_confidence_success_and_recency(engine: Membrane) -> None:
    """S1."""
    a = create(engine, skill("a", 0.95, 90, 10, timedelta(hours=1)))
    b = create(engine, skill("b", 0.70, 50, 50, timedelta(days=15)))
    c = create(engine, skill("c", 0.40, 20, 80, timedelta(days=60)))

    selection = engine.retrieve("deploy", memory_types=["competence"]).selection

    assert selection is not None
    assert ids(selection.selected) == [a, b, c]
    assert selection.confidence > 0
    assert selection.needs_more is False


@pytest.mark.parametrize("engine", [0.2], indirect=True)
def test_worked_numbers_of_the_reference(engine: Membrane) -> None:
    """§3.4: best (0.95, 90/10, 2 h) ≈ 0.949; mid (0.70, 60/40, 7 d) ≈ 0.717; gap ≈ 0.245."""
    best = create(engine, skill("best", 0.95, 90, 10, timedelta(hours=2)))
    mid = create(engine, skill("mid", 0.70, 60, 40, timedelta(days=7)))

    selection = engine.retrieve().selection

    assert selection is not None
    assert selection.scores[best] == pytest.approx(0.949, abs=5e-4)
    assert selection.scores[mid] == pytest.approx(0.717, abs=5e-4)
    assert selection.confidence == pytest.approx(0.245, abs=5e-4)
    assert selection.needs_more is False


@pytest.mark.parametrize("engine", [0.9], indirect=True)
def test_near_identical_candidates_need_more(engine: Membrane) -> None:
    """S2."""
    create(engine, skill("one", 0.8, 8, 2, timedelta(hours=1)))
    create(engine, skill("two", 0.79, 8, 2, timedelta(hours=1)))

    selection = engine.retrieve().selection

    assert selection is not None
    assert selection.needs_more is True
    assert selection.confidence < 0.9


def test_a_single_candidate_is_selected_with_its_own_score(engine: Membrane) -> None:
    """S3."""
    only = create(engine, skill("only", 0.9, 9, 1, timedelta(0)))

    selection = engine.retrieve().selection

    assert selection is not None
    assert ids(selection.selected) == [only]
    assert selection.confidence == pytest.approx(selection.scores[only])
    assert selection.confidence > 0


def test_no_candidates_means_no_selection(engine: Membrane) -> None:
    """S3: the retrieval has no selection; the selector itself says 0 and needs more."""
    create(engine, semantic())

    assert engine.retrieve().selection is None
    empty = selector.select(np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64), str)
    assert (len(empty.ranked), empty.confidence, empty.needs_more) == (0, 0.0, True)


@pytest.mark.parametrize("engine", [0.5], indirect=True)
def test_plans_rank_by_their_failure_rate_too(engine: Membrane) -> None:
    """S4."""
    good = create(engine, plan("plan-a", 0.9, 100, 0.05, timedelta(hours=1)))
    poor = create(engine, plan("plan-b", 0.5, 10, 0.5, timedelta(days=30)))

    selection = engine.retrieve(memory_types=["plan_graph"]).selection

    assert selection is not None
    assert ids(selection.selected) == [good, poor]


def test_plans_eval_variant(engine: Membrane) -> None:
    """S4, the eval variant: 50 runs at 10 % failures beat 5 runs at 60 %."""
    good = create(engine, plan("plan-a", 0.8, 50, 0.10, timedelta(hours=1)))
    poor = create(engine, plan("plan-b", 0.8, 5, 0.60, timedelta(hours=1)))

    selection = engine.retrieve().selection

    assert selection is not None
    assert ids(selection.selected) == [good, poor]


@pytest.mark.parametrize("engine", [0.2], indirect=True)
def test_similarity_replaces_confidence_as_applicability(engine: Membrane) -> None:
    """S5: applicability 0.95 vs 0.10 (cosines 0.9 and −0.8) outweighs confidence."""
    better = create(engine, skill("better", 0.4, None, 0, timedelta(0)), at_cosine(0.9))
    worse = create(engine, skill("worse", 0.95, None, 0, timedelta(0)), at_cosine(-0.8))

    with_vector = engine.retrieve("compile code", query_embedding=QUERY).selection
    without = engine.retrieve("compile code").selection

    assert with_vector is not None and without is not None
    assert ids(with_vector.selected) == [better, worse]
    assert with_vector.scores[better] == pytest.approx((0.95 + 0.5 + 1.0) / 3, abs=HALF_PRECISION)
    assert ids(without.selected) == [worse, better]


@pytest.mark.parametrize("engine", [0.4], indirect=True)
def test_a_redacted_candidate_scores_one_half(engine: Membrane) -> None:
    """S6: strong (applicability 0.9), a candidate without payload (0.5), weak (0.2)."""
    strong = create(engine, skill("strong", 0.5, 10, 0, timedelta(0)), at_cosine(0.8))
    hidden = create(
        engine, skill("hidden", 0.9, 10, 0, timedelta(0), sensitivity="medium"), at_cosine(1.0)
    )
    weak = create(engine, skill("weak", 0.9, None, 0, timedelta(days=60)), at_cosine(-0.6))

    selection = engine.retrieve("x", trust=trust("low"), query_embedding=QUERY).selection

    assert selection is not None
    assert ids(selection.selected) == [strong, hidden, weak]
    assert selection.selected[1].payload is None
    assert selection.scores[hidden] == 0.5
    assert selection.needs_more is False


def test_success_rate_defaults_and_plan_failures(engine: Membrane) -> None:
    """S7: 0.5 without counts or runs; a plan failing 25 % of its runs succeeds at 0.75."""
    bare_skill = create(engine, skill("bare", 0.6, None, 0, timedelta(0)))
    bare_plan = create(engine, plan("idle", 0.6, 0, 0.9, timedelta(0)))
    failing = create(engine, plan("failing", 0.6, 4, 0.25, timedelta(0)))

    selection = engine.retrieve().selection

    assert selection is not None
    assert selection.scores[bare_skill] == pytest.approx((0.6 + 0.5 + 1.0) / 3, abs=1e-6)
    assert selection.scores[bare_plan] == pytest.approx((0.6 + 0.5 + 1.0) / 3, abs=1e-6)
    assert selection.scores[failing] == pytest.approx((0.6 + 0.75 + 1.0) / 3, abs=1e-6)


def test_confidence_of_one_overconfident_candidate_is_capped() -> None:
    """S7: a single score above 1 gives confidence 1."""
    chosen = selector.select(np.array([3.0]), np.array([1.0]), np.array([0]), str)

    assert chosen.confidence == 1.0 and chosen.needs_more is False


def test_recency_signal() -> None:
    """S8: unknown 0.5, future 1, an hour ago just under 1, sixty days ≈ 0.25."""
    now = micros(START)
    moments = [
        datetime(1, 1, 1, tzinfo=UTC),
        START + timedelta(days=1),
        START - timedelta(hours=1),
        START - timedelta(days=60),
    ]

    unknown, future, hour, sixty = selector.recency(np.array([micros(m) for m in moments]), now)

    assert unknown == 0.5 and future == 1.0
    assert 0.99 < hour <= 1.0
    assert 0.24 <= sixty <= 0.26


def test_recency_follows_reinforcement(engine: Membrane, clock: MonotonicClock) -> None:
    old = create(engine, skill("old", 0.8, 5, 5, timedelta(days=60)))
    fresh = create(engine, skill("fresh", 0.8, 5, 5, timedelta(days=30)))
    before = engine.retrieve().selection
    engine.reinforce(old, "agent", "worked again")
    after = engine.retrieve().selection

    assert before is not None and after is not None
    assert ids(before.selected) == [fresh, old]
    assert ids(after.selected) == [old, fresh]


def test_selection_covers_only_requested_layers(engine: Membrane) -> None:
    create(engine, skill("s", 0.8, 5, 5, timedelta(0)))
    create(engine, plan("p", 0.8, 5, 0.1, timedelta(0)))

    only_plans = engine.retrieve(memory_types=["plan_graph"]).selection
    facts = engine.retrieve(memory_types=["semantic"]).selection

    assert only_plans is not None and len(only_plans.selected) == 1
    assert facts is None


def test_the_threshold_defaults_to_the_reference_value(clock: MonotonicClock) -> None:
    with Membrane.in_memory(clock=clock) as memory:
        create(memory, skill("one", 0.8, 8, 2, timedelta(hours=1)))
        create(memory, skill("two", 0.5, 8, 2, timedelta(hours=1)))
        selection = memory.retrieve().selection

    assert selection is not None
    assert 0 < selection.confidence < selector.DEFAULT_THRESHOLD == 0.7
    assert selection.needs_more is True

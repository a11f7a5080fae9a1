"""The metrics snapshot (spec §6, §10.12): the reference's worked checks, empty-store zeros, and
the incremental view equal to a full scan of every record, now and as of past moments."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from membrane_es import Membrane
from membrane_es.errors import NotFoundError, ValidationError
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.payloads import CompetencePayload, PlanGraphPayload
from membrane_es.schema.records import MemoryRecord
from tests.unit.builders import competence, plan_graph, semantic
from tests.unit.conftest import ManualTime
from tests.views_support import random_history

KEYS = {
    "collected_at",
    "total_records",
    "records_by_type",
    "avg_salience",
    "avg_confidence",
    "salience_distribution",
    "active_records",
    "pinned_records",
    "total_audit_entries",
    "memory_growth_rate",
    "retrieval_usefulness",
    "competence_success_rate",
    "plan_reuse_frequency",
    "revision_rate",
}
BUCKETS = ["0.0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1.0"]


def entry(action: str) -> dict[str, Any]:
    return {"action": action, "actor": "client", "timestamp": "2024-12-31T00:00:00Z"}


def performance(rate: float) -> dict[str, Any]:
    return {"kind": "competence", "skill_name": "deploy", "performance": {"success_rate": rate}}


def plan_metrics(executions: int) -> dict[str, Any]:
    return {
        "kind": "plan_graph",
        "plan_id": "plan-1",
        "intent": "release",
        "metrics": {"execution_count": executions},
    }


# --- the reference's worked checks ----------------------------------------------------------


def test_worked_check(memory: Membrane) -> None:
    """TestEvalMetricsSnapshot / M1: three records, five audit entries (one reinforce, one
    merge: imported with the semantic record, plus the three ``create`` entries)."""
    memory.create_record(semantic(salience=1.0, audit_log=[entry("reinforce"), entry("merge")]))
    memory.create_record(competence(salience=0.5, payload=performance(0.8)))
    plan = memory.create_record(plan_graph(salience=0.8, payload=plan_metrics(3)))

    # Salience decays from the moment of creation: read as of it, so 0.8 is still 0.8.
    metrics = memory.get_metrics(as_of=plan.created_at)

    assert set(metrics) == KEYS
    assert metrics["total_records"] == 3
    assert metrics["records_by_type"] == {"semantic": 1, "competence": 1, "plan_graph": 1}
    assert metrics["active_records"] == 3
    assert metrics["avg_salience"] == pytest.approx(0.7667, abs=1e-4)
    assert metrics["total_audit_entries"] == 5
    assert metrics["retrieval_usefulness"] == pytest.approx(0.2)
    assert metrics["revision_rate"] == pytest.approx(0.2)
    assert metrics["competence_success_rate"] == pytest.approx(0.8)
    assert metrics["plan_reuse_frequency"] == pytest.approx(3.0)
    assert metrics["salience_distribution"] == {
        "0.0-0.2": 0,
        "0.2-0.4": 0,
        "0.4-0.6": 1,
        "0.6-0.8": 0,
        "0.8-1.0": 2,
    }


def test_worked_check_through_operations(memory: Membrane) -> None:
    """The same audit mix made by real operations: a reinforce and a merge's entries."""
    a = memory.create_record(semantic("a", salience=0.5)).id
    b = memory.create_record(semantic("b", salience=0.5)).id
    memory.reinforce(a, "agent", "helped")
    memory.merge([a, b], semantic("ab", evidence=True), "agent", "same fact")

    metrics = memory.get_metrics()

    # create ×3, reinforce ×1, merge ×2 (one per source)
    assert metrics["total_audit_entries"] == 6
    assert metrics["retrieval_usefulness"] == pytest.approx(1 / 6)
    assert metrics["revision_rate"] == pytest.approx(2 / 6)
    assert metrics["total_records"] == 3  # retracted sources still count
    assert metrics["active_records"] == 1  # ... with salience 0


def test_m2_buckets_pinning_growth(memory: Membrane, time: ManualTime) -> None:
    now = time.current
    ages = [timedelta(hours=2), timedelta(hours=48), timedelta(minutes=30)]
    ages += [timedelta(hours=25), timedelta(hours=72)]
    saliences = [0.1, 0.3, 0.5, 0.7, 0.9]
    inputs = [
        semantic(audit_log=[entry("reinforce"), entry("revise")]),
        semantic(audit_log=[entry("fork")]),
        competence(payload=performance(0.5)),
        competence(payload=performance(1.0)),
        plan_graph(payload=plan_metrics(4)),
    ]
    ids = []
    for record, age, salience in zip(inputs, ages, saliences, strict=True):
        record.update(salience=salience, confidence=0.6, created_at=(now - age).isoformat())
        record["lifecycle"] = {"last_reinforced_at": now.isoformat()}  # no decay yet
        ids.append(memory.create_record(record).id)
    memory.pin(ids[0])

    metrics = memory.get_metrics()  # a few microseconds later: decay has barely begun

    assert metrics["pinned_records"] == 1
    assert metrics["salience_distribution"] == dict.fromkeys(BUCKETS, 1)
    assert metrics["avg_salience"] == pytest.approx(0.5, abs=1e-6)
    assert metrics["avg_confidence"] == pytest.approx(0.6, abs=1e-6)
    assert metrics["memory_growth_rate"] == pytest.approx(0.4)
    # 3 imported (1 reinforce, 1 revise, 1 fork) + 5 create → usefulness 1/8, revision 2/8
    assert metrics["total_audit_entries"] == 8
    assert metrics["retrieval_usefulness"] == pytest.approx(1 / 8)
    assert metrics["revision_rate"] == pytest.approx(2 / 8)
    assert metrics["competence_success_rate"] == pytest.approx(0.75)
    assert metrics["plan_reuse_frequency"] == pytest.approx(4.0)


def test_empty_store_is_zeros_with_every_key(memory: Membrane, time: ManualTime) -> None:
    metrics = memory.get_metrics()
    assert set(metrics) == KEYS
    assert metrics["salience_distribution"] == dict.fromkeys(BUCKETS, 0)
    assert metrics["records_by_type"] == {}
    for key in KEYS - {"collected_at", "salience_distribution", "records_by_type"}:
        assert metrics[key] == 0, key
    assert datetime.fromisoformat(metrics["collected_at"]) >= time.current


def test_as_of_before_anything_is_empty(memory: Membrane, time: ManualTime) -> None:
    before = time.current - timedelta(seconds=1)
    memory.create_record(semantic(audit_log=[entry("reinforce")]))
    metrics = memory.get_metrics(as_of=before)
    assert metrics["total_records"] == 0
    assert metrics["total_audit_entries"] == 0
    assert metrics["retrieval_usefulness"] == 0
    assert datetime.fromisoformat(metrics["collected_at"]) == before


def test_as_of_must_be_aware(memory: Membrane) -> None:
    with pytest.raises(ValidationError):
        memory.get_metrics(as_of=datetime(2025, 1, 1))  # noqa: DTZ001 - naive on purpose


# --- the incremental view equals a full scan --------------------------------------------------


def scan(memory: Membrane, ids: list[str], moment: datetime) -> dict[str, Any]:
    """The snapshot the slow way: every record replayed to ``moment``, as the reference."""
    records: list[MemoryRecord] = []
    for record_id in ids:
        try:
            aggregate = memory.application.load_as_of(record_id, moment)
        except NotFoundError:
            continue
        records.append(aggregate.view(moment))
    total = len(records)
    saliences = [r.salience for r in records]
    buckets = dict.fromkeys(BUCKETS, 0)
    for s in saliences:
        index = 0 if s < 0.2 else 1 if s < 0.4 else 2 if s < 0.6 else 3 if s < 0.8 else 4
        buckets[BUCKETS[index]] += 1
    actions = [str(e.action) for r in records for e in r.audit_log]
    rates = [
        r.payload.performance.success_rate
        for r in records
        if isinstance(r.payload, CompetencePayload) and r.payload.performance is not None
    ]
    executions = [
        r.payload.metrics.execution_count
        for r in records
        if isinstance(r.payload, PlanGraphPayload) and r.payload.metrics is not None
    ]
    cutoff = moment - timedelta(hours=24)

    def ratio(part: float, whole: float) -> float:
        return part / whole if whole else 0.0

    return {
        "total_records": total,
        "records_by_type": dict(Counter(MemoryType(r.type).value for r in records)),
        "avg_salience": ratio(sum(saliences), total),
        "avg_confidence": ratio(sum(r.confidence for r in records), total),
        "salience_distribution": buckets,
        "active_records": sum(1 for s in saliences if s > 0),
        "pinned_records": sum(1 for r in records if r.lifecycle.pinned),
        "total_audit_entries": len(actions),
        "memory_growth_rate": ratio(
            sum(1 for r in records if r.created_at and r.created_at > cutoff), total
        ),
        "retrieval_usefulness": ratio(actions.count("reinforce"), len(actions)),
        "competence_success_rate": ratio(sum(rates), len(rates)),
        "plan_reuse_frequency": ratio(sum(executions), len(executions)),
        "revision_rate": ratio(
            sum(actions.count(a) for a in ("revise", "fork", "merge")), len(actions)
        ),
    }


def assert_matches_scan(memory: Membrane, ids: list[str], metrics: dict[str, Any]) -> None:
    moment = datetime.fromisoformat(metrics["collected_at"])
    expected = scan(memory, ids, moment)
    assert set(metrics) == KEYS
    for key, value in expected.items():
        if isinstance(value, float):
            assert metrics[key] == pytest.approx(value, rel=1e-6, abs=1e-9), key
        else:
            assert metrics[key] == value, key


def richer_history(memory: Membrane, rng: random.Random, ids: list[str]) -> None:
    """What random_history never makes: competence and plan figures, imported audit entries,
    forks and merges, and client-supplied creation times."""
    now = memory.get_metrics()["collected_at"]
    created = datetime.fromisoformat(now) - timedelta(hours=rng.uniform(0, 48))
    ids.append(
        memory.create_record(
            competence(payload=performance(rng.random()), created_at=created.isoformat())
        ).id
    )
    ids.append(memory.create_record(plan_graph(payload=plan_metrics(rng.randint(0, 9)))).id)
    ids.append(memory.create_record(competence(confidence=rng.random())).id)  # no performance
    imported = [entry(rng.choice(["reinforce", "merge", "decay", "create"])) for _ in range(2)]
    ids.append(memory.create_record(semantic("imported", audit_log=imported)).id)
    records = [memory.application.load(i) for i in ids]
    live = [
        r.record_id
        for r in records
        if not r.state.retracted and r.memory_type is MemoryType.SEMANTIC
    ]
    if len(live) >= 2:
        ids.append(
            memory.fork(
                rng.choice(live), semantic("variant", evidence=True), "t", "branch", widen=True
            ).id
        )
        a, b = rng.sample(live, 2)
        merged = memory.merge([a, b], semantic("merged", evidence=True), "t", "same", widen=True)
        ids.append(merged.id)


@pytest.mark.parametrize("seed", range(4))
def test_incremental_equals_full_scan_now_and_as_of(
    memory: Membrane, time: ManualTime, seed: int
) -> None:
    rng = random.Random(seed)
    ids: list[str] = []
    moments: list[datetime] = []
    for _ in range(5):
        ids += random_history(memory, rng, 12)
        richer_history(memory, rng, ids)
        assert_matches_scan(memory, ids, memory.get_metrics())
        moments.append(time.current + timedelta(minutes=30))
        time.advance(hours=rng.uniform(1, 30))
    for moment in moments:
        assert_matches_scan(memory, ids, memory.get_metrics(as_of=moment))
    assert_matches_scan(memory, ids, memory.get_metrics())

"""Consolidation (spec §5.5, §10.9 K1–K8, K12) as idempotent commands.

Episodes are aged by the hand-driven clock. Decay is computed here (DESIGN §6), so records
whose salience a test reads exactly are given a half-life so long that they do not decay.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from membrane_es import Membrane, MembraneError, MemoryRecord
from membrane_es.commands.consolidation import (
    COMPRESSION_RATIONALE,
    EXTRACTOR_ACTOR,
    SEMANTIC_ACTOR,
    episodic_content,
)
from membrane_es.commands.extractor import Triple, clean_triples
from membrane_es.commands.procedures import (
    COMPETENCE_ACTOR,
    PLAN_ACTOR,
    infer_intent,
    max_sensitivity,
    scope_policy,
    tool_names,
)
from membrane_es.schema import (
    CompetencePayload,
    ConsolidationResult,
    EpisodicPayload,
    MemoryType,
    PlanGraphPayload,
    SemanticPayload,
    Sensitivity,
    TimelineEvent,
    ToolNode,
)

from .builders import FULL_TRUST, audit_trail, entity, log_size, read, semantic
from .conftest import ManualTime

NO_DECAY = {"decay": {"curve": "exponential", "half_life_seconds": 10**12}}
ZERO = ConsolidationResult()


def episode(
    memory: Membrane,
    *events: tuple[str, str],
    outcome: str = "success",
    tools: Iterable[Any] = (),
    salience: float = 1.0,
    pinned: bool = False,
    **fields: Any,
) -> str:
    """An episodic record with these (event_kind, summary) events and tool nodes."""
    nodes = [t if isinstance(t, dict) else {"id": f"n{i}", "tool": t} for i, t in enumerate(tools)]
    payload = {
        "kind": "episodic",
        "timeline": [{"event_kind": k, "summary": s} for k, s in events],
        "tool_graph": nodes,
        "outcome": outcome,
    }
    record = {
        "type": "episodic",
        "sensitivity": fields.pop("sensitivity", "low"),
        "salience": salience,
        "lifecycle": {**NO_DECAY, "pinned": pinned},
        "payload": payload,
        **fields,
    }
    return memory.create_record(record).id


def of_type(memory: Membrane, memory_type: str) -> list[MemoryRecord]:
    found = memory.retrieve(trust=FULL_TRUST, memory_types=[memory_type]).records
    return sorted(found, key=lambda r: r.created_at or 0)


def derived_from(record: MemoryRecord) -> set[str]:
    return {r.target_id for r in record.relations if r.predicate == "derived_from"}


def targets(record: MemoryRecord, predicate: str) -> list[str]:
    return [r.target_id for r in record.relations if r.predicate == predicate]


def result(**counters: int) -> ConsolidationResult:
    return ConsolidationResult(**counters)


# --- K1, K2, K7: structural semantic ------------------------------------------------------


def test_k1_successful_event_becomes_a_fact_derived_from_it(memory: Membrane) -> None:
    source = episode(memory, ("latency_check", "p95 latency 180ms"))
    assert memory.consolidate() == result(semantic_extracted=1)
    (fact,) = of_type(memory, "semantic")
    payload = fact.payload
    assert isinstance(payload, SemanticPayload)
    assert (payload.subject, payload.predicate, payload.object) == (
        "latency_check",
        "observed_in",
        "p95 latency 180ms",
    )
    assert targets(fact, "derived_from") == [source]
    assert [e.source_id for e in payload.evidence] == [source]
    assert [(s.kind, s.ref, s.created_by) for s in fact.provenance.sources] == [
        ("observation", source, SEMANTIC_ACTOR)
    ]
    assert fact.provenance.created_by == SEMANTIC_ACTOR
    assert audit_trail(fact)[-1] == (
        "create",
        SEMANTIC_ACTOR,
        f"Extracted from episodic record {source}",
    )


def test_k2_a_second_episode_reinforces_the_fact_once(memory: Membrane) -> None:
    first = episode(memory, ("deploy", "deployed service"))
    second = episode(memory, ("deploy", "deployed service"))
    assert memory.consolidate() == result(semantic_extracted=1, duplicates_resolved=1)
    (fact,) = of_type(memory, "semantic")
    assert derived_from(fact) == {first, second}
    reinforcements = [a for a in audit_trail(fact) if a[0] == "reinforce"]
    assert reinforcements == [
        ("reinforce", SEMANTIC_ACTOR, f"Reinforced from episodic record {second}")
    ]


def test_k7_subject_naming_an_entity_is_canonicalised(memory: Membrane) -> None:
    deploy = memory.create_record(entity("deploy")).id
    source = episode(
        memory,
        ("deploy", "deployed service"),
        confidence=0.6,
        sensitivity="medium",
        scope="project:alpha",
        tags=["Consolidated", "deploy"],
    )
    assert memory.consolidate().semantic_extracted == 1
    (fact,) = of_type(memory, "semantic")
    assert isinstance(fact.payload, SemanticPayload)
    assert fact.payload.subject == deploy
    assert (fact.confidence, fact.sensitivity, fact.scope) == (0.6, "medium", "project:alpha")
    assert fact.tags == ["consolidated", "deploy"]
    assert [(r.predicate, r.target_id) for r in fact.relations] == [
        ("derived_from", source),
        ("subject_entity", deploy),
    ]
    assert targets(read(memory, deploy), "fact_subject_of") == [fact.id]
    # the canonicalised fact is found again: a later run creates no duplicate
    episode(memory, ("deploy", "deployed again"), scope="project:alpha")
    assert memory.consolidate() == result(duplicates_resolved=1)
    assert len(of_type(memory, "semantic")) == 1


def test_k7_existing_fact_is_reinforced_and_capped(memory: Membrane) -> None:
    existing = memory.create_record(semantic("deploy", "observed_in", "x", salience=0.95)).id
    episode(memory, ("deploy", "deployed service"), ("build", "built it"))
    episode(memory, ("deploy", "deployed service"))
    assert memory.consolidate() == result(semantic_extracted=1, duplicates_resolved=2)
    fact = read(memory, existing)
    assert fact.salience == pytest.approx(1.0, abs=1e-4)
    assert [a[1] for a in audit_trail(fact) if a[0] == "reinforce"] == [SEMANTIC_ACTOR] * 2


def test_k7_failed_and_summaryless_episodes_yield_nothing(memory: Membrane) -> None:
    episode(memory, ("deploy", "deployed service"), outcome="failure")
    episode(memory, ("deploy", ""))
    assert memory.consolidate() == ZERO
    assert of_type(memory, "semantic") == []


# --- K3, K4, K8: competence ---------------------------------------------------------------


def test_k3_two_successful_runs_of_a_tool_make_a_skill(memory: Membrane) -> None:
    sources = {episode(memory, tools=["bash"]), episode(memory, tools=[" bash "])}
    episode(memory, tools=["bash"], outcome="failure")
    assert memory.consolidate() == result(competence_extracted=1)
    (skill,) = of_type(memory, "competence")
    payload = skill.payload
    assert isinstance(payload, CompetencePayload)
    assert payload.skill_name == "skill:bash"
    assert payload.performance is not None and payload.performance.success_count == 2
    assert [(s.step, s.tool) for s in payload.recipe] == [("Step 1: invoke bash", "bash")]
    assert derived_from(skill) == sources
    assert {(s.kind, s.ref, s.created_by) for s in skill.provenance.sources} == {
        ("outcome", ref, COMPETENCE_ACTOR) for ref in sources
    }
    assert (skill.confidence, skill.tags) == (0.8, ["consolidated", "auto-competence"])


def test_k4_skill_takes_the_highest_sensitivity_and_the_shared_scope(memory: Membrane) -> None:
    episode(memory, tools=["bash"], sensitivity="low", scope="project:alpha")
    episode(memory, tools=["bash"], sensitivity="high", scope="project:alpha")
    memory.consolidate()
    (skill,) = of_type(memory, "competence")
    assert (skill.sensitivity, skill.scope) == ("high", "project:alpha")
    rationale = audit_trail(skill)[-1][2]
    assert "sensitivity=max(high)" in rationale
    assert "scope=preserved(project:alpha)" in rationale


def test_k4_sources_in_several_scopes_make_a_mixed_scope_skill(memory: Membrane) -> None:
    episode(memory, tools=["bash"], scope="project:alpha")
    episode(memory, tools=["bash"], scope="project:beta")
    memory.consolidate()
    (skill,) = of_type(memory, "competence")
    assert skill.scope == "consolidated:mixed-scope"
    assert (
        "scope=consolidated:mixed-scope from project:alpha, project:beta"
        in (audit_trail(skill)[-1][2])
    )


def test_k8_existing_skill_is_reinforced_once_per_new_episode(memory: Membrane) -> None:
    existing = memory.create_record(
        {
            "type": "competence",
            "sensitivity": "low",
            "salience": 0.95,
            "payload": {"kind": "competence", "skill_name": "skill:bash"},
        }
    ).id
    episode(memory, tools=["bash"])
    episode(memory, tools=["bash"])
    assert memory.consolidate() == result(duplicates_resolved=1)
    skill = read(memory, existing)
    assert skill.salience == pytest.approx(1.0, abs=1e-4)
    assert audit_trail(skill)[-1] == (
        "reinforce",
        COMPETENCE_ACTOR,
        "Reinforced: 2 episodes match pattern",
    )
    assert memory.consolidate() == ZERO
    late = episode(memory, tools=["bash"])
    assert memory.consolidate() == result(duplicates_resolved=1)
    assert late in derived_from(read(memory, existing))


def test_k8_blank_tool_names_make_no_pattern(memory: Membrane) -> None:
    episode(memory, tools=["  "])
    episode(memory, tools=[""])
    assert memory.consolidate() == ZERO


def test_k8_policies() -> None:
    assert max_sensitivity(["public", "public"]) is Sensitivity.PUBLIC
    assert max_sensitivity(["low", "hyper", "medium"]) is Sensitivity.HYPER
    assert max_sensitivity([]) is Sensitivity.LOW
    assert max_sensitivity(["", "secret"]) is Sensitivity.LOW
    assert scope_policy([""]) == ("", "preserved(unscoped)")
    assert scope_policy(["a", "a"]) == ("a", "preserved(a)")
    assert scope_policy(["b", ""]) == (
        "consolidated:mixed-scope",
        "consolidated:mixed-scope from unscoped, b",
    )
    nodes = [
        ToolNode(tool=" git "),
        ToolNode(tool=" "),
        ToolNode(tool="make"),
        ToolNode(tool="git"),
    ]
    assert tool_names(nodes) == ["git", "make", "git"]
    blank_first = EpisodicPayload(
        timeline=[TimelineEvent(event_kind=" "), TimelineEvent(event_kind="release")]
    )
    assert infer_intent(blank_first) == "release"
    assert infer_intent(EpisodicPayload()) == "unknown"


# --- K5: plan graphs ------------------------------------------------------------------------


def test_k5_episode_with_three_tool_nodes_yields_a_plan(memory: Membrane) -> None:
    deploy = memory.create_record(entity("deploy")).id
    nodes = [
        {"id": "a", "tool": "build"},
        {"id": "b", "tool": "test", "depends_on": ["a"]},
        {"id": "c", "tool": "deploy", "depends_on": ["b"], "args": {"service": "api"}},
    ]
    source = episode(memory, ("release", ""), tools=nodes, outcome="failure")
    assert memory.consolidate() == result(plan_graphs_extracted=1)
    (plan,) = of_type(memory, "plan_graph")
    payload = plan.payload
    assert isinstance(payload, PlanGraphPayload)
    assert [(n.id, n.op) for n in payload.nodes] == [("a", "build"), ("b", "test"), ("c", "deploy")]
    assert [(e.from_, e.to, e.kind) for e in payload.edges] == [
        ("a", "b", "control"),
        ("b", "c", "control"),
    ]
    assert payload.intent == "release"
    assert targets(plan, "derived_from") == [source]
    assert targets(plan, "uses") == [deploy]
    assert targets(read(memory, deploy), "used_by") == [plan.id]
    assert [(s.kind, s.ref, s.created_by) for s in plan.provenance.sources] == [
        ("tool_call", source, PLAN_ACTOR)
    ]
    assert audit_trail(plan)[-1] == (
        "create",
        PLAN_ACTOR,
        f"Extracted plan graph from episodic record {source} (3 nodes)",
    )
    assert memory.consolidate() == ZERO


def test_k5_fewer_than_three_tool_nodes_yield_no_plan(memory: Membrane) -> None:
    episode(memory, tools=["build", "test"], outcome="failure")
    assert memory.consolidate() == ZERO


# --- K6: episodic compression --------------------------------------------------------------


def test_k6_old_episodes_are_compressed_once(memory: Membrane, time: ManualTime) -> None:
    old = episode(memory, salience=0.8, outcome="")
    low = episode(memory, salience=0.08, outcome="")
    at_floor = episode(memory, salience=0.05, outcome="")
    pinned = episode(memory, salience=0.8, outcome="", pinned=True)
    time.advance(hours=23)
    recent = episode(memory, salience=0.8, outcome="")
    time.advance(hours=2)
    assert memory.consolidate() == result(episodic_compressed=2)
    assert read(memory, old).salience == pytest.approx(0.4, rel=1e-6)
    assert read(memory, low).salience == pytest.approx(0.05, rel=1e-6)
    for unchanged, value in ((at_floor, 0.05), (pinned, 0.8), (recent, 0.8)):
        assert read(memory, unchanged).salience == pytest.approx(value, rel=1e-6)
    assert audit_trail(read(memory, old))[-1] == (
        "decay",
        "consolidation/episodic",
        COMPRESSION_RATIONALE,
    )
    time.advance(hours=48)  # older still, but already compressed (the recent one now ages in)
    assert memory.consolidate() == result(episodic_compressed=1)
    assert read(memory, old).salience == pytest.approx(0.4, rel=1e-6)
    assert memory.consolidate() == ZERO


def test_k6_a_run_with_only_an_old_episode_compresses_only(
    memory: Membrane, time: ManualTime
) -> None:
    old = episode(memory, salience=0.6, outcome="")
    time.advance(hours=48)
    assert memory.consolidate() == result(episodic_compressed=1)
    assert read(memory, old).salience == pytest.approx(0.3, rel=1e-6)


def test_now_sets_the_moment_ages_are_measured_at(memory: Membrane, time: ManualTime) -> None:
    episode(memory, salience=0.6, outcome="")
    later = time.current.replace(year=time.current.year + 1)
    assert memory.consolidate(now=time.current) == ZERO
    assert memory.consolidate(now=later) == result(episodic_compressed=1)


# --- K12: the extractor's input ----------------------------------------------------------


def test_k12_episodic_content() -> None:
    semantic_record = MemoryRecord(type=MemoryType.SEMANTIC, payload=SemanticPayload())
    assert episodic_content(semantic_record) == ""
    payload = EpisodicPayload(
        timeline=[
            TimelineEvent(event_kind="deploy", summary="shipped"),
            TimelineEvent(event_kind="note", summary="  "),
        ],
        tool_graph=[ToolNode(tool="noop"), ToolNode(tool="search", result="found result")],
        outcome="partial",
    )
    assert episodic_content(MemoryRecord(type=MemoryType.EPISODIC, payload=payload)) == (
        "deploy: shipped\ntool noop\ntool search -> found result\noutcome: partial"
    )


# --- the extractor hook -------------------------------------------------------------------


class StubExtractor:
    """Returns fixed triples and counts its calls (no network)."""

    def __init__(self, triples: list[Any], fail: bool = False) -> None:
        self.triples = triples
        self.fail = fail
        self.calls: list[str] = []

    def extract(self, content: str) -> list[Any]:
        self.calls.append(content)
        if self.fail:
            raise RuntimeError("model unavailable")
        return self.triples


def test_extractor_triples_create_facts(memory: Membrane) -> None:
    source = episode(memory, ("chat", "talked"), outcome="")
    stub = StubExtractor(
        [
            Triple(subject="api", predicate="runs_on", object="port 8080"),
            {"subject": " db ", "predicate": "is", "object": "postgres"},
            ("api", "runs_on", "port 8080"),  # exact duplicate: dropped
            ("", "blank", "subject"),
        ]
    )
    assert memory.consolidate(extractor=stub) == result(semantic_triples_extracted=2)
    assert stub.calls == ["chat: talked"]
    facts = of_type(memory, "semantic")
    assert {(f.payload.subject, f.payload.object) for f in facts} == {  # type: ignore[union-attr]
        ("api", "port 8080"),
        ("db", "postgres"),
    }
    for fact in facts:
        assert targets(fact, "derived_from") == [source]
        assert fact.provenance.created_by == EXTRACTOR_ACTOR
        assert audit_trail(fact)[-1] == (
            "create",
            EXTRACTOR_ACTOR,
            f"Extracted semantic fact from episodic record {source}",
        )
    assert memory.consolidate(extractor=stub) == ZERO
    assert len(stub.calls) == 1  # an extracted episode is not read again


def test_extractor_exact_duplicates_reinforce_once(memory: Membrane) -> None:
    existing = memory.create_record(semantic("api", "runs_on", "port 8080", salience=0.5)).id
    source = episode(memory, ("chat", "talked"), outcome="")
    stub = StubExtractor([("api", "runs_on", "port 8080")])
    assert memory.consolidate(extractor=stub) == result(duplicates_resolved=1)
    fact = read(memory, existing)
    assert audit_trail(fact)[-1] == (
        "reinforce",
        EXTRACTOR_ACTOR,
        f"Reinforced exact semantic fact extracted from episodic record {source}",
    )
    assert derived_from(fact) == {source}
    size = log_size(memory)
    assert memory.consolidate(extractor=stub) == ZERO
    assert log_size(memory) == size
    assert len(of_type(memory, "semantic")) == 1


def test_extractor_errors_count_as_skipped_and_are_retried(memory: Membrane) -> None:
    episode(memory, ("chat", "talked"), outcome="")
    episode(memory, outcome="")  # nothing to read: the extractor is not asked
    failing = StubExtractor([], fail=True)
    size = log_size(memory)
    assert memory.consolidate(extractor=failing) == result(extraction_skipped=1)
    assert log_size(memory) == size
    working = StubExtractor([("api", "runs_on", "port 8080")])
    assert memory.consolidate(extractor=working) == result(semantic_triples_extracted=1)


def test_clean_triples() -> None:
    assert clean_triples(None) == []
    assert clean_triples([(" a ", "b", "c"), ("a", "b", "c"), ("a", " ", "c"), ("a", "b")]) == [
        Triple(subject="a", predicate="b", object="c")
    ]


# --- idempotency ---------------------------------------------------------------------------


def test_running_again_creates_and_changes_nothing(memory: Membrane, time: ManualTime) -> None:
    memory.create_record(entity("deploy"))
    memory.create_record(semantic("deploy", "observed_in", "x"))
    nodes = [
        {"id": "a", "tool": "build"},
        {"id": "b", "tool": "deploy", "depends_on": ["a"]},
        {"id": "c", "tool": "bash", "depends_on": ["b"]},
    ]
    for _ in range(2):
        episode(memory, ("deploy", "deployed service"), ("build", "built"), tools=nodes)
        episode(memory, ("latency_check", "p95 180ms"), tools=["bash"], salience=0.8)
    time.advance(hours=30)
    stub = StubExtractor([("api", "runs_on", "port 8080")])
    first = memory.consolidate(extractor=stub)
    assert first == result(
        episodic_compressed=4,
        semantic_extracted=2,
        semantic_triples_extracted=1,
        competence_extracted=2,
        plan_graphs_extracted=2,
        duplicates_resolved=7,  # facts: 2 + 1 + 1 structural, 3 extracted
    )
    size = log_size(memory)
    for _ in range(2):
        time.advance(hours=30)
        assert memory.consolidate(extractor=stub) == ZERO
        assert log_size(memory) == size


def test_consolidation_inside_a_batch_is_one_write(memory: Membrane) -> None:
    episode(memory, ("deploy", "deployed service"))
    episode(memory, ("deploy", "deployed service"))
    with memory.batch():
        assert memory.consolidate() == result(semantic_extracted=1, duplicates_resolved=1)
    assert memory.consolidate() == ZERO


def test_a_reopened_store_remembers_what_was_consolidated(tmp_path: Path) -> None:
    with Membrane.open(tmp_path / "store", sync=False) as memory:
        episode(memory, ("deploy", "deployed service"), tools=["a", "b", "c"])
        episode(memory, ("deploy", "deployed service"), tools=["a", "b", "c"])
        first = memory.consolidate()
        assert first == result(
            semantic_extracted=1,
            competence_extracted=1,
            plan_graphs_extracted=2,
            duplicates_resolved=1,
        )
    with Membrane.open(tmp_path / "store", sync=False) as memory:
        size = log_size(memory)
        assert memory.consolidate() == ZERO
        assert log_size(memory) == size


def test_scheduled_consolidation_runs_until_the_engine_closes(memory: Membrane) -> None:
    episode(memory, ("latency_check", "p95 latency 180ms"))
    task = memory.start_consolidation(0.01)

    assert task.wait_for_runs(3, timeout=30)
    assert len(of_type(memory, "semantic")) == 1  # idempotent: later runs add nothing
    assert task.failures == 0
    with pytest.raises(MembraneError):
        memory.start_consolidation(1.0)

    memory.close()
    finished = task.runs
    assert not task.wait_for_runs(finished + 1, timeout=0.05)


def test_a_failing_scheduled_run_does_not_stop_the_schedule(memory: Membrane) -> None:
    def broken(content: str) -> list[Triple]:
        raise RuntimeError("extractor down")

    episode(memory, ("deploy", "deployed service"))
    task = memory.start_consolidation(0.01, extractor=broken)
    assert task.wait_for_runs(2, timeout=30)
    memory.close()

"""Trust on list and graph reads (spec §3.1, §10.1 T1–T11 adapted), and one property over
random stores and callers for retrieve, retrieve_graph and retrieve_by_id together.

The rules: at or below ``max_sensitivity`` in full; one level above redacted (ids, type,
sensitivity, scores, tags, scope, timestamps only); two or more above omitted; a non-empty
scope list admits scoped records only in those scopes, unscoped ones always. A graph never
returns, or points an edge at, a record the caller may not see.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es import (
    AccessDeniedError,
    Membrane,
    MemoryRecord,
    Sensitivity,
    TrustContext,
    ValidationError,
)
from membrane_es.queries.trust import redact
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import (
    FULL_TRUST,
    competence,
    entity,
    episodic,
    plan_graph,
    semantic,
    working,
)
from tests.unit.conftest import ManualTime
from tests.unit.retrieval_support import ALPHA, BETA, ids, trust

LEVELS = list(Sensitivity)


def fact(memory: Membrane, sensitivity: str, scope: str = "", salience: float = 1.0) -> str:
    record = semantic(f"{sensitivity} {scope}", sensitivity=sensitivity, scope=scope)
    return memory.create_record({**record, "salience": salience}).id


# --- §10.1 ------------------------------------------------------------------------------------


def test_low_alpha_caller_sees_only_low_alpha(memory: Membrane) -> None:
    """T1 (and T2 for by-id)."""
    low_alpha = fact(memory, "low", ALPHA)
    high_alpha = fact(memory, "high", ALPHA)
    fact(memory, "low", BETA)

    result = memory.retrieve(trust=trust("low", ALPHA), memory_types=["semantic"])

    assert ids(result.records) == [low_alpha]
    with pytest.raises(AccessDeniedError):
        memory.retrieve_by_id(high_alpha, trust=trust("low", ALPHA))


def test_high_alpha_caller_sees_both_alpha_facts_never_beta(memory: Membrane) -> None:
    """T3."""
    low_alpha = fact(memory, "low", ALPHA, salience=0.9)
    high_alpha = fact(memory, "high", ALPHA, salience=0.8)
    fact(memory, "low", BETA)

    result = memory.retrieve(trust=trust("high", ALPHA))

    assert ids(result.records) == [low_alpha, high_alpha]
    assert all(r.payload is not None for r in result.records)


@pytest.mark.parametrize(
    ("record", "expected"),
    [("low", "full"), ("medium", "full"), ("high", "redacted"), ("hyper", None)],
)
def test_the_seed_table_for_a_medium_caller(
    memory: Membrane, record: str, expected: str | None
) -> None:
    """Seed 000 / T4 / T7: low and medium in full, high redacted, hyper not returned."""
    made = fact(memory, record)

    records = memory.retrieve(trust=trust("medium")).records

    if expected is None:
        assert records == []
    else:
        assert ids(records) == [made]
        assert (records[0].payload is None) == (expected == "redacted")


def test_scope_and_level_together(memory: Membrane) -> None:
    """T6 / T8: {low, [a]} over low@a, medium@a, high@a, low@b, low@"", medium@b."""
    a, b = "project:a", "project:b"
    low_a = fact(memory, "low", a, 0.9)
    medium_a = fact(memory, "medium", a, 0.8)
    fact(memory, "high", a, 0.7)
    fact(memory, "low", b, 0.6)
    unscoped = fact(memory, "low", "", 0.5)
    fact(memory, "medium", b, 0.4)

    records = memory.retrieve(trust=trust("low", a)).records

    assert ids(records) == [low_a, medium_a, unscoped]
    assert [r.payload is None for r in records] == [False, True, False]


def test_a_redacted_record_keeps_only_its_metadata(memory: Membrane) -> None:
    """T9."""
    target = memory.create_record(semantic("target")).id
    record = semantic(
        "secret",
        sensitivity="medium",
        scope=ALPHA,
        tags=["t1", "t2"],
        confidence=0.6,
        provenance={"sources": [{"kind": "observation", "ref": "r"}]},
        interpretation={"summary": "s", "mentions": [{"surface": "x"}]},
        relations=[{"predicate": "supports", "target_id": target}],
    )
    made = memory.create_record(record).id

    shown = memory.retrieve(trust=trust("low", ALPHA), memory_types=["semantic"]).records
    (redacted,) = [r for r in shown if r.id == made]
    full = memory.retrieve_by_id(made, trust=FULL_TRUST)

    assert (redacted.id, redacted.type, redacted.scope, redacted.tags) == (
        made,
        "semantic",
        ALPHA,
        ["t1", "t2"],
    )
    assert (redacted.sensitivity, redacted.confidence) == ("medium", 0.6)
    assert (redacted.created_at, redacted.updated_at) == (full.created_at, full.updated_at)
    assert redacted.payload is None and redacted.interpretation is None
    assert redacted.provenance.sources == [] and redacted.relations == []
    assert redacted.audit_log == []
    assert redacted.lifecycle.decay.half_life_seconds == 0
    assert redacted.lifecycle.deletion_policy == "auto_prune"


def test_by_type_retrieval_redacts_one_level_up(memory: Membrane) -> None:
    """T11: trust low over {low 0.9, medium 0.8, hyper 1.0} → [low, redacted medium]."""
    low = fact(memory, "low", salience=0.9)
    medium = fact(memory, "medium", salience=0.8)
    fact(memory, "hyper", salience=1.0)

    records = memory.retrieve(trust=trust("low"), memory_types=["semantic"]).records

    assert ids(records) == [low, medium]
    assert records[1].payload is None


def test_an_unknown_trust_level_is_refused(memory: Membrane) -> None:
    """T5: an invalid ceiling is a validation error, never "see nothing" or "see all"."""
    fact(memory, "low")
    bogus: Any = {"max_sensitivity": "secret"}

    for read in (memory.retrieve, memory.retrieve_graph):
        with pytest.raises(ValidationError) as info:
            read(trust=bogus)
        assert info.value.field == "trust.max_sensitivity"


def test_default_trust_is_least_privilege(memory: Membrane) -> None:
    low = fact(memory, "low", salience=0.9)
    medium = fact(memory, "medium", salience=0.8)
    fact(memory, "high")

    assert ids(memory.retrieve().records) == [low, medium]
    assert [n.record.id for n in memory.retrieve_graph().nodes] == [low, medium]


def test_scopes_unknown_to_the_store_admit_only_unscoped(memory: Membrane) -> None:
    unscoped = fact(memory, "low")
    fact(memory, "low", ALPHA)

    assert ids(memory.retrieve(trust=trust("hyper", "never-seen")).records) == [unscoped]


def test_an_edge_never_points_at_an_omitted_record(memory: Membrane) -> None:
    root = memory.create_record(episodic("root")).id
    hidden = fact(memory, "low", BETA)
    memory.add_relation(root, "supports", hidden)

    graph = memory.retrieve_graph(trust=trust("hyper", ALPHA), memory_types=["episodic"])

    assert [n.record.id for n in graph.nodes] == [root]
    assert graph.edges == []


# --- the property ---------------------------------------------------------------------------

BUILDERS = [semantic, episodic, working, competence, entity, plan_graph]
SCOPES = ["", ALPHA, BETA]

records_strategy = st.lists(
    st.tuples(
        st.integers(0, len(BUILDERS) - 1),
        st.sampled_from(LEVELS),
        st.sampled_from(SCOPES),
        st.floats(0.05, 1.0),
    ),
    min_size=3,
    max_size=12,
)
callers = st.builds(
    lambda level, scopes: TrustContext(max_sensitivity=level, scopes=scopes),
    st.sampled_from(LEVELS),
    st.lists(st.sampled_from([ALPHA, BETA, "other"]), max_size=2, unique=True),
)


def expected_access(caller: TrustContext, record: MemoryRecord) -> str | None:
    """The rules, stated independently of the engine's code."""
    if caller.scopes and record.scope and record.scope not in caller.scopes:
        return None
    difference = Sensitivity(record.sensitivity).level - Sensitivity(caller.max_sensitivity).level
    return "full" if difference <= 0 else "redacted" if difference == 1 else None


def without_salience(record: MemoryRecord) -> MemoryRecord:
    """Reads a microsecond apart differ in decay only."""
    return msgspec.structs.replace(record, salience=0.0)


def check_shown(caller: TrustContext, shown: MemoryRecord, truth: dict[str, MemoryRecord]) -> None:
    full = truth[shown.id]
    level = expected_access(caller, full)
    assert level is not None, f"{shown.id} must not be returned"
    if level == "full":
        assert without_salience(shown) == without_salience(full)
    else:
        assert without_salience(shown) == without_salience(redact(full))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=records_strategy,
    links=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), min_size=2, max_size=20),
    retracted=st.lists(st.integers(0, 11), max_size=3),
    caller=callers,
    descriptor=st.sampled_from(["", "service", "deploy build thread", "Postgres"]),
)
def test_every_read_path_applies_the_trust_rules(
    layout: list[tuple[int, Sensitivity, str, float]],
    links: list[tuple[int, int]],
    retracted: list[int],
    caller: TrustContext,
    descriptor: str,
) -> None:
    time = ManualTime()
    # each layout entry is a record of its own, however alike (no resolution on write)
    with Membrane.in_memory(clock=MonotonicClock(source=time), resolve_writes=False) as memory:
        made = []
        for kind, level, scope, salience in layout:
            record = BUILDERS[kind](sensitivity=level.value, scope=scope, salience=salience)
            made.append(memory.create_record(record).id)
        for source, target in links:
            if source != target and max(source, target) < len(made):
                memory.add_relation(made[source], "supports", made[target], inverse="supported_by")
        gone = set()
        for index in retracted:
            if index < len(made) and layout[index][0] != 1:  # episodic cannot be retracted
                memory.retract(made[index], "agent", "wrong")
                gone.add(made[index])
        time.advance(minutes=1)
        truth = {i: memory.retrieve_by_id(i, trust=FULL_TRUST) for i in made}

        # retrieve without a task: exactly the visible, active records, each as the rules
        # say; with one, those of them it gives evidence for
        listed = memory.retrieve("", trust=caller).records
        visible = {i for i in made if expected_access(caller, truth[i]) and i not in gone}
        assert sorted(ids(listed)) == sorted(visible)
        answered = memory.retrieve(descriptor, trust=caller).records
        assert set(ids(answered)) <= visible
        for shown in [*listed, *answered]:
            check_shown(caller, shown, truth)
        with_retracted = memory.retrieve("", trust=caller, include_retracted=True)
        assert {r.id for r in with_retracted.records} == {
            i for i in made if expected_access(caller, truth[i])
        }

        # retrieve_graph: nodes visible; edges only between nodes, along real relations;
        # with room enough, every relation to a visible, active record is followed
        graph = memory.retrieve_graph(
            descriptor, trust=caller, node_limit=100, edge_limit=1000, max_hops=3
        )
        nodes = {n.record.id for n in graph.nodes}
        assert nodes <= visible
        for node in graph.nodes:
            check_shown(caller, node.record, truth)
        for edge in graph.edges:
            assert edge.source_id in nodes and edge.target_id in nodes
            assert any(
                r.predicate == edge.predicate and r.target_id == edge.target_id
                for r in truth[edge.source_id].relations
            )
        edges = {(e.source_id, e.predicate, e.target_id) for e in graph.edges}
        for node in graph.nodes:
            for relation in truth[node.record.id].relations if node.hop < 3 else []:
                if relation.target_id in visible:
                    assert (node.record.id, relation.predicate, relation.target_id) in edges

        # retrieve_by_id: the full record or a denial, never a redacted one
        for record_id in made:
            if expected_access(caller, truth[record_id]) == "full":
                read = memory.retrieve_by_id(record_id, trust=caller)
                assert without_salience(read) == without_salience(truth[record_id])
            else:
                with pytest.raises(AccessDeniedError):
                    memory.retrieve_by_id(record_id, trust=caller)

        # and a missing trust context is an error on every path
        for read in (memory.retrieve, memory.retrieve_graph):
            with pytest.raises(ValidationError):
                read(descriptor, trust=None)
        with pytest.raises(ValidationError):
            memory.retrieve_by_id(made[0], trust=None)


def test_reads_as_of_apply_the_same_rules(memory: Membrane, time: ManualTime) -> None:
    low = fact(memory, "low", salience=0.9)
    medium = fact(memory, "medium", salience=0.8)
    fact(memory, "high")
    moment = time.advance(minutes=1)
    time.advance(hours=1)

    then = memory.retrieve(trust=trust("low"), as_of=moment + timedelta(seconds=1)).records

    assert ids(then) == [low, medium]
    assert then[1].payload is None

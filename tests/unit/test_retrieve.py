"""Layered retrieval (spec §3.2, §10.5): filters, order, limits, as_of, valid_at, validation.

Everything runs through ``Membrane.in_memory()`` on a hand-driven clock. Without a task
descriptor records come back by salience; the blend with relevance evidence is covered in
test_ranking.py, trust in test_trust_retrieval.py, the selector in test_selection.py.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from membrane_es import Membrane, MemoryType, ValidationError
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
from tests.unit.conftest import START, ManualTime
from tests.unit.retrieval_support import ids, trust


def create(memory: Membrane, record: dict[str, Any]) -> str:
    return memory.create_record(record).id


# --- layers and types (O9, O10) ---------------------------------------------------------------


def test_every_type_is_retrieved_by_salience_when_no_task_is_given(memory: Membrane) -> None:
    made = {
        "working": create(memory, working(salience=0.5)),
        "entity": create(memory, entity(salience=0.9)),
        "semantic": create(memory, semantic(salience=0.7)),
        "competence": create(memory, competence(salience=0.3)),
        "plan_graph": create(memory, plan_graph(salience=0.8)),
        "episodic": create(memory, episodic(salience=0.6)),
    }

    result = memory.retrieve(trust=FULL_TRUST)

    by_salience = ["entity", "plan_graph", "semantic", "episodic", "working", "competence"]
    assert ids(result.records) == [made[kind] for kind in by_salience]


@pytest.mark.parametrize("kind", list(MemoryType), ids=str)
def test_memory_types_restricts_the_layers(memory: Membrane, kind: MemoryType) -> None:
    builders = {
        MemoryType.WORKING: working,
        MemoryType.ENTITY: entity,
        MemoryType.SEMANTIC: semantic,
        MemoryType.COMPETENCE: competence,
        MemoryType.PLAN_GRAPH: plan_graph,
        MemoryType.EPISODIC: episodic,
    }
    made = {t: create(memory, build()) for t, build in builders.items()}

    result = memory.retrieve(trust=FULL_TRUST, memory_types=[kind])

    assert ids(result.records) == [made[kind]]


def test_the_order_of_memory_types_does_not_matter(memory: Membrane) -> None:
    for i in range(4):
        create(memory, episodic(f"event {i}", salience=0.2 + i / 10))
        create(memory, working(f"thread-{i}", salience=0.25 + i / 10))
    create(memory, semantic())

    one = memory.retrieve(trust=FULL_TRUST, memory_types=["episodic", "working"])
    other = memory.retrieve(trust=FULL_TRUST, memory_types=["working", "episodic", "working"])

    assert ids(one.records) == ids(other.records)
    assert len(one.records) == 8
    assert {r.type for r in one.records} == {MemoryType.EPISODIC, MemoryType.WORKING}


def test_empty_memory_types_means_every_type(memory: Membrane) -> None:
    create(memory, semantic())
    create(memory, episodic())

    assert len(memory.retrieve(trust=FULL_TRUST, memory_types=[]).records) == 2


def test_typed_retrieval_finds_each_kind_under_its_type(memory: Membrane) -> None:
    event = create(memory, episodic("user asked for a deploy"))
    tool = create(memory, episodic("ran kubectl apply"))
    fact = create(memory, semantic("service", "runs_on", "port 8080"))
    state = create(memory, working("thread-9"))

    assert set(ids(memory.retrieve(memory_types=["episodic"]).records)) == {event, tool}
    assert ids(memory.retrieve(memory_types=["semantic"]).records) == [fact]
    assert ids(memory.retrieve(memory_types=["working"]).records) == [state]


# --- limit, min_salience (O7, O9) -------------------------------------------------------------


def test_limit_keeps_the_most_salient(memory: Membrane) -> None:
    saliences = [0.3, 0.9, 0.5, 0.7]
    made = {s: create(memory, semantic(f"s{s}", salience=s)) for s in saliences}

    result = memory.retrieve(limit=2)

    assert ids(result.records) == [made[0.9], made[0.7]]
    assert [r.salience for r in result.records] == sorted(
        [r.salience for r in result.records], reverse=True
    )


def test_limit_zero_means_no_limit(memory: Membrane) -> None:
    for i in range(12):
        create(memory, semantic(f"s{i}"))

    assert len(memory.retrieve(limit=0).records) == 12


def test_min_salience_and_limit_with_selection_over_all_candidates(memory: Membrane) -> None:
    strong = create(memory, competence("strong", salience=0.7))
    weak = create(memory, competence("weak", salience=0.6))
    create(memory, competence("filtered", salience=0.1))

    result = memory.retrieve(memory_types=["competence"], min_salience=0.5, limit=1)

    assert ids(result.records) == [strong]
    assert result.selection is not None
    assert set(result.selection.scores) == {strong, weak}
    assert len(result.selection.selected) == 2


def test_min_salience_is_evaluated_at_the_moment_asked(memory: Membrane, time: ManualTime) -> None:
    fact = create(memory, semantic(lifecycle={"decay": {"half_life_seconds": 3600}}))
    time.advance(hours=2)  # salience 0.25 now

    assert ids(memory.retrieve(min_salience=0.2).records) == [fact]
    assert memory.retrieve(min_salience=0.3).records == []
    assert ids(memory.retrieve(min_salience=0.3, as_of=START + timedelta(minutes=30)).records) == [
        fact
    ]


def test_redacted_records_keep_their_salience_for_the_threshold(memory: Membrane) -> None:
    medium = create(memory, semantic(sensitivity="medium", salience=0.6))
    create(memory, semantic(sensitivity="medium", salience=0.2))

    result = memory.retrieve(trust=trust("low"), min_salience=0.5)

    assert ids(result.records) == [medium]
    assert result.records[0].payload is None


# --- active reads: retracted, decayed to nothing ----------------------------------------------


def test_retracted_records_are_left_out_unless_asked_for(memory: Membrane) -> None:
    kept = create(memory, semantic("kept"))
    gone = create(memory, semantic("gone"))
    memory.retract(gone, "agent", "wrong")

    assert ids(memory.retrieve().records) == [kept]
    everything = memory.retrieve(include_retracted=True).records
    assert ids(everything) == [kept, gone]
    assert everything[1].salience == 0.0


def test_superseded_and_merged_records_are_retracted_too(memory: Membrane) -> None:
    old = create(memory, semantic("old"))
    new = memory.supersede(old, semantic("new", evidence=True), "agent", "newer").id
    a, b = create(memory, semantic("a")), create(memory, semantic("b"))
    merged = memory.merge([a, b], semantic("ab", evidence=True), "agent", "same").id

    assert set(ids(memory.retrieve().records)) == {new, merged}
    assert set(ids(memory.retrieve(include_retracted=True).records)) == {old, new, a, b, merged}


def test_contested_records_stay(memory: Membrane) -> None:
    fact = create(memory, semantic())
    other = create(memory, semantic("other"))
    memory.contest(fact, other, "agent", "doubt")

    assert set(ids(memory.retrieve().records)) == {fact, other}


def test_records_decayed_to_nothing_stay_visible(memory: Membrane, time: ManualTime) -> None:
    fading = create(memory, semantic("fading", lifecycle={"decay": {"half_life_seconds": 60}}))
    pinned = create(memory, semantic("pinned", lifecycle={"decay": {"half_life_seconds": 60}}))
    memory.pin(pinned)
    time.advance(days=1)  # 1,440 half-lives: the salience underflows to 0

    records = memory.retrieve().records
    assert ids(records) == [pinned, fading]  # ranked below, never left out
    assert records[1].salience == 0.0


def test_records_past_their_max_age_are_hidden(memory: Membrane, time: ManualTime) -> None:
    expiring = create(
        memory,
        semantic("expiring", lifecycle={"decay": {"half_life_seconds": 60, "max_age_seconds": 60}}),
    )
    manual = create(
        memory,
        semantic(
            "manual",
            lifecycle={"decay": {"max_age_seconds": 60}, "deletion_policy": "manual_only"},
        ),
    )
    time.advance(minutes=1)

    assert ids(memory.retrieve().records) == [manual]
    assert expiring in ids(memory.retrieve(include_retracted=True).records)


def test_a_record_penalized_to_zero_is_hidden_like_a_pruned_one(memory: Membrane) -> None:
    kept = create(memory, semantic("kept"))
    zeroed = create(memory, semantic("zeroed"))
    memory.penalize(zeroed, 5.0, "agent", "useless")

    assert ids(memory.retrieve().records) == [kept]
    assert zeroed in ids(memory.retrieve(include_retracted=True).records)


# --- order and ties ---------------------------------------------------------------------------


def test_ties_are_broken_by_newer_then_id(memory: Membrane) -> None:
    moment = START - timedelta(days=1)
    same = [
        create(memory, semantic(f"s{i}", id=f"rec-{name}", created_at=moment.isoformat()))
        for i, name in enumerate(["c", "a", "b"])
    ]
    newer = create(memory, semantic("newer", id="rec-0", created_at=START.isoformat()))

    first = memory.retrieve()
    again = memory.retrieve()

    assert ids(first.records) == [newer, "rec-a", "rec-b", "rec-c"]
    assert ids(first.records) == ids(again.records)
    assert sorted(same) == ["rec-a", "rec-b", "rec-c"]


def test_the_same_store_answers_the_same_way_every_time(memory: Membrane) -> None:
    for i in range(30):
        create(memory, semantic(f"s{i % 3}", salience=(i % 4) / 4 + 0.1))

    answers = {tuple(ids(memory.retrieve("s1 s2").records)) for _ in range(3)}

    assert len(answers) == 1


def test_returned_records_are_private_copies(memory: Membrane) -> None:
    fact = create(memory, semantic(tags=["a"]))

    memory.retrieve().records[0].tags.append("mutated")

    assert memory.retrieve().records[0].tags == ["a"]
    assert memory.retrieve_by_id(fact).tags == ["a"]


def test_records_are_returned_as_a_by_id_read_shows_them(memory: Membrane) -> None:
    fact = create(memory, semantic(sensitivity="medium", scope="s", tags=["x"]))
    memory.reinforce(fact, "agent", "useful")

    listed = memory.retrieve(trust=FULL_TRUST).records[0]
    direct = memory.retrieve_by_id(fact, trust=FULL_TRUST)

    assert listed.audit_log == direct.audit_log
    assert listed.payload == direct.payload
    assert math.isclose(listed.salience, direct.salience, rel_tol=1e-9)


def test_an_empty_store_returns_nothing(memory: Membrane) -> None:
    result = memory.retrieve("anything")

    assert result.records == [] and result.selection is None


# --- as_of ------------------------------------------------------------------------------------


def test_as_of_leaves_out_records_created_later(memory: Membrane, time: ManualTime) -> None:
    early = create(memory, semantic("early"))
    time.advance(hours=1)
    create(memory, semantic("late"))

    assert ids(memory.retrieve(as_of=START + timedelta(minutes=1)).records) == [early]
    assert memory.retrieve(as_of=START - timedelta(seconds=1)).records == []


def test_as_of_shows_a_record_retracted_later(memory: Membrane, time: ManualTime) -> None:
    fact = create(memory, semantic())
    time.advance(hours=1)
    memory.retract(fact, "agent", "wrong")

    then = memory.retrieve(as_of=START + timedelta(minutes=1)).records

    assert ids(then) == [fact]
    assert then[0].salience > 0.99
    assert [e.action for e in then[0].audit_log] == ["create"]


def test_as_of_evaluates_decay_then(memory: Membrane, time: ManualTime) -> None:
    a = create(
        memory, semantic("a", salience=0.8, lifecycle={"decay": {"half_life_seconds": 3600}})
    )
    b = create(memory, semantic("b", salience=0.5))
    time.advance(days=2)

    then = memory.retrieve(as_of=START + timedelta(hours=1)).records

    assert ids(then) == [b, a]
    assert then[1].salience == pytest.approx(0.4)


def test_as_of_equals_the_answer_given_then(
    memory: Membrane, clock: MonotonicClock, time: ManualTime
) -> None:
    first = create(memory, semantic("first", salience=0.6))
    create(memory, competence("deploy"))
    answer = memory.retrieve("first deploy")
    moment = clock.last
    assert moment is not None
    time.advance(hours=3)
    memory.reinforce(first, "agent", "useful")
    memory.retract(first, "agent", "wrong")
    create(memory, semantic("first again", salience=1.0))

    assert memory.retrieve("first deploy", as_of=moment) == answer


# --- valid_at ---------------------------------------------------------------------------------


def window(start: datetime | None, end: datetime | None) -> dict[str, Any]:
    validity: dict[str, Any] = {"mode": "timeboxed"}
    if start is not None:
        validity["start"] = start.isoformat()
    if end is not None:
        validity["end"] = end.isoformat()
    record = semantic(f"{start}-{end}")
    record["payload"]["validity"] = validity
    return record


def test_valid_at_keeps_facts_whose_window_contains_it(memory: Membrane) -> None:
    jan, feb, mar = (datetime(2025, m, 1, tzinfo=UTC) for m in (1, 2, 3))
    january = create(memory, window(jan, feb))
    february = create(memory, window(feb, mar))
    since_feb = create(memory, window(feb, None))
    until_feb = create(memory, window(None, feb))
    always = create(memory, semantic("always"))
    event = create(memory, episodic())

    def valid(moment: datetime) -> set[str]:
        return set(ids(memory.retrieve(valid_at=moment).records))

    assert valid(jan) == {january, until_feb, always, event}
    assert valid(feb) == {february, since_feb, always, event}  # start inclusive, end exclusive
    assert valid(feb - timedelta(microseconds=1)) == {january, until_feb, always, event}
    assert valid(mar) == {since_feb, always, event}
    assert len(memory.retrieve().records) == 6


def test_valid_at_applies_to_graph_retrieval(memory: Membrane) -> None:
    jan, feb = datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 2, 1, tzinfo=UTC)
    old = create(memory, window(jan, feb))
    root = create(memory, episodic("checked the window"))
    memory.add_relation(root, "supports", old)

    graph = memory.retrieve_graph(memory_types=["episodic"], valid_at=feb)

    assert [n.record.id for n in graph.nodes] == [root]
    assert graph.edges == []


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"trust": None}, "trust"),
        ({"trust": {"max_sensitivity": "secret"}}, "trust.max_sensitivity"),
        ({"limit": -1}, "limit"),
        ({"limit": 10_001}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": 1.5}, "limit"),
        ({"min_salience": -0.1}, "min_salience"),
        ({"min_salience": math.nan}, "min_salience"),
        ({"min_salience": math.inf}, "min_salience"),
        ({"memory_types": "semantic"}, "memory_types"),
        ({"memory_types": ["semantic", "facts"]}, "memory_types[1]"),
        ({"as_of": datetime(2025, 1, 1)}, "as_of"),
        ({"as_of": "2025-01-01"}, "as_of"),
        ({"valid_at": datetime(2025, 1, 1)}, "valid_at"),
        ({"include_retracted": "yes"}, "include_retracted"),
        ({"query_embedding": []}, "query_embedding"),
        ({"query_embedding": [1.0, math.nan]}, "query_embedding"),
        ({"task_descriptor": "x" * 100_001}, "task_descriptor"),
    ],
)
def test_bad_arguments_name_their_field(
    memory: Membrane, arguments: dict[str, Any], field: str
) -> None:
    create(memory, semantic())

    with pytest.raises(ValidationError) as info:
        memory.retrieve(**arguments)

    assert info.value.field == field


def test_limits_at_the_bounds_are_accepted(memory: Membrane) -> None:
    create(memory, semantic())

    assert len(memory.retrieve(limit=10_000, min_salience=0.0).records) == 1
    assert memory.retrieve("x" * 100_000).records == []  # accepted; it matches nothing


def test_trust_none_says_a_trust_context_is_required(memory: Membrane) -> None:
    with pytest.raises(ValidationError, match="trust context is required"):
        memory.retrieve(trust=None)


def test_the_selection_threshold_is_checked() -> None:
    with pytest.raises(ValidationError) as info:
        Membrane.in_memory(selection_threshold=1.5)

    assert info.value.field == "selection_threshold"


def test_trust_is_checked_before_anything_else(memory: Membrane) -> None:
    with pytest.raises(ValidationError) as listed:
        memory.retrieve(trust=None, limit=-1)
    with pytest.raises(ValidationError) as graph:
        memory.retrieve_graph(trust=None, root_limit=-1)

    assert listed.value.field == graph.value.field == "trust"

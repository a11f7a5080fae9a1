"""``as_of`` on retrieve and retrieve_graph, against the answers given at the time (hypothesis).

A random history — records of every type in a few scopes and sensitivities, revisions,
relations, pins, time passing — is interrupted now and then by a set of queries (with and
without a descriptor, scoped and not, filtered and limited, graph and layered; the engine has
an embedder, so vectors and words both count). Afterwards, asking each query again ``as_of``
the moment it ran gives exactly the same answer: same records, same order, same salience,
same selection, same graph.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es import Membrane, MembraneError, Sensitivity, TrustContext
from membrane_es.embedding import HashingEmbedder
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import competence, entity, episodic, plan_graph, semantic, working
from tests.unit.conftest import ManualTime
from tests.unit.retrieval_support import ALPHA, BETA

WORDS = ["orchid", "deploy", "service", "cache", "build", "staging"]
HOUR_US = 3_600 * 10**6

QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("retrieve", {"trust": TrustContext(max_sensitivity=Sensitivity.HYPER)}),
    ("retrieve", {"task_descriptor": "deploy service", "limit": 3}),
    (
        "retrieve",
        {
            "task_descriptor": "orchid cache build",
            "trust": TrustContext(max_sensitivity=Sensitivity.MEDIUM, scopes=[ALPHA]),
            "memory_types": ["semantic", "competence", "plan_graph"],
            "min_salience": 0.2,
        },
    ),
    ("retrieve", {"task_descriptor": "staging", "include_retracted": True}),
    (
        "retrieve",
        {"valid_at": datetime(2025, 1, 15, tzinfo=UTC), "memory_types": ["semantic"]},
    ),
    (
        "retrieve_graph",
        {"task_descriptor": "orchid", "trust": TrustContext(max_sensitivity=Sensitivity.HIGH)},
    ),
    ("retrieve_graph", {"task_descriptor": "deploy build", "root_limit": 2, "max_hops": 2}),
    ("retrieve_graph", {"root_limit": 3, "node_limit": 5, "edge_limit": 3}),
]


def build(kind: str, words: list[str], **fields: Any) -> dict[str, Any]:
    text = " ".join(words)
    if kind == "semantic":
        record = semantic(words[0], "relates_to", text, **fields)
        if len(words) > 2:  # some facts hold only for a while
            record["payload"]["validity"] = {
                "start": "2025-01-10T00:00:00+00:00",
                "end": "2025-01-20T00:00:00+00:00",
            }
        return record
    if kind == "entity":
        return entity(words[0], **fields)
    makers = {"episodic": episodic, "working": working, "competence": competence}
    if kind in makers:
        return makers[kind](text, **fields)
    return plan_graph(text, **fields)


creations = st.tuples(
    st.just("create"),
    st.sampled_from(["semantic", "entity", "episodic", "working", "competence", "plan_graph"]),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    st.sampled_from(["low", "medium", "high"]),
    st.sampled_from(["", ALPHA, BETA]),
    st.floats(0.05, 1.0),
    st.sampled_from([600, 3600, 86_400]),
)
targets = st.integers(0, 30)
operations = st.one_of(
    creations,
    creations,
    st.tuples(st.just("reinforce"), targets),
    st.tuples(st.just("penalize"), targets, st.floats(0.0, 0.6)),
    st.tuples(st.just("retract"), targets),
    st.tuples(st.just("supersede"), targets, st.lists(st.sampled_from(WORDS), min_size=1)),
    st.tuples(
        st.just("relate"), targets, targets, st.sampled_from(["supports", "mentions_entity"])
    ),
    st.tuples(st.just("pin"), targets),
    st.tuples(st.just("unpin"), targets),
    st.tuples(st.just("advance"), st.integers(0, 6 * HOUR_US)),
    st.tuples(st.just("look")),
)


def apply(memory: Membrane, time: ManualTime, made: list[str], operation: tuple[Any, ...]) -> None:
    """Run one operation; one the engine refuses writes nothing and is skipped."""
    name, *args = operation

    def pick(index: int) -> str:
        return made[index % len(made)]

    try:
        if name == "create":
            kind, words, sensitivity, scope, salience, half_life = args
            record = build(
                kind,
                words,
                sensitivity=sensitivity,
                scope=scope,
                salience=salience,
                lifecycle={"decay": {"half_life_seconds": half_life}},
            )
            made.append(memory.create_record(record).id)
        elif name == "advance":
            time.advance(microseconds=args[0])
        elif not made:
            return
        elif name == "reinforce":
            memory.reinforce(pick(args[0]), "agent", "useful")
        elif name == "penalize":
            memory.penalize(pick(args[0]), args[1], "agent", "misled")
        elif name == "retract":
            memory.retract(pick(args[0]), "agent", "wrong")
        elif name == "supersede":
            new = build("semantic", args[1], provenance={"sources": [{"ref": "x"}]})
            made.append(memory.supersede(pick(args[0]), new, "agent", "newer").id)
        elif name == "relate":
            memory.add_relation(pick(args[0]), args[2], pick(args[1]), inverse="related_back")
        elif name == "pin":
            memory.pin(pick(args[0]))
        elif name == "unpin":
            memory.unpin(pick(args[0]))
    except MembraneError:
        pass


def ask(memory: Membrane, method: str, arguments: dict[str, Any], **extra: Any) -> Any:
    return getattr(memory, method)(**arguments, **extra)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start=st.lists(creations, min_size=4, max_size=12),
    history=st.lists(operations, min_size=5, max_size=40),
)
def test_as_of_gives_the_answers_given_then(
    start: list[tuple[Any, ...]], history: list[tuple[Any, ...]]
) -> None:
    check_answers_as_of(start, history)


def check_answers_as_of(start: list[tuple[Any, ...]], history: list[tuple[Any, ...]]) -> None:
    """Run the history, asking the queries now and then; then ask each ``as_of`` its moment."""
    time = ManualTime()
    clock = MonotonicClock(source=time)
    with Membrane.in_memory(clock=clock, embedder=HashingEmbedder(32)) as memory:
        made: list[str] = []
        answers: list[tuple[str, dict[str, Any], datetime, Any]] = []
        for operation in [*start, *history, ("look",)]:
            if operation[0] != "look":
                apply(memory, time, made, operation)
                continue
            for method, arguments in QUERIES:
                answer = ask(memory, method, arguments)
                moment = clock.last
                assert moment is not None
                answers.append((method, arguments, moment, answer))
        # Later writes change the corpus's statistics (word frequencies, lengths) a lot.
        time.advance(hours=5)
        for i in range(12):
            text = " ".join(WORDS[: 1 + i % 3] * (1 + i))
            memory.create_record(semantic("orchid", "relates_to", text, scope=ALPHA))

        for method, arguments, moment, answer in answers:
            assert ask(memory, method, arguments, as_of=moment) == answer


def test_a_graph_as_of_follows_the_relations_of_that_moment(time: ManualTime) -> None:
    clock = MonotonicClock(source=time)
    with Membrane.in_memory(clock=clock) as memory:
        root = memory.create_record(episodic("orchid rollout", salience=1.0)).id
        early = memory.create_record(semantic("early")).id
        memory.add_relation(root, "supports", early)
        before = memory.retrieve_graph("orchid rollout", root_limit=1)
        moment = clock.last
        time.advance(hours=1)
        late = memory.create_record(semantic("late")).id
        memory.add_relation(root, "supports", late)
        memory.retract(early, "agent", "wrong")

        now = memory.retrieve_graph("orchid rollout", root_limit=1)
        then = memory.retrieve_graph("orchid rollout", root_limit=1, as_of=moment)

    assert [n.record.id for n in now.nodes] == [root, late]
    assert then == before
    assert [n.record.id for n in then.nodes] == [root, early]

"""Graph retrieval (spec §3.5, §10.6 G1–G11 adapted; T10).

In this API limits mean what they say: ``max_hops=0`` is roots only (the wire's 0 → default
and −1 → roots only are the gRPC edge's business).
"""

from __future__ import annotations

from typing import Any

import pytest

from membrane_es import EntityPayload, Membrane, ValidationError
from membrane_es.queries import roots
from membrane_es.queries.snapshot import take_snapshot
from membrane_es.schema import EntityAlias, Interpretation, MemoryRecord, Mention, Relation
from tests.unit.builders import FULL_TRUST, competence, entity, episodic, semantic
from tests.unit.conftest import ManualTime
from tests.unit.retrieval_support import ALPHA, edge_triples, node_ids, trust


def create(memory: Membrane, record: dict[str, Any]) -> str:
    return memory.create_record(record).id


def orchid(memory: Membrane, salience: float = 0.1, **fields: Any) -> str:
    record = entity("Orchid", salience=salience, **fields)
    record["payload"]["aliases"] = ["orchid deploy target"]
    record["payload"]["primary_type"] = "Project"
    return create(memory, record)


def relate(memory: Membrane, source: str, predicate: str, target: str, inverse: str = "") -> None:
    memory.add_relation(source, predicate, target, inverse=inverse)


# --- roots and the rerank -----------------------------------------------------------------------


def test_an_entity_named_by_the_task_is_the_root(memory: Membrane) -> None:
    """G1: entity "Orchid" (0.1) ↔ episode (1.0); the entity wins the rerank."""
    named = orchid(memory)
    event = create(memory, episodic("deployed orchid to staging", salience=1.0))
    relate(memory, event, "mentions_entity", named, inverse="mentioned_in")

    graph = memory.retrieve_graph("Orchid", root_limit=1, node_limit=2, edge_limit=4, max_hops=1)

    assert graph.root_ids == [named]
    assert node_ids(graph) == [named, event]
    assert [(n.root, n.hop) for n in graph.nodes] == [(True, 0), (False, 1)]
    assert edge_triples(graph) == [(named, "mentioned_in", event)]


def test_relations_to_a_named_entity_promote_a_record(memory: Membrane) -> None:
    """G7: a fact about Orchid (salience 0.2) beats an unrelated one (1.0)."""
    named = orchid(memory)
    about = create(memory, semantic("it", "runs_on", "kubernetes", salience=0.2))
    create(memory, semantic("user", "prefers", "dark mode", salience=1.0))
    relate(memory, about, "subject_entity", named, inverse="fact_subject_of")

    graph = memory.retrieve_graph(
        "Orchid deploy target", memory_types=["semantic"], root_limit=1, max_hops=1
    )

    assert graph.root_ids == [about]
    assert node_ids(graph) == [about, named]
    assert graph.nodes[1].hop == 1


def test_named_entities_join_the_pool_even_when_ranked_out(memory: Membrane) -> None:
    """G5: the entity lookup adds roots the layered pool (3 × root_limit) missed."""
    for i in range(5):
        create(memory, semantic("orchid", f"fact_{i}", "orchid orchid", salience=1.0))
    named = orchid(memory, salience=0.01)

    assert named not in ids_of(memory.retrieve("orchid", limit=3).records)
    graph = memory.retrieve_graph("orchid", root_limit=1, max_hops=0)

    assert graph.root_ids == [named]


def ids_of(records: list[MemoryRecord]) -> list[str]:
    return [r.id for r in records]


def test_entity_roots_follow_trust(memory: Membrane) -> None:
    """G5: with {low, [alpha]}: the low entity in full, the medium one redacted, no high."""
    low = orchid(memory, scope=ALPHA)
    medium = orchid(memory, scope=ALPHA, sensitivity="medium")
    orchid(memory, scope=ALPHA, sensitivity="high")
    orchid(memory, scope="project:beta")

    graph = memory.retrieve_graph("orchid", trust=trust("low", ALPHA), max_hops=0)

    assert set(graph.root_ids) == {low, medium}
    redacted = {n.record.id: n.record.payload is None for n in graph.nodes}
    assert redacted == {low: False, medium: True}


def test_entity_roots_only_when_entities_are_asked_for(memory: Membrane) -> None:
    named = orchid(memory)
    fact = create(memory, semantic("orchid", "runs_on", "kubernetes"))
    relate(memory, fact, "subject_entity", named)

    facts_only = memory.retrieve_graph("orchid", memory_types=["semantic"], max_hops=0)
    blank = memory.retrieve_graph("  ", memory_types=["episodic"])

    assert facts_only.root_ids == [fact]
    assert blank.root_ids == [] and blank.nodes == []


def test_a_root_found_twice_appears_once(memory: Membrane) -> None:
    """G11."""
    named = orchid(memory, salience=1.0)

    graph = memory.retrieve_graph("orchid")

    assert graph.root_ids == [named]
    assert node_ids(graph) == [named]


def test_root_nodes_keep_rank_order(memory: Membrane) -> None:
    """Roots come first in rank order (as root_ids), not re-sorted by salience."""
    named = orchid(memory, salience=0.1)
    loud = create(memory, semantic("user", "prefers", "dark mode", salience=1.0))

    graph = memory.retrieve_graph("orchid", root_limit=2, max_hops=0)

    assert graph.root_ids == [named, loud]
    assert node_ids(graph) == [named, loud]


def test_without_a_descriptor_roots_keep_retrieval_order(memory: Membrane) -> None:
    low = create(memory, semantic("a", salience=0.3))
    high = orchid(memory, salience=0.9)

    graph = memory.retrieve_graph(max_hops=0)

    assert graph.root_ids == [high, low]


# --- expansion ------------------------------------------------------------------------------


def test_edge_limit_and_duplicates(memory: Membrane) -> None:
    """G2: edge_limit 1 with two relations → one edge; a repeated relation is one edge."""
    root = create(memory, episodic("the root event", salience=1.0))
    a, b = create(memory, semantic("a", salience=0.1)), create(memory, semantic("b", salience=0.1))
    relate(memory, root, "supports", a)
    relate(memory, root, "supports", b)
    relate(memory, root, "supports", a)

    one = memory.retrieve_graph("root event", root_limit=1, edge_limit=1)
    all_ = memory.retrieve_graph("root event", root_limit=1)

    assert edge_triples(one) == [(root, "supports", a)]
    assert edge_triples(all_) == [(root, "supports", a), (root, "supports", b)]


def test_two_hops_are_ordered_by_hop_then_salience(memory: Membrane) -> None:
    """G2: nodes sorted lower hop first, then salience."""
    root = create(memory, episodic("start here", salience=1.0))
    near_low = create(memory, semantic("near low", salience=0.2))
    near_high = create(memory, semantic("near high", salience=0.3))
    far = create(memory, semantic("far", salience=0.9))
    relate(memory, root, "supports", near_low)
    relate(memory, root, "supports", near_high)
    relate(memory, near_low, "depends_on", far)

    graph = memory.retrieve_graph("start here", root_limit=1, max_hops=2)
    shallow = memory.retrieve_graph("start here", root_limit=1, max_hops=1)

    assert node_ids(graph) == [root, near_high, near_low, far]
    assert [n.hop for n in graph.nodes] == [0, 1, 1, 2]
    assert far not in node_ids(shallow)


def test_roots_only(memory: Membrane) -> None:
    """G3 / G10: max_hops 0 → roots only, no edges; node_limit caps the roots."""
    a = create(memory, semantic("a", salience=0.9))
    b = create(memory, semantic("b", salience=0.8))
    relate(memory, a, "supports", b)

    roots_only = memory.retrieve_graph(root_limit=2, max_hops=0)
    capped = memory.retrieve_graph(root_limit=2, node_limit=1)

    assert node_ids(roots_only) == [a, b] and roots_only.edges == []
    assert roots_only.root_ids == [a, b]
    assert node_ids(capped) == [a] and capped.root_ids == [a] and capped.edges == []


def test_neighbours_follow_trust_and_limits(memory: Membrane) -> None:
    """G4: relations to a hyper record and two allowed ones; node 2, edge 1 → one edge."""
    root = create(memory, episodic("root of it all", salience=1.0))
    secret = create(memory, semantic("secret", sensitivity="hyper", salience=0.1))
    first = create(memory, semantic("first", salience=0.1))
    second = create(memory, semantic("second", salience=0.1))
    for target in (secret, first, second):
        relate(memory, root, "supports", target)

    def graph(nodes: int, edges: int) -> list[tuple[str, str, str]]:
        found = memory.retrieve_graph(
            "root of it all", root_limit=1, node_limit=nodes, edge_limit=edges
        )
        assert set(node_ids(found)) <= {root, first, second}
        return edge_triples(found)

    assert graph(2, 1) == [(root, "supports", first)]
    assert graph(2, 4) == [(root, "supports", first)]
    assert graph(1, 4) == []
    assert graph(3, 4) == [(root, "supports", first), (root, "supports", second)]


def test_two_roots_pointing_at_each_other(memory: Membrane) -> None:
    """G6."""
    a = create(memory, semantic("a", salience=0.9))
    b = create(memory, semantic("b", salience=0.8))
    relate(memory, a, "supports", b, inverse="supported_by")

    graph = memory.retrieve_graph(root_limit=2)

    assert node_ids(graph) == [a, b]
    assert all(n.root for n in graph.nodes)
    assert sorted(edge_triples(graph)) == sorted([(a, "supports", b), (b, "supported_by", a)])


def test_expansion_ignores_memory_types_and_min_salience(memory: Membrane) -> None:
    root = create(memory, semantic("root", salience=0.9))
    faint = create(memory, episodic("faint", salience=0.01))
    relate(memory, root, "derived_from", faint)

    graph = memory.retrieve_graph(memory_types=["semantic"], min_salience=0.5)

    assert node_ids(graph) == [root, faint]


def test_expansion_skips_retracted_records(memory: Membrane) -> None:
    old = create(memory, semantic("old", salience=0.5))
    new = memory.supersede(old, semantic("new", evidence=True), "agent", "newer").id

    graph = memory.retrieve_graph()

    assert node_ids(graph) == [new]
    assert graph.edges == []


def test_a_redacted_neighbour_is_returned_without_its_content(memory: Membrane) -> None:
    """T10: one level up → redacted node, edge kept; two levels up → neither."""
    root = create(memory, episodic("root", salience=1.0))
    above = create(memory, semantic("above", sensitivity="medium"))
    far_above = create(memory, semantic("far above", sensitivity="high"))
    relate(memory, root, "supports", above)
    relate(memory, root, "supports", far_above)
    relate(memory, above, "supports", far_above)

    graph = memory.retrieve_graph(memory_types=["episodic"], trust=trust("low"), max_hops=3)

    assert node_ids(graph) == [root, above]
    assert edge_triples(graph) == [(root, "supports", above)]
    shown = graph.nodes[1].record
    assert shown.payload is None and shown.interpretation is None and shown.relations == []
    assert shown.sensitivity == "medium"


def test_a_redacted_root_over_the_reference_grpc_case(memory: Membrane) -> None:
    """T10 (gRPC eval): a medium episode, trust low, types [episodic], roots only."""
    event = create(memory, episodic("secretive", sensitivity="medium"))

    graph = memory.retrieve_graph(
        trust=trust("low"), memory_types=["episodic"], root_limit=5, node_limit=5, max_hops=0
    )

    assert node_ids(graph) == [event]
    assert graph.nodes[0].record.payload is None
    assert graph.nodes[0].record.sensitivity == "medium"


def test_the_selection_comes_from_the_layered_retrieval(memory: Membrane) -> None:
    skill = create(memory, competence("deploy"))
    create(memory, semantic())

    with_skill = memory.retrieve_graph("deploy")
    facts = memory.retrieve_graph("deploy", memory_types=["semantic"])

    assert with_skill.selection is not None
    assert ids_of(with_skill.selection.selected) == [skill]
    assert facts.selection is None


def test_defaults_are_ten_roots_twenty_five_nodes_one_hop(memory: Membrane) -> None:
    """G10."""
    hub = create(memory, semantic("hub", salience=1.0))
    for i in range(30):
        spoke = create(memory, semantic(f"spoke {i}", salience=0.5))
        relate(memory, hub, "supports", spoke)

    graph = memory.retrieve_graph()

    assert len(graph.root_ids) == 10
    assert len(graph.nodes) == 25
    assert len(graph.edges) == 25 - 10 + 9  # edges to new nodes, and from the hub to roots
    assert max(n.hop for n in graph.nodes) == 1


def test_an_empty_store_gives_an_empty_graph(memory: Membrane) -> None:
    graph = memory.retrieve_graph("anything")

    assert (graph.nodes, graph.edges, graph.root_ids, graph.selection) == ([], [], [], None)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"trust": None}, "trust"),
        ({"root_limit": -1}, "root_limit"),
        ({"node_limit": 10_001}, "node_limit"),
        ({"edge_limit": -5}, "edge_limit"),
        ({"max_hops": -1}, "max_hops"),
        ({"min_salience": float("nan")}, "min_salience"),
        ({"memory_types": ["nope"]}, "memory_types[0]"),
        ({"task_descriptor": "x" * 100_001}, "task_descriptor"),
    ],
)
def test_bad_arguments_name_their_field(
    memory: Membrane, arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as info:
        memory.retrieve_graph(**arguments)

    assert info.value.field == field


def test_zero_limits_return_nothing_of_that_kind(memory: Membrane) -> None:
    a = create(memory, semantic("a"))
    b = create(memory, semantic("b"))
    relate(memory, a, "supports", b)

    assert memory.retrieve_graph(root_limit=0).nodes == []
    assert memory.retrieve_graph(node_limit=0).nodes == []
    assert memory.retrieve_graph(root_limit=1, edge_limit=0, trust=FULL_TRUST).edges == []


# --- boosts (pure) --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("predicate", "extra"),
    [
        ("mentions_entity", 20),
        ("mentioned_in", 20),
        ("subject_entity", 25),
        ("fact_subject_of", 25),
        ("object_entity", 25),
        ("fact_object_of", 25),
        ("supports", 10),
        ("supported_by", 10),
        ("depends_on", 10),
        ("dependency_of", 10),
        (" Supports ", 10),
        ("relates_to", 0),
    ],
)
def test_relation_boost(predicate: str, extra: int) -> None:
    """G9."""
    assert roots.relation_boost(predicate, 60) == 60 + extra


def test_root_boost_adds_every_kind_of_tie() -> None:
    """G8: canonical, alias, type, mention surface, and a `supports` relation to an entity
    matching by canonical and alias → at least 340."""
    record = MemoryRecord(
        type="entity",  # type: ignore[arg-type]
        payload=EntityPayload(
            canonical_name="Orchid",
            primary_type="orchid",
            aliases=[EntityAlias(value="the orchid")],
        ),
        interpretation=Interpretation(mentions=[Mention(surface="Orchid")]),
        relations=[Relation(predicate="supports", target_id="other")],
    )

    def related(record_id: str) -> tuple[str, tuple[str, ...]] | None:
        return ("orchid", ("orchid project",)) if record_id == "other" else None

    assert roots.root_boost(record, "orchid", related) == 100 + 75 + 15 + 30 + 70 + 55


def test_mention_alias_alone_and_redacted_records() -> None:
    """G8: a mention alias alone is worth 20; a record without content is worth 0."""
    mentioned = MemoryRecord(
        type="episodic",  # type: ignore[arg-type]
        interpretation=Interpretation(mentions=[Mention(surface="it", aliases=["orchid"])]),
    )
    bare = MemoryRecord(type="episodic")  # type: ignore[arg-type]

    assert roots.root_boost(mentioned, "orchid", lambda _: None) == 20
    assert roots.root_boost(bare, "orchid", lambda _: None) == 0


def test_entity_types_are_unique_and_trimmed() -> None:
    payload = EntityPayload(primary_type=" Project ", types=["project", "", "Service"])

    assert roots.entity_types(payload) == ["Project", "Service"]


def test_related_entities_count_only_when_fully_readable(memory: Membrane) -> None:
    """G8: a denied related entity gives no boost."""
    hidden = orchid(memory, sensitivity="medium")
    about = create(memory, semantic("it", "runs_on", "kubernetes", salience=0.2))
    other = create(memory, semantic("user", "prefers", "dark mode", salience=1.0))
    relate(memory, about, "subject_entity", hidden)

    low = memory.retrieve_graph("orchid", memory_types=["semantic"], root_limit=1, max_hops=0)
    medium = memory.retrieve_graph(
        "orchid", memory_types=["semantic"], root_limit=1, max_hops=0, trust=trust("medium")
    )

    assert low.root_ids == [other]
    assert medium.root_ids == [about]


# --- how much of the descriptor a name is, and scores rather than positions ---------------------


def test_name_strength_is_full_when_the_descriptor_is_the_name() -> None:
    """The reference's case: the descriptor names the entity (or is part of its name)."""
    assert roots.name_strength(" Orchid ", "orchid") == 1.0
    assert roots.name_strength("orchid deploy target", "Deploy") == 1.0


def test_a_name_inside_a_longer_descriptor_is_one_of_the_things_it_says() -> None:
    """1/m for a descriptor of m content words, however many words spell the name."""
    assert roots.name_strength("team", "what build system does the team use") == 1 / 4
    assert roots.name_strength("project alpha", "how does auth work in project alpha") == 1 / 4
    assert roots.name_strength("auth", "how does auth work in project alpha") == 1 / 4


def test_a_name_must_occur_as_whole_words() -> None:
    assert roots.name_strength("api", "rapid rollout") == 0.0
    assert roots.name_strength("form", "deployment platforms") == 0.0
    assert roots.name_strength("rose", "orchid") == 0.0
    assert roots.name_strength("the", "the orchid") == 0.0  # no content word of its own
    assert roots.name_strength("", "orchid") == 0.0


def test_names_are_words_as_the_text_index_reads_them() -> None:
    """One tokenizer for names and descriptors: stems and diacritics as FTS5 indexes them."""
    assert roots.name_strength("platform", "deployment platforms") == 0.5
    assert roots.name_strength("Zürich", "the office in zurich") == 0.5


def test_a_partial_match_scales_every_kind_of_tie() -> None:
    record = MemoryRecord(
        type="semantic",  # type: ignore[arg-type]
        interpretation=Interpretation(mentions=[Mention(surface="team")]),
        relations=[Relation(predicate="subject_entity", target_id="e")],
    )

    def related(record_id: str) -> tuple[str, tuple[str, ...]] | None:
        return ("team", ()) if record_id == "e" else None

    full = roots.root_boost(record, "team", related)
    partial = roots.root_boost(record, "which team ships releases", related)

    assert full == 30 + 85
    assert partial == pytest.approx(full / 3)  # "which" is a stop word


def test_an_alias_spelled_like_the_canonical_name_counts_once() -> None:
    """Capture writes the canonical name as the first alias: same words, same evidence."""
    named = MemoryRecord(
        type="entity",  # type: ignore[arg-type]
        payload=EntityPayload(canonical_name="Team", aliases=[EntityAlias(value="team")]),
    )
    fact = MemoryRecord(
        type="semantic",  # type: ignore[arg-type]
        relations=[Relation(predicate="subject_entity", target_id="e")],
    )

    def related(record_id: str) -> tuple[str, tuple[str, ...]] | None:
        return ("team", ("team", "the crew")) if record_id == "e" else None

    assert roots.root_boost(named, "team", lambda _: None) == 100
    assert roots.root_boost(fact, "team", related) == 85
    assert roots.root_boost(fact, "the crew", related) == 70


def test_rerank_adds_boosts_to_scores_and_keeps_rank_order_on_ties() -> None:
    scores = [0.9, 0.6, 0.6, 0.2]
    assert roots.rerank(scores, [0, 0, 0, 0]) == [0, 1, 2, 3]
    assert roots.rerank(scores, [0, 0, 10, 0]) == [0, 2, 1, 3]  # tips a close call
    assert roots.rerank(scores, [0, 20, 0, 0]) == [0, 1, 2, 3]  # not a clear one
    assert roots.rerank(scores, [0, 0, 0, 100]) == [3, 0, 1, 2]  # a full name tie decides


def test_a_generic_name_in_a_question_does_not_outrank_the_record_asked_for(
    memory: Membrane,
) -> None:
    """The task mentions "team" in passing; the fact about the team is tied to it, the fact
    that answers the question is not. The answer stays first; asked about the team by name,
    the team's fact is."""
    team = create(memory, entity("team"))
    about_team = create(memory, semantic("team", "prefers_language", "go", salience=1.0))
    relate(memory, about_team, "subject_entity", team, inverse="fact_subject_of")
    answer = create(memory, semantic("ci", "uses_build_system", "bazel", salience=1.0))
    create(memory, semantic("user", "prefers", "dark mode", salience=1.0))

    asked = memory.retrieve_graph(
        "which build system does the ci use for the team?",
        memory_types=["semantic"],
        root_limit=2,
        max_hops=0,
    )
    named = memory.retrieve_graph("team", memory_types=["semantic"], root_limit=1, max_hops=0)

    assert asked.root_ids == [answer, about_team]
    assert named.root_ids == [about_team]


def test_graph_roots_are_deterministic(memory: Membrane) -> None:
    team = create(memory, entity("team"))
    for i in range(4):
        fact = create(memory, semantic("team", f"fact_{i}", "same words", salience=1.0))
        relate(memory, fact, "subject_entity", team)

    runs = [
        memory.retrieve_graph("what does the team say?", root_limit=5, max_hops=0).root_ids
        for _ in range(3)
    ]

    assert runs[0] == runs[1] == runs[2]


def test_a_name_counts_by_how_telling_it_is() -> None:
    """With word weights (IDF), a rare name in the task counts more than a common one, and
    a two-word name counts by its most telling word, not by its length."""
    # terms as the text index holds them (stemmed)
    idf = {"authent": 3.0, "work": 1.0, "project": 1.0, "alpha": 2.0, "user": 1.0}.get

    def weight(word: str) -> float:
        return idf(word) or 0.0

    task = "how does authentication work in project alpha for users"
    assert roots.name_strength("authentication", task, weight) == 3 / 8
    assert roots.name_strength("project alpha", task, weight) == 2 / 8
    assert roots.name_strength("authentication", task) == 1 / 5  # equal weights
    assert roots.name_strength("authentication", "authentication", weight) == 1.0
    # no word of the task known to the store: equal weights
    assert roots.name_strength("zeta", "zeta omega", lambda _: 0.0) == 1 / 2


def test_word_weights_are_the_idf_of_the_snapshot(memory: Membrane, time: ManualTime) -> None:
    """Rarer words weigh more; a word no record holds weighs 0; a record written later does
    not change what a read as of an earlier moment weighs."""
    for i in range(3):
        create(memory, semantic("team", f"owns_{i}", "service"))
    create(memory, semantic("bazel", "builds", "service"))
    moment = time.advance(seconds=1)
    weight = roots.word_weights(take_snapshot(memory.views, moment, None))

    assert weight("bazel") > weight("team") > weight("service") > 0
    assert weight("unheard") == 0.0

    time.advance(seconds=1)
    create(memory, semantic("bazel", "caches", "builds"))
    then = roots.word_weights(take_snapshot(memory.views, time(), moment))

    assert then("bazel") == weight("bazel")
    assert then("team") == weight("team")

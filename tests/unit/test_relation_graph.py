"""The relation graph view restored from its saved bytes answers as the graph it was saved
from, decoding them only when first used."""

from __future__ import annotations

from membrane_es.projections.relation_graph import RelationGraph
from membrane_es.schema import Relation


def _built(relations: list[tuple[str, Relation]]) -> RelationGraph:
    graph = RelationGraph()
    for source_id, relation in relations:
        graph.add(source_id, relation)
    return graph


RELATIONS = [
    ("a", Relation(predicate="supports", target_id="t")),
    ("b", Relation(predicate="supports", target_id="t", weight=0.5)),
    ("a", Relation(predicate="cites", target_id="u")),
    ("c", Relation(predicate="supports", target_id="t")),
    ("a", Relation(predicate="supports", target_id="t", weight=0.25)),  # replaces a's first
]
LATER = [("d", Relation(predicate="cites", target_id="t")), ("a", RELATIONS[2][1])]


def test_a_restored_graph_keeps_its_bytes_until_used_then_answers_as_the_saved_one() -> None:
    saved = _built(RELATIONS)
    restored = RelationGraph()
    restored.restore_later(saved.encoded())
    assert restored.encoded() == saved.encoded()  # written back as read, nothing decoded
    assert restored.outgoing == saved.outgoing
    assert restored.incoming == saved.incoming
    assert restored.sources("t") == [("a", "supports"), ("b", "supports"), ("c", "supports")]
    assert restored.relations("a") == saved.relations("a")


def test_relations_added_before_first_use_follow_the_saved_ones() -> None:
    restored = RelationGraph()
    restored.restore_later(_built(RELATIONS).encoded())
    for source_id, relation in LATER:
        restored.add(source_id, relation)
    whole = _built(RELATIONS + LATER)
    assert restored.outgoing == whole.outgoing
    assert restored.incoming == whole.incoming
    assert restored.encoded() == whole.encoded()

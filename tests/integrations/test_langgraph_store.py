"""MembraneStore's behaviour: what LangGraph's own store tests ask of every store (batches,
namespaces, filters, semantic search, embedding paths), and what membrane_es adds (trust,
revisions and retractions, history, ``as_of``, durability, bad input)."""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from membrane_es import (
    AccessDeniedError,
    Membrane,
    ReadOnlyError,
    Sensitivity,
    TrustContext,
    ValidationError,
)
from membrane_es.integrations.langgraph_store import MembraneStore, Revision
from tests.integrations.langgraph_support import (
    CharacterEmbeddings,
    index_config,
    membrane_store,
)


@pytest.fixture
def store() -> Iterator[MembraneStore]:
    with membrane_store() as made:
        yield made


@pytest.fixture
def vector_store() -> Iterator[MembraneStore]:
    with membrane_store(index=index_config(["text"])) as made:
        yield made


def _keys(items: list[Any]) -> list[str]:
    return [item.key for item in items]


def _events(memory: Membrane) -> int:
    return int(memory.get_metrics()["total_audit_entries"])


# --- batches --------------------------------------------------------------------------------


def test_a_batch_answers_in_order_and_reads_before_its_writes(store: MembraneStore) -> None:
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})

    results = store.batch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "bar"), "key2", {"data": "changed"}),
            SearchOp(("test",), filter={"data": "value1"}),
            ListNamespacesOp(),
            GetOp(("test",), "key3"),
            PutOp(("test",), "key3", {"data": "value3"}),
            GetOp(("test", "bar"), "key2"),
        ]
    )

    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
    assert results[1] is None
    assert _keys(results[2]) == ["key1"]  # type: ignore[arg-type]
    assert results[3] == [("test", "bar"), ("test", "foo")]
    assert results[4] is None and results[5] is None
    assert isinstance(results[6], Item) and results[6].value == {"data": "value2"}  # before
    assert store.get(("test", "bar"), "key2").value == {"data": "changed"}  # type: ignore[union-attr]
    assert store.get(("test",), "key3").value == {"data": "value3"}  # type: ignore[union-attr]


def test_a_batchs_writes_are_one_atomic_write_where_the_last_put_of_a_key_wins(
    store: MembraneStore,
) -> None:
    store.batch(
        [
            PutOp(("test",), "key1", {"data": "first"}),
            PutOp(("test",), "key2", {"data": "value2"}),
            PutOp(("test",), "key1", {"data": "last"}),
            PutOp(("test",), "key3", None),  # deleting what is not there: nothing
        ]
    )

    assert store.get(("test",), "key1").value == {"data": "last"}  # type: ignore[union-attr]
    assert store.get(("test",), "key3") is None
    assert len(store.history(("test",), "key1")) == 1


def test_abatch_and_the_async_methods(vector_store: MembraneStore) -> None:
    async def scenario() -> None:
        await vector_store.aput(("docs",), "a", {"text": "apples and pears"})
        await vector_store.aput(("docs",), "b", {"text": "zebra zone"})
        assert (await vector_store.aget(("docs",), "a")).value == {"text": "apples and pears"}  # type: ignore[union-attr]
        found = await vector_store.asearch(("docs",), query="pears and apples")
        assert _keys(found) == ["a", "b"]
        assert await vector_store.alist_namespaces() == [("docs",)]
        await vector_store.adelete(("docs",), "a")
        assert await vector_store.aget(("docs",), "a") is None

    asyncio.run(scenario())


# --- get, put, delete -----------------------------------------------------------------------


def test_put_get_update_delete(store: MembraneStore) -> None:
    store.put(("test", "documents"), "doc1", {"title": "Test", "content": "Hello"})
    first = store.get(("test", "documents"), "doc1")
    time.sleep(0.002)
    store.put(("test", "documents"), "doc1", {"title": "Updated", "content": "Hi"})
    second = store.get(("test", "documents"), "doc1")

    assert first is not None and second is not None
    assert (second.namespace, second.key) == (("test", "documents"), "doc1")
    assert second.value == {"title": "Updated", "content": "Hi"}
    assert second.created_at == first.created_at  # the item's, kept by every revision
    assert second.updated_at > first.updated_at == first.created_at
    assert store.get(("test", "other"), "doc1") is None
    store.delete(("test", "documents"), "doc1")
    assert store.get(("test", "documents"), "doc1") is None
    assert store.list_namespaces() == []


def test_values_are_json_objects_of_any_shape(store: MembraneStore) -> None:
    value = {"nested": {"list": [1, 2.5, None, True, {"deep": "ünïcødé 中文"}]}, "empty": {}}
    store.put(("test",), "key", value)
    store.put(("test",), "tuple", {"pair": (1, 2)})

    assert store.get(("test",), "key").value == value  # type: ignore[union-attr]
    assert store.get(("test",), "tuple").value == {"pair": [1, 2]}  # type: ignore[union-attr]


def test_a_put_is_a_revision_and_a_delete_a_retraction_in_the_engine(store: MembraneStore) -> None:
    store.put(("users", "1"), "prefs", {"theme": "dark"})
    store.put(("users", "1"), "prefs", {"theme": "light"})
    store.delete(("users", "1"), "prefs")

    changes = store.history(("users", "1"), "prefs")

    assert [c.value for c in changes] == [{"theme": "dark"}, {"theme": "light"}, None]
    assert all(isinstance(c, Revision) and c.actor == "langgraph" for c in changes)
    assert changes[0].at < changes[1].at < changes[2].at
    first, second = changes[0].record_id, changes[1].record_id
    engine = store._memory
    owner = TrustContext(max_sensitivity=Sensitivity.HYPER)
    assert [e.event for e in engine.history(first, trust=owner)] == ["Created", "Superseded"]
    assert [e.event for e in engine.history(second, trust=owner)] == ["Created", "Retracted"]


def test_a_key_put_again_after_its_deletion_is_a_new_item(store: MembraneStore) -> None:
    store.put(("test",), "key", {"v": 1})
    first = store.get(("test",), "key")
    store.delete(("test",), "key")
    store.put(("test",), "key", {"v": 2})
    again = store.get(("test",), "key")

    assert first is not None and again is not None
    assert again.created_at > first.created_at
    assert [c.value for c in store.history(("test",), "key")] == [{"v": 1}, None, {"v": 2}]


# --- as_of ---------------------------------------------------------------------------------


def test_as_of_reads_the_store_as_it_was(vector_store: MembraneStore) -> None:
    vector_store.put(("docs",), "a", {"text": "old text"})
    then = vector_store.get(("docs",), "a")
    assert then is not None
    vector_store.put(("docs",), "a", {"text": "new words"})
    vector_store.put(("docs",), "b", {"text": "later"})
    vector_store.delete(("docs",), "a")

    past = vector_store.as_of(then.updated_at)

    assert past.moment == then.updated_at
    assert past.get(("docs",), "a").value == {"text": "old text"}  # type: ignore[union-attr]
    assert past.get(("docs",), "b") is None
    assert _keys(past.search(("docs",))) == ["a"]
    assert [i.value for i in past.search(("docs",), query="old")] == [{"text": "old text"}]
    assert past.list_namespaces() == [("docs",)]
    assert [c.value for c in past.history(("docs",), "a")] == [{"text": "old text"}]
    with pytest.raises(ReadOnlyError):
        past.put(("docs",), "c", {"text": "no"})
    assert vector_store.get(("docs",), "a") is None  # the store itself is unchanged


def test_as_of_needs_an_aware_moment(store: MembraneStore) -> None:
    with pytest.raises(ValidationError) as info:
        store.as_of("2024-01-01")  # type: ignore[arg-type]
    assert info.value.field == "moment"


# --- durability -----------------------------------------------------------------------------


def test_a_durable_store_reopens_with_its_items_and_their_times(tmp_path: Path) -> None:
    with Membrane.open(tmp_path / "memory", embedder=None) as memory:
        store = MembraneStore(memory, index=index_config(["text"]))
        store.put(("users", "1"), "a", {"text": "first"})
        store.put(("users", "1"), "a", {"text": "second"})
        store.put(("users", "2"), "b", {"text": "other"})
        before = store.get(("users", "1"), "a")

    with Membrane.open(tmp_path / "memory", embedder=None) as memory:
        store = MembraneStore(memory, index=index_config(["text"]))
        after = store.get(("users", "1"), "a")
        assert after == before
        assert _keys(store.search(("users",))) == ["b", "a"]
        assert _keys(store.search(("users",), query="second")) == ["a", "b"]
        store.put(("users", "1"), "a", {"text": "third"})
        assert store.get(("users", "1"), "a").created_at == before.created_at  # type: ignore[union-attr]


# --- namespaces ------------------------------------------------------------------------------

NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
]


@pytest.fixture
def namespaced(store: MembraneStore) -> MembraneStore:
    for i, namespace in enumerate(NAMESPACES):
        store.put(namespace, f"id_{i}", {"data": f"value_{i}"})
    return store


def test_list_namespaces_by_prefix_suffix_and_depth(namespaced: MembraneStore) -> None:
    store = namespaced
    assert store.list_namespaces() == sorted(NAMESPACES)
    assert store.list_namespaces(prefix=("a", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(max_depth=1) == [("a",), ("admin",), ("b",), ("users",)]
    assert store.list_namespaces(prefix=("nope",)) == []


def test_list_namespaces_with_wildcards(namespaced: MembraneStore) -> None:
    store = namespaced
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(suffix=("*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("*", "users")) == [("admin", "users", "789")]


def test_list_namespaces_pages(store: MembraneStore) -> None:
    for i in range(20):
        store.put(("namespace", f"sub_{i:02d}"), "key", {"i": i})

    assert store.list_namespaces(prefix=("namespace",), limit=5, offset=0)[0] == (
        "namespace",
        "sub_00",
    )
    assert store.list_namespaces(prefix=("namespace",), limit=5, offset=5) == [
        ("namespace", f"sub_{i:02d}") for i in range(5, 10)
    ]
    assert store.list_namespaces(prefix=("namespace",), limit=5, offset=18) == [
        ("namespace", "sub_18"),
        ("namespace", "sub_19"),
    ]
    assert store.batch(
        [ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("sub_03",)),))]
    ) == [[("namespace", "sub_03")]]


def test_namespace_labels_are_matched_whole_and_literally(store: MembraneStore) -> None:
    store.put(("test",), "a", {"v": 1})
    store.put(("testing",), "b", {"v": 2})
    store.put(("Test",), "c", {"v": 3})
    store.put(("te%st_",), "d", {"v": 4})
    store.put(("line\n",), "e", {"v": 5})
    store.put(("中文", "ключ"), "f", {"v": 6})

    assert _keys(store.search(("test",))) == ["a"]
    assert _keys(store.search(("te%st_",))) == ["d"]
    assert _keys(store.search(("line\n",))) == ["e"]
    assert _keys(store.search(("中文",))) == ["f"]
    assert len(store.search(())) == 6
    assert store.list_namespaces(prefix=("test",)) == [("test",)]


@pytest.mark.parametrize(
    "namespace",
    [(), ("langgraph", "x"), ("a.b",), ("",), ("ok", 3), ("nul\x00",)],
)
def test_a_bad_namespace_is_langgraphs_error_and_writes_nothing(
    store: MembraneStore, namespace: tuple[Any, ...]
) -> None:
    before = _events(store._memory)
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("fine",), "k", {"v": 1}), PutOp(namespace, "k", {"v": 1})])
    assert _events(store._memory) == before
    assert store.get(("fine",), "k") is None


@pytest.mark.parametrize(
    ("namespace", "key", "field"),
    [
        (("a",), "", "key"),
        (("a",), " \t", "key"),
        ((" ",), "k", "namespace"),
        (("a", "  "), "k", "namespace"),
    ],
)
def test_a_blank_key_or_label_is_refused_by_name_and_reads_find_nothing(
    store: MembraneStore, namespace: tuple[str, ...], key: str, field: str
) -> None:
    before = _events(store._memory)
    with pytest.raises(ValidationError) as refused:
        store.put(namespace, key, {"v": 1})
    assert refused.value.field == field
    assert _events(store._memory) == before
    assert store.get(namespace, key) is None
    store.delete(namespace, key)  # nothing to delete: nothing happens
    assert _events(store._memory) == before


# --- search without a query -----------------------------------------------------------------


@pytest.fixture
def documents(store: MembraneStore) -> MembraneStore:
    store.put(
        ("test", "docs"), "doc1", {"title": "First", "author": "Alice", "rank": 3, "tags": ["a"]}
    )
    store.put(
        ("test", "docs"), "doc2", {"title": "Second", "author": "Bob", "rank": 5, "tags": ["b"]}
    )
    store.put(
        ("test", "images"),
        "img1",
        {"title": "Image", "author": "Alice", "rank": 1, "meta": {"w": 2}},
    )
    return store


def test_search_by_prefix_newest_first(documents: MembraneStore) -> None:
    assert _keys(documents.search(("test",))) == ["img1", "doc2", "doc1"]
    assert _keys(documents.search(("test", "docs"))) == ["doc2", "doc1"]
    documents.put(("test", "docs"), "doc1", {"title": "First again"})
    assert _keys(documents.search(("test",))) == ["doc1", "img1", "doc2"]
    assert all(item.score is None for item in documents.search(("test",)))


def test_search_filters(documents: MembraneStore) -> None:
    def keys(condition: dict[str, Any]) -> list[str]:
        return sorted(_keys(documents.search(("test",), filter=condition)))

    assert keys({"author": "Alice"}) == ["doc1", "img1"]
    assert keys({"author": "Alice", "rank": 3}) == ["doc1"]
    assert keys({"rank": {"$gt": 1}}) == ["doc1", "doc2"]
    assert keys({"rank": {"$gte": 3, "$lt": 5}}) == ["doc1"]
    assert keys({"rank": {"$lte": 1}}) == ["img1"]
    assert keys({"author": {"$ne": "Alice"}}) == ["doc2"]
    assert keys({"author": {"$eq": "Bob"}}) == ["doc2"]
    assert keys({"tags": ["a"]}) == ["doc1"]
    assert keys({"meta": {"w": 2}}) == ["img1"]
    assert keys({"missing": {"$gt": 0}}) == []
    assert keys({"author": "Carol"}) == []


def test_search_pages(documents: MembraneStore) -> None:
    assert _keys(documents.search(("test",), limit=2)) == ["img1", "doc2"]
    assert _keys(documents.search(("test",), offset=2)) == ["doc1"]
    assert _keys(documents.search(("test",), filter={"author": "Alice"}, limit=1, offset=1)) == [
        "doc1"
    ]
    assert documents.search(("test",), offset=5) == []


# --- semantic search ------------------------------------------------------------------------


def test_semantic_search_ranks_by_similarity_and_scores(vector_store: MembraneStore) -> None:
    vector_store.put(("docs",), "apple", {"text": "apple"})
    vector_store.put(("docs",), "banana", {"text": "banana"})
    vector_store.put(("docs",), "mixed", {"text": "apple banana"})
    vector_store.put(("other",), "apple2", {"text": "apple"})

    found = vector_store.search(("docs",), query="apple")

    assert _keys(found) == ["apple", "mixed", "banana"]
    scores = [item.score for item in found]
    assert scores[0] == pytest.approx(1.0, abs=1e-3)  # vectors kept at half precision
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert _keys(vector_store.search((), query="apple", limit=2)) in (
        ["apple", "apple2"],
        ["apple2", "apple"],
    )


def test_an_updated_item_is_found_by_its_new_text(vector_store: MembraneStore) -> None:
    vector_store.put(("docs",), "doc", {"text": "zebra"})
    vector_store.put(("docs",), "other", {"text": "quantum"})
    vector_store.put(("docs",), "doc", {"text": "quantum physics"})

    found = vector_store.search(("docs",), query="quantum physics")

    assert found[0].key == "doc" and found[0].score == pytest.approx(1.0, abs=1e-3)


def test_semantic_search_with_filters_and_pages(vector_store: MembraneStore) -> None:
    for i, (text, color) in enumerate(
        [("red apple", "red"), ("red car", "red"), ("green apple", "green"), ("apple pie", "red")]
    ):
        vector_store.put(("docs",), f"d{i}", {"text": text, "color": color, "i": i})

    everything = vector_store.search(("docs",), query="red apple", limit=10)
    red = vector_store.search(("docs",), query="red apple", filter={"color": "red"}, limit=10)
    page = vector_store.search(("docs",), query="red apple", limit=2, offset=1)

    assert [i.key for i in red] == [i.key for i in everything if i.value["color"] == "red"]
    assert _keys(page) == _keys(everything)[1:3]
    assert vector_store.search(("docs",), query="red apple", filter={"i": {"$gt": 2}}) == [
        i for i in everything if i.value["i"] > 2
    ]


def test_a_page_past_the_most_one_read_returns_is_still_answered(
    vector_store: MembraneStore,
) -> None:
    # InMemoryStore answers any limit and offset; the engine's own reads stop at 10,000.
    for i in range(3):
        vector_store.put(("docs",), f"d{i}", {"text": f"apple {i}"})
    everything = vector_store.search(("docs",), query="apple", limit=10)
    assert vector_store.search(("docs",), query="apple", limit=10_001) == everything
    assert vector_store.search(("docs",), query="apple", limit=10, offset=10_000) == []
    assert (
        _keys(vector_store.search(("docs",), query="apple", limit=9_999, offset=2))
        == (_keys(everything)[2:])
    )


def test_embedding_paths_the_store_and_each_put_choose() -> None:
    with membrane_store(index=index_config(["body", "tags[*]"])) as store:
        store.put(("docs",), "fields", {"body": "xyz", "tags": ["uvw"], "other": "abc"})
        store.put(("docs",), "own_path", {"body": "xyz", "other": "abc abc"}, index=["other"])
        store.put(("docs",), "not_indexed", {"body": "abc"}, index=False)
        store.put(("docs",), "no_text", {"other": "abc"})

        found = store.search(("docs",), query="abc abc", limit=10)

        assert _keys(found)[0] == "own_path"
        assert {i.key for i in found} == {"fields", "own_path", "not_indexed", "no_text"}
        unscored = [i.key for i in found if i.score is None]
        assert sorted(unscored) == ["no_text", "not_indexed"] and _keys(found)[-2:] == unscored


def test_the_whole_value_is_embedded_by_default() -> None:
    with membrane_store(index=index_config()) as store:
        store.put(("docs",), "a", {"note": "ééé"})
        store.put(("docs",), "b", {"note": "zzz"})
        assert _keys(store.search(("docs",), query='{"note": "ééé"}')) == ["a", "b"]


def test_a_query_without_an_index_is_a_plain_search(documents: MembraneStore) -> None:
    assert _keys(documents.search(("test",), query="Alice")) == ["img1", "doc2", "doc1"]


def test_queries_are_embedded_once_per_batch() -> None:
    embeddings = CharacterEmbeddings()
    with membrane_store(index={"dims": embeddings.dims, "embed": embeddings}) as store:
        store.put(("docs",), "a", {"text": "a"})
        calls = embeddings.calls
        store.batch([SearchOp(("docs",), query="q"), SearchOp(("docs",), query="q")])
        assert embeddings.calls == calls + 1


def test_an_embedding_function_is_an_embedder() -> None:
    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [[float(len(t)), 1.0] for t in texts]

    with membrane_store(index={"dims": 2, "embed": embed}) as made:
        made.put(("docs",), "short", {"t": "a"})
        made.put(("docs",), "long", {"t": "a" * 40})
        assert made.search(("docs",), query="a" * 60)[0].key == "long"


def test_an_index_needs_an_engine_without_its_own_embedder() -> None:
    from membrane_es.embedding import HashingEmbedder  # the engine's own, for this test only

    with Membrane.in_memory(embedder=HashingEmbedder()) as memory:
        with pytest.raises(ValidationError) as info:
            MembraneStore(memory, index=index_config())
        assert info.value.field == "index"
        MembraneStore(memory)  # without an index the engine's embedder is the one


# --- trust ---------------------------------------------------------------------------------


def test_a_medium_ceiling_never_returns_a_high_item() -> None:
    with Membrane.in_memory(embedder=None) as memory:
        high = MembraneStore(
            memory,
            trust=TrustContext(max_sensitivity=Sensitivity.HIGH),
            sensitivity="high",
            index=index_config(["text"]),
        )
        high.put(("users", "1"), "secret", {"text": "the code is 1234"})
        high.put(("users", "2"), "secret", {"text": "the code is 5678"})
        low = MembraneStore(memory, index=index_config(["text"]))
        low.put(("users", "1"), "public", {"text": "the code is public"})
        reader = MembraneStore(
            memory,
            trust=TrustContext(max_sensitivity=Sensitivity.MEDIUM),
            index=index_config(["text"]),
        )

        assert high.get(("users", "1"), "secret") is not None
        assert reader.get(("users", "1"), "secret") is None
        assert _keys(reader.search(("users",))) == ["public"]
        assert _keys(reader.search(("users",), query="the code is 1234")) == ["public"]
        assert reader.list_namespaces() == [("users", "1")]
        assert reader.history(("users", "1"), "secret") == []
        with pytest.raises(AccessDeniedError):
            reader.put(("users", "1"), "secret", {"text": "overwritten"})
        with pytest.raises(AccessDeniedError):
            reader.delete(("users", "1"), "secret")
        assert high.get(("users", "1"), "secret").value == {"text": "the code is 1234"}  # type: ignore[union-attr]


def test_trust_scopes_are_the_namespaces_a_store_may_see_and_write() -> None:
    with Membrane.in_memory(embedder=None) as memory:
        everyone = MembraneStore(memory)
        everyone.put(("users", "1"), "k", {"v": 1})
        everyone.put(("users", "2"), "k", {"v": 2})
        one = MembraneStore(memory, trust=TrustContext(scopes=["users.1"]))

        assert one.list_namespaces() == [("users", "1")]
        assert [i.value for i in one.search(("users",))] == [{"v": 1}]
        assert one.get(("users", "2"), "k") is None
        with pytest.raises(ValidationError) as info:
            one.put(("users", "2"), "k", {"v": 3})
        assert info.value.field == "namespace"
        assert everyone.get(("users", "2"), "k").value == {"v": 2}  # type: ignore[union-attr]


def test_a_store_may_not_write_above_its_ceiling() -> None:
    with Membrane.in_memory(embedder=None) as memory:
        with pytest.raises(ValidationError) as info:
            MembraneStore(
                memory, trust=TrustContext(max_sensitivity=Sensitivity.LOW), sensitivity="high"
            )
        assert info.value.field == "sensitivity"


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "field"),
    [
        (PutOp(("ns",), "k", ["not", "a", "dict"]), "value"),  # type: ignore[arg-type]
        (PutOp(("ns",), "k", {1: "key not a string"}), "value"),  # type: ignore[dict-item]
        (PutOp(("ns",), "k", {"v": object()}), "value.v"),
        (PutOp(("ns",), "k", {"v": 2**70}), "value.v"),
        (PutOp(("ns",), 7, {"v": 1}), "key"),  # type: ignore[arg-type]
        (PutOp(("ns",), "k", {"v": 1}, index="text"), "index"),  # type: ignore[arg-type]
        (SearchOp(("ns",), filter={"v": {"$regex": "x"}}), "filter.v"),
        (SearchOp(("ns",), filter={"v": {"$gt": "x"}}), "filter.v"),
        (SearchOp(("ns",), limit=-1), "limit"),
        (SearchOp(("ns",), offset=-2), "offset"),
        (ListNamespacesOp(max_depth=0), "max_depth"),
        (ListNamespacesOp(limit=-1), "limit"),
    ],
)
def test_bad_input_names_its_field_and_writes_nothing(
    store: MembraneStore, op: Any, field: str
) -> None:
    before = _events(store._memory)
    with pytest.raises(ValidationError) as info:
        store.batch([PutOp(("ns",), "first", {"v": 1}), op])
    assert info.value.field == field
    assert _events(store._memory) == before
    assert store.get(("ns",), "first") is None


def test_ttl_is_not_supported(store: MembraneStore) -> None:
    assert store.supports_ttl is False
    with pytest.raises(NotImplementedError):
        store.put(("ns",), "k", {"v": 1}, ttl=5)
    with pytest.raises(NotImplementedError, match="TTL"):
        store.batch([PutOp(("ns",), "k", {"v": 1}, ttl=5.0)])
    assert store.get(("ns",), "k") is None
    store.put(("ns",), "k", {"v": 1}, ttl=None)
    assert store.get(("ns",), "k") is not None


def test_bad_construction_arguments_name_their_field() -> None:
    with Membrane.in_memory(embedder=None) as memory:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"trust": "high"}, "trust"),
            ({"sensitivity": "secret"}, "sensitivity"),
            ({"actor": ""}, "actor"),
            ({"index": {"dims": 0, "embed": CharacterEmbeddings()}}, "index.dims"),
            ({"index": {"dims": 4}}, "index.embed"),
        ]
        for kwargs, field in cases:
            with pytest.raises(ValidationError) as info:
                MembraneStore(memory, **kwargs)
            assert info.value.field == field
        with pytest.raises(ValidationError) as info:
            MembraneStore("./memory")  # type: ignore[arg-type]
        assert info.value.field == "memory"


def test_an_embedder_of_the_wrong_width_is_refused_before_writing() -> None:
    with membrane_store(index={"dims": 3, "embed": CharacterEmbeddings()}) as store:
        with pytest.raises(ValidationError) as info:
            store.put(("docs",), "a", {"text": "x"})
        assert info.value.field == "index.embed"
        assert store.list_namespaces() == []


# --- several writers ---------------------------------------------------------------------


def test_stores_sharing_an_engine_see_each_others_writes() -> None:
    with Membrane.in_memory(embedder=None) as memory:
        first, second = MembraneStore(memory), MembraneStore(memory)
        first.put(("users", "1"), "k", {"v": 1})
        assert second.get(("users", "1"), "k").value == {"v": 1}  # type: ignore[union-attr]
        second.put(("users", "1"), "k", {"v": 2})
        second.put(("users", "2"), "k", {"v": 3})
        memory.capture_memory({"text": "not an item"}, source_kind="event", scope="users.1")

        assert first.get(("users", "1"), "k").value == {"v": 2}  # type: ignore[union-attr]
        assert first.list_namespaces() == [("users", "1"), ("users", "2")]
        first.put(("users", "1"), "k", {"v": 4})  # revises the record second wrote
        second.delete(("users", "2"), "k")

        assert [i.value for i in first.search(("users",))] == [{"v": 4}]
        assert [c.value for c in second.history(("users", "1"), "k")] == [
            {"v": 1},
            {"v": 2},
            {"v": 4},
        ]


def test_without_langgraph_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.store.base", None)  # as if not installed
    for name in [m for m in sys.modules if m.startswith("membrane_es.integrations.")]:
        monkeypatch.delitem(sys.modules, name)

    with pytest.raises(ImportError, match=r"pip install 'membrane-es\[langgraph\]'"):
        importlib.import_module("membrane_es.integrations.langgraph_store")
    importlib.import_module("membrane_es.integrations")  # the package itself needs none

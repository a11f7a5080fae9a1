"""Adapters sharing one engine: several objects, threads (and, in ``test_shared_processes``,
processes) writing the same keys. Interleavings are forced deterministically — an embedder
whose hook lets another object write between an adapter's read and its write — and left to
threads; every answer is compared with the framework's own reference store (``InMemoryStore``,
``SQLiteSession``, ``InMemoryVectorStore``) given the same operations in the same order.

What must hold: the last write wins, a pop removes exactly one item once, no key or id ever
has two live records, and a read sees every write acknowledged before it started.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agents.memory import SQLiteSession
from langchain_core.documents import Document
from langchain_core.indexing import InMemoryRecordManager, index
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.store.memory import InMemoryStore

from membrane_es import Membrane, ValidationError
from membrane_es.integrations.langchain_vectorstore import LangChainEmbedder, MembraneVectorStore
from membrane_es.integrations.langgraph_store import MembraneStore
from membrane_es.integrations.openai_agents_session import MembraneSession
from tests.integrations.shared_support import Angles, Hooked

NS = ("ns",)


@pytest.fixture
def memory() -> Iterator[Membrane]:
    with Membrane.in_memory(embedder=None) as engine:
        yield engine


def live_items(memory: Membrane) -> list[tuple[tuple[str, ...], str]]:
    """Every live item's key, as a fresh store reads the engine (a twin shows twice)."""
    return sorted((tuple(i.namespace), i.key) for i in MembraneStore(memory).search(NS, limit=1000))


def run_threads(*work: Callable[[], None]) -> None:
    """Run each in a thread of its own; re-raise the first error any of them raised."""
    errors: list[BaseException] = []

    def guarded(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(job,)) for job in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


# --- LangGraph store --------------------------------------------------------------------


def stores(memory: Membrane, embedder: Hooked) -> tuple[MembraneStore, MembraneStore]:
    config = {"dims": 3, "embed": embedder}
    return MembraneStore(memory, index=config), MembraneStore(memory, index=config)  # type: ignore[arg-type]


def test_a_put_racing_another_stores_put_is_the_last_write(memory: Membrane) -> None:
    embedder = Hooked()
    s1, s2 = stores(memory, embedder)
    s1.put(NS, "k", {"v": 0})
    embedder.hook = lambda: s2.put(NS, "k", {"v": "s2"})
    s1.put(NS, "k", {"v": "s1"})  # s2 replaced what s1 read: s1 writes on top of it
    for reader in (s1, s2, MembraneStore(memory)):
        item = reader.get(NS, "k")
        assert item is not None and item.value == {"v": "s1"}
    assert live_items(memory) == [(NS, "k")]


def test_a_put_racing_a_delete_or_a_re_put_leaves_one_live_item(memory: Membrane) -> None:
    embedder = Hooked()
    s1, s2 = stores(memory, embedder)
    s1.put(NS, "k", {"v": 0})
    embedder.hook = lambda: s2.delete(NS, "k")
    s1.put(NS, "k", {"v": "after delete"})
    assert [(s.get(NS, "k") or None) is not None for s in (s1, s2)] == [True, True]
    # Both re-create a deleted key at once: one id for the key's next record, one winner.
    s1.delete(NS, "k")
    embedder.hook = lambda: s1.put(NS, "k", {"v": "s1"})
    s2.put(NS, "k", {"v": "s2"})
    assert live_items(memory) == [(NS, "k")]
    assert {s.get(NS, "k").value["v"] for s in (s1, s2, MembraneStore(memory))} == {"s2"}  # type: ignore[union-attr]
    # A store that never saw the key (made before it existed) re-creates it safely too.
    s3 = MembraneStore(memory)
    s1.delete(NS, "k")
    s2.put(NS, "fresh", {"v": 1})
    s3.put(NS, "k", {"v": "s3"})
    assert live_items(memory) == [(NS, "fresh"), (NS, "k")]


def test_threads_of_two_stores_never_lose_a_write_nor_make_a_twin(memory: Membrane) -> None:
    embedder = Hooked()
    s1, s2 = stores(memory, embedder)
    keys = [f"k{i}" for i in range(5)]

    def writer(store: MembraneStore, name: str) -> Callable[[], None]:
        def work() -> None:
            for n in range(20):
                key = keys[n % len(keys)]
                store.put(NS, key, {"by": name, "n": n})
                item = store.get(NS, key)  # its own write, or a later one: never older
                assert item is not None
                if n % 7 == 6:
                    store.delete(NS, key)

        return work

    run_threads(writer(s1, "s1"), writer(s2, "s2"))
    fresh = MembraneStore(memory)
    assert len(live_items(memory)) == len({k for _, k in live_items(memory)})
    for key in keys:  # every store agrees with a fresh read of the engine
        assert s1.get(NS, key) == s2.get(NS, key) == fresh.get(NS, key)


@pytest.mark.parametrize("seed", range(20))
def test_two_stores_answer_as_one_in_memory_store(memory: Membrane, seed: int) -> None:
    """Operations alternating at random between two stores on one engine, against one
    ``InMemoryStore``: each store sees the other's writes at once (no stale read)."""
    rng = random.Random(seed)
    ours = [MembraneStore(memory), MembraneStore(memory)]
    reference = InMemoryStore()
    for _ in range(40):
        store = rng.choice(ours)
        key, namespace = f"k{rng.randrange(4)}", rng.choice([("a",), ("a", "b"), ("c",)])
        roll = rng.random()
        if roll < 0.45:
            value = {"n": rng.randrange(100)}
            store.put(namespace, key, value)
            reference.put(namespace, key, value)
        elif roll < 0.6:
            store.delete(namespace, key)
            reference.delete(namespace, key)
        elif roll < 0.85:
            mine, theirs = store.get(namespace, key), reference.get(namespace, key)
            assert (mine and mine.value) == (theirs and theirs.value)
        else:
            prefix = namespace[:1]
            mine_found = {(tuple(i.namespace), i.key, str(i.value)) for i in store.search(prefix)}
            theirs_found = {
                (tuple(i.namespace), i.key, str(i.value)) for i in reference.search(prefix)
            }
            assert mine_found == theirs_found
            # (InMemoryStore lists a namespace whose items were all deleted; a store on
            # a database, as this one, does not: compared with a fresh store instead.)
            assert store.list_namespaces() == MembraneStore(memory).list_namespaces()


def test_a_store_follows_other_writers_without_reading_everything(memory: Membrane) -> None:
    s1, s2 = MembraneStore(memory), MembraneStore(memory)
    for i in range(30):
        s1.put(NS, f"k{i}", {"i": i})
    assert s2.get(NS, "k0") is not None
    calls = 0
    retrieve = memory.retrieve

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return retrieve(*args, **kwargs)

    memory.retrieve = counted  # type: ignore[method-assign]
    try:
        s1.put(NS, "k1", {"i": "new"})
        item = s2.get(NS, "k1")
    finally:
        del memory.retrieve
    assert item is not None and item.value == {"i": "new"}
    assert calls == 0  # the one record the write touched was read by id, nothing listed


# --- OpenAI Agents session --------------------------------------------------------------


def test_a_session_sees_what_another_wrote_from_its_thread(memory: Membrane) -> None:
    a, b = MembraneSession("chat", memory), MembraneSession("chat", memory)

    def adder(session: MembraneSession, name: str) -> Callable[[], None]:
        def work() -> None:
            for i in range(25):
                asyncio.run(session.add_items([{"role": "user", "content": f"{name}{i}"}]))

        return work

    run_threads(adder(a, "a"), adder(b, "b"))
    for session in (a, b, MembraneSession("chat", memory)):
        assert len(asyncio.run(session.get_items())) == 50


def test_two_sessions_popping_take_each_item_once(memory: Membrane) -> None:
    a, b = MembraneSession("chat", memory), MembraneSession("chat", memory)
    asyncio.run(a.add_items([{"content": str(i)} for i in range(20)]))
    taken: list[list[Any]] = [[], []]

    def popper(session: MembraneSession, into: list[Any]) -> Callable[[], None]:
        def work() -> None:
            for _ in range(10):
                into.append(asyncio.run(session.pop_item()))

        return work

    run_threads(popper(a, taken[0]), popper(b, taken[1]))
    popped = [item["content"] for item in taken[0] + taken[1]]
    assert sorted(popped, key=int) == [str(i) for i in range(20)]
    assert asyncio.run(MembraneSession("chat", memory).get_items()) == []


def test_a_pop_racing_another_takes_the_item_before(memory: Membrane) -> None:
    a, b = MembraneSession("chat", memory), MembraneSession("chat", memory)
    asyncio.run(a.add_items([{"content": "1"}, {"content": "2"}, {"content": "3"}]))
    assert len(asyncio.run(b.get_items())) == 3
    synced = a._sync
    raced = False

    def sync_then_race() -> Any:
        nonlocal raced
        turns = synced()
        if not raced:  # b pops between a's read of the turns and a's write
            raced = True
            assert asyncio.run(b.pop_item()) == {"content": "3"}
        return turns

    a._sync = sync_then_race  # type: ignore[method-assign]
    assert asyncio.run(a.pop_item()) == {"content": "2"}
    assert asyncio.run(b.get_items()) == [{"content": "1"}]


@pytest.mark.parametrize("seed", range(10))
def test_two_sessions_answer_as_one_sqlite_session(memory: Membrane, seed: int) -> None:
    rng = random.Random(seed)
    ours = [MembraneSession("chat", memory), MembraneSession("chat", memory)]
    reference = SQLiteSession("chat")

    async def scenario() -> None:
        for step in range(30):
            session = rng.choice(ours)
            roll = rng.random()
            if roll < 0.4:
                items = [{"content": f"{step}.{i}"} for i in range(rng.randrange(1, 3))]
                await session.add_items(items)
                await reference.add_items(items)  # type: ignore[arg-type]
            elif roll < 0.6:
                assert await session.pop_item() == await reference.pop_item()
            elif roll < 0.65:
                await session.clear_session()
                await reference.clear_session()
            else:
                limit = rng.choice([None, 1, 3])
                assert await session.get_items(limit) == await reference.get_items(limit)

    asyncio.run(scenario())
    reference.close()


def test_session_settings_as_a_dict_close_and_items_sqlite_keeps(memory: Membrane) -> None:
    session = MembraneSession("chat", memory, session_settings={"limit": 2})
    reference = SQLiteSession("chat", session_settings={"limit": 2})
    items: list[Any] = [
        {"a": (1, 2)},
        {"t": "NaN, Infinity: words only"},
        {"b": float("nan")},
        {"c": float("inf")},
        {"d": 1},
    ]

    async def both() -> tuple[list[Any], list[Any]]:
        await session.add_items(items)
        await reference.add_items(items)
        return await session.get_items(), await reference.get_items()

    mine, theirs = asyncio.run(both())
    assert repr(mine) == repr(theirs) == repr([{"c": float("inf")}, {"d": 1}])
    assert repr(asyncio.run(session.get_items(5))) == repr(asyncio.run(reference.get_items(5)))
    session.close()
    reference.close()
    assert len(asyncio.run(session.get_items(None))) == 2  # usable after close
    with pytest.raises(ValidationError) as error:
        MembraneSession("chat", memory, session_settings={"limit": "2"})
    assert error.value.field == "session_settings.limit"


# --- LangChain vector store -------------------------------------------------------------


@pytest.fixture
def hooked() -> Hooked:
    return Hooked()


@pytest.fixture
def vector_memory(hooked: Hooked) -> Iterator[Membrane]:
    with Membrane.in_memory(embedder=LangChainEmbedder(hooked)) as engine:
        yield engine


def test_a_re_add_racing_another_store_leaves_no_twin(
    vector_memory: Membrane, hooked: Hooked
) -> None:
    v1, v2 = MembraneVectorStore(vector_memory, hooked), MembraneVectorStore(vector_memory, hooked)
    v1.add_texts(["one"], ids=["doc1"])
    v2.add_texts(["two"], ids=["doc2"])
    assert [d.page_content for d in v1.get_by_ids(["doc2"])] == ["two"]  # another's write
    hooked.hook = lambda: v2.add_texts(["two by v2"], ids=["doc2"])
    v1.add_texts(["two by v1"], ids=["doc2"])
    found = v1.similarity_search("x", k=10)
    assert sorted(d.id or "" for d in found) == ["doc1", "doc2"]
    assert [d.page_content for d in v2.get_by_ids(["doc2"])] == ["two by v1"]
    v2.delete(["doc2"])
    assert v1.get_by_ids(["doc2"]) == [] and len(v1.similarity_search("x", k=10)) == 1


def test_threads_re_adding_the_same_ids_leave_one_document_each(
    vector_memory: Membrane, hooked: Hooked
) -> None:
    v1, v2 = MembraneVectorStore(vector_memory, hooked), MembraneVectorStore(vector_memory, hooked)
    ids = [f"doc{i}" for i in range(50)]

    def adder(store: MembraneVectorStore, name: str) -> Callable[[], None]:
        def work() -> None:
            for round_ in range(25):
                chosen = ids[round_ * 2 : round_ * 2 + 2] or ids[:2]
                store.add_texts([f"{name} {round_}" for _ in chosen], ids=chosen)

        return work

    run_threads(adder(v1, "v1"), adder(v2, "v2"))
    found = MembraneVectorStore(vector_memory, hooked).similarity_search("x", k=500)
    assert sorted(d.id or "" for d in found) == sorted(ids)


@pytest.mark.parametrize("seed", range(25))
def test_search_ranks_as_in_memory_vector_store_whatever_the_sign(seed: int) -> None:
    rng = random.Random(seed)
    embedding = Angles()
    reference = InMemoryVectorStore(embedding)
    with Membrane.in_memory(embedder=LangChainEmbedder(embedding)) as engine:
        ours = [MembraneVectorStore(engine, embedding), MembraneVectorStore(engine, embedding)]
        for step in range(12):
            ids = [f"d{rng.randrange(8)}"]
            text = [f"{rng.uniform(0, 360):.3f} step {step}"]
            rng.choice(ours).add_texts(text, ids=ids)
            reference.add_texts(text, ids=ids)
            if rng.random() < 0.2:
                gone = [f"d{rng.randrange(8)}"]
                rng.choice(ours).delete(gone)
                reference.delete(gone)
        query = f"{rng.uniform(0, 360):.3f}"
        k = rng.randrange(1, 6)
        mine = [d.id for d in rng.choice(ours).similarity_search(query, k=k)]
        assert mine == [d.id for d in reference.similarity_search(query, k=k)]
        mmr = rng.choice(ours).max_marginal_relevance_search(query, k=3, fetch_k=6)
        theirs = reference.max_marginal_relevance_search(query, k=3, fetch_k=6)
        assert [d.id for d in mmr] == [d.id for d in theirs]


def test_a_negative_similarity_ranks_by_closeness() -> None:
    embedding = Angles()
    with Membrane.in_memory(embedder=LangChainEmbedder(embedding)) as engine:
        store = MembraneVectorStore(engine, embedding)
        store.add_texts(["95.7 close", "174.3 far"], ids=["close", "far"])  # cos -0.1, -0.995
        ((best, score),) = store.similarity_search_with_score("0", k=1)
        assert best.id == "close" and score == pytest.approx(-0.1, abs=1e-2)


def test_langchain_indexing_writes_through_the_store(
    vector_memory: Membrane, hooked: Hooked
) -> None:
    manager = InMemoryRecordManager("membrane")
    manager.create_schema()
    store = MembraneVectorStore(vector_memory, hooked)
    docs = [Document(page_content=f"text {i}", metadata={"source": f"s{i}"}) for i in range(3)]
    result = index(
        docs, manager, store, cleanup="full", source_id_key="source", key_encoder="sha256"
    )
    assert result["num_added"] == 3
    again = index(
        docs[:2], manager, store, cleanup="full", source_id_key="source", key_encoder="sha256"
    )
    assert (again["num_skipped"], again["num_deleted"]) == (2, 1)
    assert len(store.similarity_search("text", k=10)) == 2


def test_operator_filters_as_chroma_writes_them(vector_memory: Membrane, hooked: Hooked) -> None:
    store = MembraneVectorStore(vector_memory, hooked)
    store.add_texts(
        ["a", "b", "c"], [{"n": 0, "k": "x"}, {"n": 1, "k": "y"}, {"n": 2}], ids=["a", "b", "c"]
    )

    def ids(condition: dict[str, Any]) -> list[str]:
        return sorted(d.id or "" for d in store.similarity_search("q", k=10, filter=condition))

    assert ids({"n": {"$gte": 1}}) == ["b", "c"]
    assert ids({"k": {"$in": ["x", "z"]}}) == ["a"]
    assert ids({"k": {"$ne": "x"}}) == ["b", "c"]
    assert ids({"k": {"$nin": ["x"]}}) == ["b", "c"]
    assert ids({"$and": [{"n": {"$gt": 0}}, {"n": {"$lt": 2}}]}) == ["b"]
    assert ids({"$or": [{"n": 0}, {"n": {"$eq": 2}}]}) == ["a", "c"]
    with pytest.raises(ValidationError):
        ids({"n": {"$gte": "one"}})

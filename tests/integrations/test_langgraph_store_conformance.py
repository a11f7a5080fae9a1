"""MembraneStore against LangGraph's own ``InMemoryStore``: random sequences of puts,
deletes, gets, searches (namespace prefix, filter, limit/offset, semantic query) and namespace
listings, run on both, must give the same answers.

Where LangGraph leaves an order to the store, the test compares what it defines:

* a search without a query: the same items; its order is the store's (ours: newest write
  first, as LangGraph's PostgreSQL and SQLite stores), so a page must be that order's slice
  and as long as the oracle's page;
* a semantic search: the same items with the same scores (the log keeps vectors at half
  precision: equal within 1e-3), and every page the same scores in the same order (items
  whose scores tie may swap);
* namespace listings are sorted by LangGraph's contract, so they must be equal outright.
  ``InMemoryStore`` keeps listing a namespace once its last item is deleted (and one a get
  merely looked in); LangGraph's durable stores list only namespaces holding an item, as
  ours does, so the oracle's empty namespaces are dropped before it is asked.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import Item, SearchItem
from langgraph.store.memory import InMemoryStore

from membrane_es.integrations.langgraph_store import MembraneStore
from tests.integrations.langgraph_support import index_config, membrane_store

TOLERANCE = 1e-3
EVERYTHING = 10_000

labels = st.sampled_from(["a", "b", "ab", "é", "x y"])
namespaces = st.lists(labels, min_size=1, max_size=3).map(tuple)
prefixes = st.lists(labels, min_size=0, max_size=2).map(tuple)
keys = st.sampled_from(["k1", "k2", "k3", "ключ"])
texts = st.text(alphabet="abcdeé 中", min_size=1, max_size=8)
values = st.fixed_dictionaries(
    {"text": texts, "n": st.integers(0, 5)},
    optional={"tag": st.sampled_from(["x", "y"]), "meta": st.fixed_dictionaries({"k": keys})},
)
filters = st.one_of(
    st.none(),
    st.fixed_dictionaries({"tag": st.sampled_from(["x", "y"])}),
    st.fixed_dictionaries({"n": st.integers(0, 5)}),
    st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$ne"]), st.integers(0, 5)).map(
        lambda comparison: {"n": dict([comparison])}
    ),
    st.fixed_dictionaries({"meta": st.fixed_dictionaries({"k": keys})}),
)
operations = st.one_of(
    st.tuples(st.just("put"), namespaces, keys, values),
    st.tuples(st.just("put"), namespaces, keys, values),  # writes twice as often as the rest
    st.tuples(st.just("delete"), namespaces, keys),
    st.tuples(st.just("get"), namespaces, keys),
    st.tuples(
        st.just("search"),
        prefixes,
        filters,
        st.integers(1, 5),
        st.integers(0, 3),
        st.one_of(st.none(), texts),
    ),
    st.tuples(
        st.just("list"),
        st.one_of(st.none(), prefixes),
        st.one_of(st.none(), st.lists(labels, min_size=1, max_size=2).map(tuple)),
        st.one_of(st.none(), st.integers(1, 3)),
        st.integers(1, 6),
        st.integers(0, 3),
    ),
)


def _key(item: Item) -> tuple[tuple[str, ...], str, str]:
    return tuple(item.namespace), item.key, json.dumps(item.value, sort_keys=True)


def _drop_empty_namespaces(oracle: InMemoryStore) -> None:
    for namespace in [ns for ns, items in oracle._data.items() if not items]:
        del oracle._data[namespace]


def _same_scores(ours: list[SearchItem], theirs: list[SearchItem]) -> None:
    assert len(ours) == len(theirs)
    for mine, other in zip(ours, theirs, strict=True):
        assert mine.score is not None and other.score is not None
        assert abs(mine.score - other.score) <= TOLERANCE


def _check_search(ours: MembraneStore, oracle: InMemoryStore, op: tuple[Any, ...]) -> None:
    _, prefix, condition, limit, offset, query = op
    full = ours.search(prefix, query=query, filter=condition, limit=EVERYTHING)
    expected = oracle.search(prefix, query=query, filter=condition, limit=EVERYTHING)
    assert sorted(map(_key, full)) == sorted(map(_key, expected))
    page = ours.search(prefix, query=query, filter=condition, limit=limit, offset=offset)
    their_page = oracle.search(prefix, query=query, filter=condition, limit=limit, offset=offset)
    if query is None:
        assert [_key(i) for i in page] == [_key(i) for i in full[offset : offset + limit]]
        assert len(page) == len(their_page)
        assert [i.updated_at for i in full] == sorted((i.updated_at for i in full), reverse=True)
        return
    scores = {_key(i): i.score for i in expected}
    for item in full:
        assert item.score is not None
        assert abs(item.score - scores[_key(item)]) <= TOLERANCE  # type: ignore[operator]
    _same_scores(full, expected)
    _same_scores(page, their_page)


def _check_listing(ours: MembraneStore, oracle: InMemoryStore, op: tuple[Any, ...]) -> None:
    _, prefix, suffix, depth, limit, offset = op
    _drop_empty_namespaces(oracle)
    asked = {"prefix": prefix, "suffix": suffix, "max_depth": depth}
    assert ours.list_namespaces(**asked, limit=limit, offset=offset) == oracle.list_namespaces(
        **asked, limit=limit, offset=offset
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(operations, min_size=1, max_size=24))
def test_random_operations_answer_as_langgraphs_in_memory_store(
    ops: list[tuple[Any, ...]],
) -> None:
    oracle = InMemoryStore(index=index_config(["text"]))
    with membrane_store(index=index_config(["text"])) as ours:
        for op in ops:
            kind = op[0]
            if kind == "put":
                ours.put(op[1], op[2], op[3])
                oracle.put(op[1], op[2], op[3])
            elif kind == "delete":
                ours.delete(op[1], op[2])
                oracle.delete(op[1], op[2])
            elif kind == "get":
                mine, theirs = ours.get(op[1], op[2]), oracle.get(op[1], op[2])
                assert (mine and _key(mine)) == (theirs and _key(theirs))
            elif kind == "search":
                _check_search(ours, oracle, op)
            else:
                _check_listing(ours, oracle, op)
        # and at the end, everything
        _check_search(ours, oracle, ("search", (), None, EVERYTHING, 0, None))
        _check_listing(ours, oracle, ("list", None, None, None, EVERYTHING, 0))

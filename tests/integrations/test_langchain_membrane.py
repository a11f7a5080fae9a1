"""What the LangChain vector store adds over LangChain's contract: trust, scopes, tags and types
as filters, revisions, ``as_of``, durability, and bad input refused with nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from membrane_es import Membrane, ReadOnlyError, TrustContext, ValidationError
from membrane_es.embedding import HashingEmbedder
from membrane_es.integrations.langchain_vectorstore import LangChainEmbedder, MembraneVectorStore

EMBEDDING = DeterministicFakeEmbedding(size=16)
EVERYTHING = TrustContext(max_sensitivity="hyper")


@pytest.fixture
def memory() -> Iterator[Membrane]:
    with Membrane.in_memory(embedder=LangChainEmbedder(EMBEDDING)) as engine:
        yield engine


def store(memory: Membrane, **options: object) -> MembraneVectorStore:
    return MembraneVectorStore(memory, EMBEDDING, **options)  # type: ignore[arg-type]


def total(memory: Membrane) -> int:
    return int(memory.get_metrics()["total_records"])


def test_a_caller_never_reads_above_its_ceiling(memory: Membrane) -> None:
    store(memory, trust=EVERYTHING, sensitivity="high").add_texts(["launch codes"], ids=["h"])
    store(memory, trust=EVERYTHING, sensitivity="low").add_texts(["lunch menu"], ids=["l"])
    medium = store(memory, trust=TrustContext(max_sensitivity="medium"))
    assert [d.id for d in medium.similarity_search("launch codes", k=10)] == ["l"]
    assert medium.get_by_ids(["h", "l"]) == [Document(id="l", page_content="lunch menu")]


def test_a_write_the_caller_could_not_read_back_is_refused(memory: Membrane) -> None:
    with pytest.raises(ValidationError) as error:
        store(memory, trust=TrustContext(max_sensitivity="medium"), sensitivity="high")
    assert error.value.field == "sensitivity"
    with pytest.raises(ValidationError) as error:
        store(memory, trust=TrustContext(scopes=["team:a"]), scope="team:b")
    assert error.value.field == "scope"
    assert total(memory) == 0


@pytest.mark.parametrize(
    ("texts", "metadatas", "ids", "field"),
    [
        (["a", "b"], [{}, {"when": datetime.now(UTC)}], None, "metadatas[1]"),
        (["a", "b"], [{}], None, "metadatas"),
        (["a", "b"], None, ["1"], "ids"),
        (["a", 7], None, None, "texts[1]"),
        (["a"], [{1: "x"}], None, "metadatas[0]"),
    ],
)
def test_bad_input_names_its_field_and_writes_nothing(
    memory: Membrane,
    texts: list[str],
    metadatas: list[dict[str, object]] | None,
    ids: list[str] | None,
    field: str,
) -> None:
    with pytest.raises(ValidationError) as error:
        store(memory).add_texts(texts, metadatas, ids=ids)
    assert error.value.field == field
    assert total(memory) == 0


def test_filters_map_onto_scopes_tags_types_and_metadata(memory: Membrane) -> None:
    store(memory, scope="team:a", tags=["runbook"]).add_texts(
        ["restart the queue", "drain the node"], [{"step": 1}, {"step": 2}], ids=["a1", "a2"]
    )
    store(memory, scope="team:b").add_texts(["rotate the keys"], [{"step": 1}], ids=["b1"])
    memory.capture_memory({"text": "the queue stalled at noon"}, scope="team:a")
    reader = store(memory, all_scopes=True)

    def ids(**search: object) -> list[str | None]:
        return sorted(d.id or "" for d in reader.similarity_search("queue", k=10, **search))

    assert ids(filter={"scope": "team:a", "type": "semantic"}) == ["a1", "a2"]
    assert ids(filter={"scope": ["team:b"]}) == ["b1"]
    assert ids(filter={"tags": ["runbook"], "step": 2}) == ["a2"]
    assert ids(filter={"step": 1}) == ["a1", "b1"]
    assert ids(filter=lambda doc: doc.metadata.get("step") == 2) == ["a2"]
    (turn,) = reader.similarity_search("queue", k=10, filter={"type": "episodic"})
    assert turn.metadata["type"] == "episodic" and "stalled" in turn.page_content
    scoped = store(memory, trust=TrustContext(scopes=["team:a"]))
    assert (
        sorted(d.id or "" for d in scoped.similarity_search("q", k=10, filter={"scope": "team:b"}))
        == []
    )
    # A store searches its own scope unless widened, as a collection is its own world.
    own = store(memory, scope="team:b")
    assert sorted(d.id or "" for d in own.similarity_search("queue", k=10)) == ["b1"]
    assert sorted(d.id or "" for d in store(memory).similarity_search("queue", k=10)) == []
    for bad in ({"type": "poem"}, {"scope": 3}, "team:a", {"n": {"$near": 1}}, {"$or": 1}):
        with pytest.raises(ValidationError, match="filter"):
            reader.similarity_search("queue", filter=bad)  # type: ignore[arg-type]


def test_a_re_add_is_a_revision_readable_as_of_before(memory: Membrane) -> None:
    docs = store(memory)
    docs.add_texts(["deploys go to staging"], [{"v": 1}], ids=["deploy"])
    before = datetime.now(UTC)
    docs.add_texts(["deploys go to production"], [{"v": 2}], ids=["deploy"])
    docs.add_texts(["deploys go to production"], [{"v": 2}], ids=["deploy"])  # unchanged: no-op
    (now,) = docs.get_by_ids(["deploy"])
    (then,) = docs.as_of(before).get_by_ids(["deploy"])
    assert (now.page_content, then.page_content) == (
        "deploys go to production",
        "deploys go to staging",
    )
    events = [(entry.event, entry.rationale) for entry in docs.history("deploy")]
    assert [event for event, _ in events].count("Created") == 2
    assert any("document revised" in rationale for _, rationale in events)
    docs.delete(["deploy"])
    assert docs.get_by_ids(["deploy"]) == []
    assert docs.as_of(before).similarity_search("deploys", k=5)[0].id == "deploy"
    with pytest.raises(ReadOnlyError):
        docs.as_of(before).add_texts(["x"])


def test_scores_are_cosines_and_the_retriever_ranks_by_them(memory: Membrane) -> None:
    docs = store(memory)
    docs.add_texts(["alpha", "beta", "gamma"], ids=["a", "b", "c"])
    (best, score), *_ = docs.similarity_search_with_score("beta", k=3)
    assert best.id == "b" and score == pytest.approx(
        1.0, abs=1e-3
    )  # vectors kept at half precision
    assert [d.id for d in docs.as_retriever(search_kwargs={"k": 1}).invoke("gamma")] == ["c"]


def test_documents_survive_a_reopen_and_revise_in_place(tmp_path: Path) -> None:
    with MembraneVectorStore.open(tmp_path, EMBEDDING) as docs:
        docs.add_texts(["first"], [{"n": 1}], ids=["x"])
    with MembraneVectorStore.open(tmp_path, EMBEDDING) as docs:
        assert docs.get_by_ids(["x"]) == [Document(id="x", page_content="first", metadata={"n": 1})]
        docs.add_texts(["second"], ids=["x"])
        assert [d.page_content for d in docs.similarity_search("first", k=5)] == ["second"]


def test_an_engine_with_another_embedder_is_refused() -> None:
    with (
        Membrane.in_memory(embedder=HashingEmbedder()) as engine,
        pytest.raises(ValidationError) as error,
    ):
        MembraneVectorStore(engine, EMBEDDING)
    assert error.value.field == "embedding"


def test_a_search_fills_k_past_records_shown_only_redacted(memory: Membrane) -> None:
    # one level above the reader's ceiling the engine returns redacted copies: never shown
    store(memory, trust=EVERYTHING, sensitivity="medium").add_texts(["same words"] * 6)
    store(memory).add_texts(["other words", "more words"], ids=["x", "y"])
    found = store(memory).similarity_search("same words", k=2)
    assert sorted(d.id or "" for d in found) == ["x", "y"]


def test_from_texts_and_delete_everything(memory: Membrane) -> None:
    docs = MembraneVectorStore.from_texts(["a", "b"], EMBEDDING, ids=["1", "2"], memory=memory)
    assert len(docs.similarity_search("a", k=5)) == 2
    docs.delete()
    assert docs.similarity_search("a", k=5) == []
    assert len(docs.as_of(datetime.now(UTC)).history("1")) == 2  # created, then retracted


def test_k_past_the_most_one_read_returns_is_still_answered(memory: Membrane) -> None:
    # LangChain's own stores answer any k; the engine's reads stop at 10,000, and a filtered
    # search that widens past that asks for every candidate instead.
    texts = store(memory)
    texts.add_texts(["apple", "pear", "plum"], metadatas=[{"n": 0}, {"n": 1}, {"n": 2}])
    assert len(texts.similarity_search("apple", k=10_001)) == 3
    assert [d.page_content for d in texts.similarity_search("apple", k=2_501, filter={"n": 2})] == [
        "plum"
    ]
    assert [
        d.page_content
        for d in texts.similarity_search("apple", k=3_000, filter=lambda d: d.metadata["n"] > 0)
    ] == [d.page_content for d in texts.similarity_search("apple", k=3) if d.metadata["n"] > 0]


def test_relevance_scores_stay_within_langchains_range(memory: Membrane) -> None:
    # float32 rounding puts the cosine of a text with itself a little over 1 for "beta".
    texts = store(memory)
    texts.add_texts(["beta"], ids=["b"])
    ((_, score),) = texts.similarity_search_with_relevance_scores("beta", k=1)
    assert 0.0 <= score <= 1.0 and score == pytest.approx(1.0, abs=1e-4)

"""``explain=true`` on an entries search: per entry its BM25, boosts, age decay and the
reciprocal-rank-fusion passes that placed it, consistent with the order returned; an
additive field (absent unless asked, so Arbiter clients see the same shapes)."""

from __future__ import annotations

from typing import Any

import httpx
from pytest import approx

from .conftest import Serve, Served, new_entry
from .test_entries_search import Reverser

DAY = 86_400


def explained(client: httpx.Client, q: str, **params: object) -> dict[str, Any]:
    response = client.get("/v1/memory/entries", params={"q": q, "explain": "true", **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_graduated_search_explains_each_factor_and_pass(served: Served) -> None:
    alpha = served.alpha
    near = new_entry(alpha, type="project", title="deploy orchid", conversation_id=17)
    wide = new_entry(alpha, type="user", title="orchid deploy orchid deploy", tags=["ops"])
    new_entry(alpha, type="project", title="orchid", conversation_id=18)
    served.clock.advance(100 * DAY)  # the older entries decay a step
    fresh = new_entry(alpha, type="reference", title="orchid deploy checklist", tags=["ops"])
    body = explained(
        alpha,
        "orchid deploy",
        conversation_id=17,
        graduated="true",
        type="project",
        tag="ops",
        decay="true",
    )
    entries, explain = body["entries"], body["explain"]
    assert [e["id"] for e in explain] == [e["id"] for e in entries]
    assert [e["rank"] for e in explain] == list(range(1, len(entries) + 1))
    by_id = {e["id"]: e for e in explain}
    assert by_id[near["id"]]["boosts"] == {"type": 1.3, "tag": 1.0, "intent": 1.0}
    assert by_id[wide["id"]]["boosts"] == {"type": 1.0, "tag": 1.2, "intent": 1.0}
    assert by_id[near["id"]]["decay"] == 0.75 and by_id[fresh["id"]]["decay"] == 1.0
    for item in explain:
        boosts = item["boosts"]
        factor = boosts["type"] * boosts["tag"] * boosts["intent"] * item["decay"]
        assert item["bm25"] > 0 and item["score"] == approx(item["bm25"] * factor)
        assert {p["scope"] for p in item["passes"]} <= {"conversation", "tenant"}
        for one in item["passes"]:
            assert one["weight"] == {"conversation": 1.5, "tenant": 1.0}[one["scope"]]
            assert one["contribution"] == approx(one["weight"] / (60 + one["rank"]))
        assert item["rrf"] == approx(sum(p["contribution"] for p in item["passes"]))
        assert item["queries"] == [] and item["reranked"] is False
    fused = [item["rrf"] for item in explain]
    assert fused == sorted(fused, reverse=True)  # the answer is in fused order
    # The conversation pass sees its conversation and unscoped entries, never another's.
    scopes = {p["scope"] for p in by_id[wide["id"]]["passes"]}
    assert scopes == {"conversation", "tenant"}


def test_plain_search_explains_bm25_order_and_intent(served: Served) -> None:
    alpha = served.alpha
    liked = new_entry(alpha, type="user", title="favorite tea is oolong")
    noted = new_entry(alpha, type="reference", title="tea supplier is oolong house oolong")
    body = explained(alpha, "favorite tea")
    explain = body["explain"]
    assert [e["id"] for e in explain] == [e["id"] for e in body["entries"]]
    by_id = {e["id"]: e for e in explain}
    assert by_id[liked["id"]]["boosts"] == {"type": 1.0, "tag": 1.0, "intent": 1.3}
    assert by_id[noted["id"]]["boosts"]["intent"] == 1.0
    for item in explain:
        assert item["rrf"] is None and item["decay"] is None
        (only,) = item["passes"]
        assert (only["scope"], only["weight"], only["contribution"]) == ("tenant", None, None)
        assert only["rank"] == item["rank"] and only["score"] == item["score"]
    scores = [e["score"] for e in explain]
    assert scores == sorted(scores, reverse=True)


def test_expansion_is_explained_query_by_query(serve: Serve) -> None:
    served = serve(advisor=Reverser(["staging cluster"]))
    alpha = served.alpha
    new_entry(alpha, title="orchid rollout")
    new_entry(alpha, title="staging cluster notes")
    body = explained(alpha, "orchid", expand="m")
    assert body["expansion"]["applied"] is True
    for item in body["explain"]:
        for one in item["queries"]:
            weight = {"orchid": 1.0, "staging cluster": 0.7}[one["query"]]
            assert one["weight"] == weight
            assert one["contribution"] == approx(weight / (60 + one["rank"]))
        assert item["rrf"] == approx(sum(q["contribution"] for q in item["queries"]))
    only_paraphrase = [e for e in body["explain"] if e["queries"][0]["query"] != "orchid"]
    assert only_paraphrase and only_paraphrase[0]["passes"][0]["query"] == "staging cluster"
    reranked = explained(alpha, "orchid", rerank="m")["explain"]
    assert all(item["reranked"] for item in reranked)


def test_explain_is_additive_and_checked(served: Served) -> None:
    alpha = served.alpha
    new_entry(alpha, title="orchid rollout")
    plain = alpha.get("/v1/memory/entries", params={"q": "orchid"}).json()
    assert set(plain) == {"count", "entries"}
    browse = alpha.get("/v1/memory/entries", params={"explain": "true"}).json()
    assert set(browse) == {"count", "entries"}  # browse has no ranking to explain
    bad = alpha.get("/v1/memory/entries", params={"q": "orchid", "explain": "maybe"})
    assert bad.status_code == 400 and bad.json()["error"].startswith("explain")

"""``GET /v1/memory/context``: a context packed into a token budget, under the key's ceiling
and as of a moment."""

from __future__ import annotations

from tests.integration.http.conftest import Served


def test_context_packs_what_the_key_may_read_as_of_a_moment(served: Served) -> None:
    engine = served.engine("1")
    kept = engine.capture_memory(
        {"speaker": "ana", "text": "the orchid release slipped to friday"},
        scope="conversation:7",
    ).primary_record
    then = int(served.clock.advance(1).timestamp())
    served.clock.advance(60)
    later = engine.capture_memory(
        {"speaker": "bo", "text": "orchid release is out"}, scope="conversation:7"
    ).primary_record
    secret = engine.capture_memory(
        {"speaker": "cy", "text": "orchid release bonus 42"},
        scope="conversation:7",
        sensitivity="medium",
    ).primary_record

    answer = served.alpha.get("/v1/memory/context", params={"q": "orchid release"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body["ids"]) == {kept.id, later.id, secret.id}
    assert (
        body["text"]
        .splitlines()[0]
        .endswith(f"ana: the orchid release slipped to friday [{kept.id[:8]}]")
    )
    assert 0 < body["tokens"] <= body["budget_tokens"] == 1024 and body["counted_with"]

    low = served.low.get("/v1/memory/context", params={"q": "orchid release"}).json()
    assert secret.id not in low["ids"] and "bonus 42" not in low["text"]
    past = served.alpha.get(
        "/v1/memory/context", params={"q": "orchid release", "as_of": then}
    ).json()
    assert past["ids"] == [kept.id]


def test_a_bad_budget_is_a_400_naming_it(served: Served) -> None:
    answer = served.alpha.get("/v1/memory/context", params={"q": "x", "budget_tokens": 3})
    assert answer.status_code == 400 and "budget_tokens" in answer.json()["error"]
    bad_type = served.alpha.get("/v1/memory/context", params={"memory_types": "nope"})
    assert bad_type.status_code == 400 and "memory_types" in bad_type.json()["error"]
    assert served.client(None).get("/v1/memory/context").status_code == 401

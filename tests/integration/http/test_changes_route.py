"""The change feed over HTTP: pages under the key's ceiling and tenant, a Server-Sent
Events stream that resumes from ``Last-Event-ID``, and bad parameters as 400s."""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import Serve, Served, new_entry


def pages(client: httpx.Client, limit: int = 2) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    after = 0
    while True:
        response = client.get("/v1/memory/changes", params={"after": after, "limit": limit})
        assert response.status_code == 200, response.text
        page = response.json()
        found.extend(page["changes"])
        if page["next_after"] == page["head"] and len(page["changes"]) < limit:
            return found
        after = page["next_after"]


def test_pages_walk_the_log_under_the_key(served: Served) -> None:
    new_entry(served.alpha, title="shared runbook")
    new_entry(served.alpha, title="conversation seven", conversation_id=7)
    new_entry(served.alpha, title="conversation eight", conversation_id=8)
    everything = pages(served.alpha)
    assert [c["position"] for c in everything] == sorted(c["position"] for c in everything)
    assert len({c["record_id"] for c in everything}) == 3
    assert {c["operation"] for c in everything} >= {"created"}
    seen_by_low = {c["record_id"] for c in pages(served.low)}
    assert len(seen_by_low) == 2  # the unscoped entry and conversation 7's
    assert pages(served.beta) == []  # another tenant's store


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"after": "-1"}, "after"),
        ({"after": "two"}, "after"),
        ({"after": "1.5"}, "after"),
        ({"after": str(2**64)}, "after"),
        ({"limit": "0"}, "limit"),
        ({"limit": "10001"}, "limit"),
        ({"limit": "-3"}, "limit"),
        ({"limit": "99999999999999999999999"}, "limit"),
    ],
)
def test_bad_parameters_are_named_400s(served: Served, params: dict[str, str], field: str) -> None:
    response = served.alpha.get("/v1/memory/changes", params=params)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(f"{field}:")
    stream = served.alpha.get("/v1/memory/changes/stream", params={"after": "x"})
    assert stream.status_code == 400


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(after=st.text(max_size=12), limit=st.text(max_size=12))
def test_no_parameter_makes_a_server_error(served: Served, after: str, limit: str) -> None:
    response = served.alpha.get("/v1/memory/changes", params={"after": after, "limit": limit})
    assert response.status_code in (200, 400), response.text


def read_events(response: httpx.Response, wanted: int) -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    current: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if "data" in current:
                events.append({"id": int(current["id"]), **json.loads(current["data"])})
                if len(events) == wanted:
                    return events
            current = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            current[name] = value.strip()
    return events


def test_the_stream_follows_writes_and_resumes(serve: Serve) -> None:
    served = serve(durable=True)
    new_entry(served.alpha, title="before")
    timer = threading.Timer(0.5, lambda: new_entry(served.alpha, title="while streaming"))
    with served.alpha.stream("GET", "/v1/memory/changes/stream") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        timer.start()
        first = read_events(response, 2)
    timer.join()
    assert [e["id"] for e in first] == [e["position"] for e in first]
    positions = [int(str(e["position"])) for e in first]
    new_entry(served.alpha, title="after")
    headers = {"Last-Event-ID": str(positions[-1])}
    with served.alpha.stream("GET", "/v1/memory/changes/stream", headers=headers) as response:
        (resumed,) = read_events(response, 1)
    assert int(str(resumed["position"])) > positions[-1]


def test_context_as_of_a_position(served: Served) -> None:
    new_entry(served.alpha, title="orchid deploys on fridays")
    first = pages(served.alpha)[0]["position"]
    new_entry(served.alpha, title="orchid deploys on mondays")
    then = served.alpha.get(
        "/v1/memory/context", params={"q": "orchid deploys", "as_of_position": first}
    )
    now = served.alpha.get("/v1/memory/context", params={"q": "orchid deploys"})
    assert then.status_code == now.status_code == 200, then.text
    assert len(then.json()["ids"]) == 1 and len(now.json()["ids"]) == 2
    for bad in ("-1", "x", "999"):
        response = served.alpha.get(
            "/v1/memory/context", params={"q": "orchid", "as_of_position": bad}
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"].startswith("as_of_position:")


def test_entries_as_of_a_position(served: Served) -> None:
    """Entries keep time in epoch seconds: a position reads as of its event's second."""
    new_entry(served.alpha, title="orchid deploys on fridays")
    first = pages(served.alpha)[0]["position"]
    served.clock.advance(2)  # the next entry in a later second
    new_entry(served.alpha, title="orchid deploys on mondays")
    for params in ({}, {"q": "orchid deploys"}):
        then = served.alpha.get("/v1/memory/entries", params={**params, "as_of_position": first})
        now = served.alpha.get("/v1/memory/entries", params=params)
        assert then.status_code == now.status_code == 200, then.text
        assert [e["title"] for e in then.json()["entries"]] == ["orchid deploys on fridays"]
        assert len(now.json()["entries"]) == 2
    for bad in ("-1", "x", "1.5", "999", str(2**64)):
        response = served.alpha.get("/v1/memory/entries", params={"as_of_position": bad})
        assert response.status_code == 400, response.text
        assert response.json()["error"].startswith("as_of_position:")
    both = served.alpha.get(
        "/v1/memory/entries", params={"as_of_position": first, "as_of": "2026-01-01T00:00:00Z"}
    )
    assert both.status_code == 400 and "not both" in both.json()["error"]

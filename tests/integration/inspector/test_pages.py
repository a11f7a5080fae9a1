"""The inspector's pages over HTTP: real data in every view, ``as_of`` honoured exactly,
erased content never sent, tenants apart, ceilings redacting, keys asked once."""

from __future__ import annotations

import re

import httpx
import pytest

from membrane_es.http_api.ui import reads
from membrane_es.http_api.ui.sessions import COOKIE
from membrane_es.schema.records import TrustContext
from membrane_es.schema.timestamps import rfc3339
from tests.integration.inspector.conftest import (
    FORGOTTEN_TEXT,
    OTHER,
    OTHER_TENANT_TEXT,
    OWNER,
    READER,
    SECRET_TEXT,
    SENSITIVE_TEXT,
    Store,
    hits,
)

FULL = TrustContext(max_sensitivity="hyper", authenticated=True)


def _get(store: Store, key: str | None, path: str, **params: str) -> httpx.Response:
    with store.client(key) as client:
        return client.get(path, params=params)


def test_search_lists_what_retrieve_answers_with_its_explanation(store: Store) -> None:
    page = _get(store, OWNER, "/ui/", q="Orchid deploy target")
    assert page.status_code == 200
    expected = store.memory.retrieve("Orchid deploy target", trust=FULL, limit=21)
    assert hits(page.text) == [r.id for r in expected.records][:20]
    assert "Orchid deploy target production" in page.text
    assert re.search(r">words</text>", page.text) and "What the score is made of" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]


def test_the_time_control_gives_what_as_of_gives(store: Store) -> None:
    moment = rfc3339(store.before_move)
    then = _get(store, OWNER, "/ui/", q="Orchid deploy target", as_of=moment)
    now = _get(store, OWNER, "/ui/", q="Orchid deploy target")
    expected = store.memory.retrieve(
        "Orchid deploy target", trust=FULL, limit=21, as_of=store.before_move
    )
    assert hits(then.text) == [r.id for r in expected.records] == [store.first]
    assert hits(then.text) != hits(now.text)
    # every link on the page keeps the moment
    assert f"as_of={moment.replace(':', '%3A')}" in then.text
    metrics_then = _get(store, OWNER, "/ui/metrics", as_of=moment)
    total = store.memory.get_metrics(as_of=store.before_move)["total_records"]
    assert re.search(rf'<strong id="total">{total}</strong>', metrics_then.text)
    record_then = _get(store, OWNER, f"/ui/records/{store.first}", as_of=moment)
    assert "Superseded" not in record_then.text and "staging" in record_then.text
    assert _get(store, OWNER, f"/ui/records/{store.moved}", as_of=moment).status_code == 404


def test_a_record_page_shows_its_timeline_diffs_and_links(store: Store) -> None:
    page = _get(store, OWNER, f"/ui/records/{store.moved}")
    assert page.status_code == 200
    text = page.text
    events = re.findall(r"<td><strong>(\w+)</strong>", text)
    assert events == [e.event for e in store.memory.history(store.moved, trust=FULL)]
    assert events == ["Created", "Forked", "Contested"]
    assert "release 42" in text and "reviewer" in text and "runbook disagrees" in text
    assert "state: contested" in text
    # the diff of the contest: status active → contested
    assert re.search(
        r"payload\.revision\.status</code>:\s*<del>− active</del> <ins>\+ contested", text
    )
    for linked in (store.first, store.variant):
        assert f"/ui/records/{linked}" in text
    first = _get(store, OWNER, f"/ui/records/{store.first}").text
    assert "state: superseded" in first and "superseded by" in first


def test_the_graph_reaches_related_records_in_both_directions(store: Store) -> None:
    page = _get(store, OWNER, f"/ui/records/{store.moved}/graph", hops="1")
    assert page.status_code == 200
    for related in (store.first, store.variant, store.forgotten):
        assert f"/ui/records/{related}/graph" in page.text
    assert "supersedes" in page.text and "contested_by" in page.text and "mentions" in page.text
    roots_only = _get(store, OWNER, f"/ui/records/{store.moved}/graph", hops="0")
    assert f"/ui/records/{store.first}/graph" not in roots_only.text


def test_metrics_are_drawn_from_the_store(store: Store) -> None:
    page = _get(store, OWNER, "/ui/metrics")
    snapshot = store.memory.get_metrics()
    assert re.search(rf'<strong id="total">{snapshot["total_records"]}</strong>', page.text)
    assert page.text.count("<svg") == 4
    assert "Records by state" in page.text and "Salience distribution" in page.text


def test_integrity_runs_on_demand_for_a_key_without_ceiling(store: Store) -> None:
    idle = _get(store, OWNER, "/ui/integrity")
    assert idle.status_code == 200 and 'id="report"' not in idle.text
    ran = _get(store, OWNER, "/ui/integrity", run="1")
    report = store.memory.verify()
    assert "Intact" in ran.text and report.head and report.head in ran.text
    assert _get(store, READER, "/ui/integrity", run="1").status_code == 403


def test_forgotten_content_is_on_no_page(store: Store) -> None:
    pages = [
        _get(store, OWNER, "/ui/", q="Orchid note"),
        _get(store, OWNER, "/ui/"),
        _get(store, OWNER, f"/ui/records/{store.forgotten}"),
        _get(store, OWNER, f"/ui/records/{store.forgotten}/graph", hops="3"),
        _get(store, OWNER, f"/ui/records/{store.moved}/graph", hops="3"),
        _get(store, OWNER, "/ui/metrics"),
        _get(store, OWNER, f"/ui/records/{store.forgotten}", as_of=rfc3339(store.before_forget)),
    ]
    assert "erasure reaches back" in pages[-1].text
    assert store.forgotten not in hits(pages[0].text)  # its words left the index
    erased = pages[2].text
    assert "Erased on" in erased and "dpo" in erased and "erasure request" in erased
    for page in pages:
        assert page.status_code in (200, 404)
        for word in FORGOTTEN_TEXT.split():
            assert word not in page.text


def test_another_tenant_sees_nothing_of_this_one(store: Store) -> None:
    theirs = _get(store, OTHER, "/ui/", q="zebra Orchid deploy target")
    ours = {store.first, store.moved, store.variant, store.sensitive, store.secret}
    assert hits(theirs.text) and not ours & set(hits(theirs.text))
    assert "production" not in theirs.text and SENSITIVE_TEXT not in theirs.text
    assert OTHER_TENANT_TEXT in _get(store, OTHER, "/ui/").text
    for record_id in (store.moved, store.sensitive):
        assert _get(store, OTHER, f"/ui/records/{record_id}").status_code == 404
        assert _get(store, OTHER, f"/ui/records/{record_id}/graph").status_code == 404
    assert OTHER_TENANT_TEXT not in _get(store, OWNER, "/ui/").text


@pytest.mark.parametrize("level", ["", "hyper"])  # declaring more than the key allows: clamped
def test_a_lower_ceiling_sees_a_more_sensitive_record_redacted(store: Store, level: str) -> None:
    page = _get(store, READER, "/ui/", level=level)  # every record it may see
    assert store.sensitive in hits(page.text)
    assert "[redacted" in page.text and SENSITIVE_TEXT not in page.text
    # its words and meaning are no evidence: a question about them does not list it
    asked = _get(store, READER, "/ui/", q="Orchid vault", level=level).text
    assert store.sensitive not in hits(asked) and store.secret not in asked
    assert store.secret not in page.text and SECRET_TEXT not in page.text
    record = _get(store, READER, f"/ui/records/{store.sensitive}", level=level)
    assert record.status_code == 200 and 'id="redacted"' in record.text
    assert SENSITIVE_TEXT not in record.text
    assert _get(store, READER, f"/ui/records/{store.secret}").status_code == 404
    assert SENSITIVE_TEXT in _get(store, OWNER, f"/ui/records/{store.sensitive}").text
    # a redacted record's relations are not the reader's to see, from either end
    graph = _get(store, READER, f"/ui/records/{store.moved}/graph", level=level).text
    assert "cites" not in graph and store.sensitive not in graph
    assert "cites" in _get(store, OWNER, f"/ui/records/{store.moved}/graph").text


def test_the_owner_may_narrow_its_trust(store: Store) -> None:
    page = _get(store, OWNER, "/ui/", level="low")
    assert "[redacted" in page.text and SENSITIVE_TEXT not in page.text


def test_a_key_is_entered_once_per_browser_session(store: Store) -> None:
    with store.client(None) as browser:
        asked = browser.get("/ui/metrics")
        assert asked.status_code == 401 and 'name="key"' in asked.text
        refused = browser.post("/ui/key", data={"key": "wrong", "next": "/ui/metrics"})
        assert refused.status_code == 401 and COOKIE not in browser.cookies
        entered = browser.post("/ui/key", data={"key": READER, "next": "/ui/metrics"})
        assert entered.status_code == 303 and entered.headers["location"] == "/ui/metrics"
        cookie = entered.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        assert READER not in cookie
        assert browser.get("/ui/metrics").status_code == 200
        assert browser.get(f"/ui/records/{store.secret}").status_code == 404  # still the reader
        browser.post("/ui/key/forget")
        assert browser.get("/ui/metrics").status_code == 401


def test_elsewhere_after_the_key_is_refused(store: Store) -> None:
    with store.client(None) as browser:
        entered = browser.post("/ui/key", data={"key": OWNER, "next": "//evil.example/x"})
        assert entered.headers["location"] == "/ui/"


def test_a_log_position_reads_as_the_store_stood_right_after_it(store: Store) -> None:
    """Position 1 is the first record's creation: only it, as before it moved."""
    then = _get(store, OWNER, "/ui/", q="Orchid deploy target", as_of_position="1")
    expected = store.memory.retrieve("Orchid deploy target", trust=FULL, limit=21, as_of_position=1)
    assert then.status_code == 200
    assert hits(then.text) == [r.id for r in expected.records] == [store.first]
    assert "right after log position 1" in then.text
    # links and forms carry the position, and the moment field is left empty
    assert "as_of_position=1" in then.text and "as_of=" not in then.text
    assert re.search(r'id="as_of_position" value="1"', then.text)
    assert re.search(r'id="as_of" value=""', then.text)
    metrics = _get(store, OWNER, "/ui/metrics", as_of_position="1")
    total = store.memory.get_metrics(as_of_position=1)["total_records"]
    assert re.search(rf'<strong id="total">{total}</strong>', metrics.text)
    record = _get(store, OWNER, f"/ui/records/{store.first}", as_of_position="1")
    assert "Superseded" not in record.text and "staging" in record.text
    assert _get(store, OWNER, f"/ui/records/{store.moved}", as_of_position="1").status_code == 404
    # an error page keeps the position in its time control
    both = _get(store, OWNER, "/ui/", as_of_position="1", level="top")
    assert both.status_code == 400 and re.search(r'id="as_of_position" value="1"', both.text)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"as_of": "yesterday"}, "as_of"),
        ({"as_of_position": "-1"}, "as_of_position"),
        ({"as_of_position": "seven"}, "as_of_position"),
        ({"as_of_position": "9" * 40}, "as_of_position"),
        ({"as_of_position": "1000000"}, "as_of_position"),  # past the log's head
        ({"as_of_position": "1", "as_of": "2026-01-01T00:00:00Z"}, "as_of_position"),
        ({"page": "0"}, "page"),
        ({"level": "top"}, "level"),
        ({"type": "fact"}, "type"),
    ],
)
def test_bad_parameters_are_named(store: Store, params: dict[str, str], field: str) -> None:
    page = _get(store, OWNER, "/ui/", **params)
    assert page.status_code == 400 and f"{field}:" in page.text


def test_the_inspector_is_not_in_the_api_document(store: Store) -> None:
    document = _get(store, OWNER, "/openapi.json").json()
    assert not [path for path in document["paths"] if path.startswith("/ui")]


def test_pages_follow_on(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reads, "SEARCH_PAGE", 2)
    monkeypatch.setattr(reads, "TIMELINE_PAGE", 2)
    expected = [r.id for r in store.memory.retrieve("Orchid", trust=FULL, limit=5).records]
    first = _get(store, OWNER, "/ui/", q="Orchid")
    second = _get(store, OWNER, "/ui/", q="Orchid", page="2")
    assert hits(first.text) == expected[:2] and hits(second.text) == expected[2:4]
    assert 'rel="next"' in first.text and 'rel="prev"' in second.text
    later = _get(store, OWNER, f"/ui/records/{store.moved}", page="2").text
    assert re.findall(r"<td><strong>(\w+)</strong>", later) == ["Contested"]
    # compared with the version before it, on the page before
    assert re.search(r"revision\.status</code>:\s*<del>− active</del>", later)

"""The entries API over real HTTP: shapes, every write, every browse parameter, every error."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from membrane_es.http_api import app as http_app
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext

from .conftest import Serve, Served, ids, new_entry

ENTRY_KEYS = {
    "id",
    "tenant_id",
    "type",
    "title",
    "content",
    "source",
    "tags",
    "artifact_id",
    "conversation_id",
    "valid_from",
    "valid_to",
    "created_at",
    "updated_at",
    "record_id",
}


def test_create_returns_201_and_arbiters_shape_with_the_record_id(served: Served) -> None:
    response = served.alpha.post(
        "/v1/memory/entries",
        json={
            "type": "reference",
            "title": "Findings report",
            "content": "the report",
            "source": "agent",
            "tags": ["report"],
            "artifact_id": 88,
            "conversation_id": 17,
        },
    )
    assert response.status_code == 201
    entry = response.json()
    assert set(entry) == ENTRY_KEYS
    assert entry["id"] == 1 and entry["tenant_id"] == 1
    assert (entry["type"], entry["title"], entry["content"]) == (
        "reference",
        "Findings report",
        "the report",
    )
    assert (entry["source"], entry["tags"]) == ("agent", ["report"])
    assert (entry["artifact_id"], entry["conversation_id"], entry["valid_to"]) == (88, 17, None)
    assert entry["valid_from"] == entry["created_at"] == entry["updated_at"] == served.clock.epoch
    record = served.engine().retrieve_by_id(entry["record_id"])
    assert record.type == "semantic" and record.scope == "conversation:17"


def test_ids_are_per_tenant_and_never_reused(served: Served) -> None:
    first = new_entry(served.alpha)
    second = new_entry(served.alpha)
    assert served.alpha.delete(f"/v1/memory/entries/{second['id']}").status_code == 200
    third = new_entry(served.alpha)
    other = new_entry(served.beta)
    assert (first["id"], second["id"]) == (1, 2)
    assert third["id"] > second["id"]
    assert other["id"] == 1 and other["tenant_id"] == "acme"


def test_get_is_hydrated_with_artifact_and_relations(served: Served) -> None:
    a = new_entry(served.alpha, artifact_id=5)
    b = new_entry(served.alpha)
    served.alpha.post(
        "/v1/memory/relations",
        json={"source_id": b["id"], "target_id": a["id"], "relation": "supports"},
    )
    got = served.alpha.get(f"/v1/memory/entries/{a['id']}").json()
    assert got["artifact"] == {"id": 5}
    assert [(r["source_id"], r["target_id"], r["relation"]) for r in got["relations"]] == [
        (b["id"], a["id"], "supports")
    ]
    assert {k: got[k] for k in ENTRY_KEYS} == a


def test_browse_is_newest_first_with_hard_type_and_tag_filters(served: Served) -> None:
    a = new_entry(served.alpha, type="project", tags=["ops", "db"])
    served.clock.advance(10)
    b = new_entry(served.alpha, type="reference", tags=["docs"])
    served.clock.advance(10)
    c = new_entry(served.alpha, type="user", tags=["ops"])
    alpha = served.alpha
    assert ids(alpha.get("/v1/memory/entries")) == [c["id"], b["id"], a["id"]]
    assert ids(alpha.get("/v1/memory/entries", params={"type": "project,user"})) == [
        c["id"],
        a["id"],
    ]
    assert ids(alpha.get("/v1/memory/entries", params={"tag": "ops"})) == [c["id"], a["id"]]
    assert ids(alpha.get("/v1/memory/entries", params={"tag": "doc"})) == [b["id"]]
    response = alpha.get("/v1/memory/entries", params={"type": "project"})
    assert response.json()["count"] == 1


def test_conversation_scope_since_cursor_and_limit(served: Served) -> None:
    alpha = served.alpha
    unscoped = new_entry(alpha)
    served.clock.advance(10)
    pinned = new_entry(alpha, conversation_id=17)
    served.clock.advance(10)
    elsewhere = new_entry(alpha, conversation_id=18)
    assert ids(alpha.get("/v1/memory/entries", params={"conversation_id": 17})) == [
        pinned["id"],
        unscoped["id"],
    ]
    # a conversation with no entry yet (a new one) still filters: the unscoped entries
    assert ids(alpha.get("/v1/memory/entries", params={"conversation_id": 99})) == [unscoped["id"]]
    past = {"conversation_id": 99, "as_of": elsewhere["created_at"]}
    assert ids(alpha.get("/v1/memory/entries", params=past)) == [unscoped["id"]]
    assert ids(alpha.get("/v1/memory/entries", params={"since": pinned["created_at"]})) == [
        elsewhere["id"],
        pinned["id"],
    ]
    cursor = {"before_updated_at": elsewhere["updated_at"]}
    assert ids(alpha.get("/v1/memory/entries", params=cursor)) == [pinned["id"], unscoped["id"]]
    assert ids(alpha.get("/v1/memory/entries", params={"limit": 2})) == [
        elsewhere["id"],
        pinned["id"],
    ]


def test_limit_defaults_to_50_and_is_capped_at_200(served: Served) -> None:
    engine = served.engine()
    with engine.batch():
        for i in range(205):
            engine.create_record(
                {
                    "type": "semantic",
                    "payload": {"kind": "semantic", "subject": f"s{i}", "predicate": "p"},
                    "provenance": {"sources": [{"kind": "observation", "ref": "test"}]},
                }
            )
    assert len(ids(served.alpha.get("/v1/memory/entries"))) == 50
    assert len(ids(served.alpha.get("/v1/memory/entries", params={"limit": 1000}))) == 200


def test_patch_is_a_new_revision_and_history_keeps_the_old(served: Served) -> None:
    entry = new_entry(served.alpha, title="Findings report", content="v1", tags=["a"])
    served.clock.advance(60)
    response = served.alpha.patch(
        f"/v1/memory/entries/{entry['id']}", json={"title": "Findings (revised)", "artifact_id": 3}
    )
    assert response.status_code == 200
    revised = response.json()
    assert revised["id"] == entry["id"] and revised["title"] == "Findings (revised)"
    assert (revised["content"], revised["tags"], revised["artifact_id"]) == ("v1", ["a"], 3)
    assert revised["created_at"] == entry["created_at"]
    assert revised["updated_at"] == entry["updated_at"] + 60
    assert revised["record_id"] != entry["record_id"]
    cleared = served.alpha.patch(f"/v1/memory/entries/{entry['id']}", json={"artifact_id": None})
    assert cleared.json()["artifact_id"] is None
    old = served.engine().history(entry["record_id"])
    assert [e.event for e in old][-1] == "Superseded"
    past = served.alpha.get("/v1/memory/entries", params={"as_of": entry["created_at"]})
    assert [e["title"] for e in past.json()["entries"]] == ["Findings report"]


def test_invalidate_hides_from_active_reads_and_a_second_call_is_404(served: Served) -> None:
    entry = new_entry(served.alpha)
    path = f"/v1/memory/entries/{entry['id']}"
    served.clock.advance(5)
    response = served.alpha.post(f"{path}/invalidate")
    assert (response.status_code, response.json()) == (
        200,
        {"invalidated": True, "id": entry["id"]},
    )
    again = served.alpha.post(f"{path}/invalidate")
    assert again.status_code == 404 and "error" in again.json()
    assert served.alpha.get(path).status_code == 404
    assert served.alpha.patch(path, json={"title": "x"}).status_code == 404
    assert ids(served.alpha.get("/v1/memory/entries")) == []
    before = {"as_of": entry["created_at"]}
    assert ids(served.alpha.get("/v1/memory/entries", params=before)) == [entry["id"]]
    assert served.engine().history(entry["record_id"])[-1].event == "Retracted"


def test_invalidated_entries_carry_valid_to_in_past_reads(served: Served) -> None:
    entry = new_entry(served.alpha, title="deploy target")
    served.clock.advance(30)
    new = new_entry(served.alpha, title="new deploy target", supersedes_ids=[entry["id"]])
    superseded_at = served.clock.epoch
    served.clock.advance(30)
    served.alpha.post(f"/v1/memory/entries/{new['id']}/invalidate")
    invalidated_at = served.clock.epoch
    served.clock.advance(30)

    def window(moment: int) -> dict[int, int | None]:
        found = served.alpha.get("/v1/memory/entries", params={"as_of": moment}).json()
        return {e["id"]: e["valid_to"] for e in found["entries"]}

    assert window(entry["created_at"]) == {entry["id"]: superseded_at}
    assert window(superseded_at) == {new["id"]: invalidated_at}  # half-open: ends exclusive
    assert window(invalidated_at - 1) == {new["id"]: invalidated_at}
    assert window(invalidated_at) == {}
    assert ids(served.alpha.get("/v1/memory/entries")) == []


def test_invalidate_with_a_past_when_ends_the_window_there(served: Served) -> None:
    entry = new_entry(served.alpha)
    served.clock.advance(100)
    when = entry["created_at"] + 40
    response = served.alpha.post(
        f"/v1/memory/entries/{entry['id']}/invalidate", json={"when": when}
    )
    assert response.json() == {"invalidated": True, "id": entry["id"]}
    assert ids(served.alpha.get("/v1/memory/entries")) == []
    inside = served.alpha.get("/v1/memory/entries", params={"as_of": when - 1}).json()
    assert [(e["id"], e["valid_to"]) for e in inside["entries"]] == [(entry["id"], when)]
    assert ids(served.alpha.get("/v1/memory/entries", params={"as_of": when})) == []
    event = served.engine().history(entry["record_id"])[-1]
    assert event.event == "Retracted"
    again = served.alpha.post(f"/v1/memory/entries/{entry['id']}/invalidate", json={"when": when})
    assert again.status_code == 404


@pytest.mark.parametrize("moment", ["0", "1970-01-01T00:00:00Z", "1"])
def test_as_of_the_epoch_itself_reads_the_store_as_it_stood_then(
    served: Served, moment: str
) -> None:
    new_entry(served.alpha)
    found = served.alpha.get("/v1/memory/entries", params={"as_of": moment})
    assert found.status_code == 200 and found.json()["entries"] == []


@pytest.mark.parametrize("name", ["as_of", "since", "before_updated_at"])
def test_a_moment_before_1970_is_refused_naming_its_parameter(served: Served, name: str) -> None:
    for moment in ("1969-12-31T23:59:59Z", "0001-01-01T00:00:00Z"):
        refused = served.alpha.get("/v1/memory/entries", params={name: moment})
        assert refused.status_code == 400
        assert refused.json()["error"].startswith(f"{name}: ")
        assert "1970" in refused.json()["error"]


def test_invalidate_takes_rfc3339_and_future_moments(served: Served) -> None:
    entry = new_entry(served.alpha)
    served.clock.advance(10)
    later = served.clock.epoch + 3600
    text = datetime.fromtimestamp(later, UTC).isoformat().replace("+00:00", "Z")
    response = served.alpha.post(
        f"/v1/memory/entries/{entry['id']}/invalidate", json={"when": text}
    )
    assert response.status_code == 200, response.text
    # Invalidated now (active reads drop it at once), valid until the moment it names.
    assert ids(served.alpha.get("/v1/memory/entries")) == []
    now = served.alpha.get("/v1/memory/entries", params={"as_of": served.clock.epoch}).json()
    assert [(e["id"], e["valid_to"]) for e in now["entries"]] == [(entry["id"], later)]
    assert ids(served.alpha.get("/v1/memory/entries", params={"as_of": later})) == []


@pytest.mark.parametrize(
    "when",
    [-1, True, 1.5, "yesterday", "2026-01-01T00:00:00", "2026-W01-1T00:00:00Z", "", [1], 2**63],
)
def test_invalidate_refuses_a_bad_when_and_writes_nothing(served: Served, when: Any) -> None:
    entry = new_entry(served.alpha)
    response = served.alpha.post(
        f"/v1/memory/entries/{entry['id']}/invalidate", json={"when": when}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("when")
    assert ids(served.alpha.get("/v1/memory/entries")) == [entry["id"]]
    assert [e.event for e in served.engine().history(entry["record_id"])] == ["Created"]


def test_invalidate_refuses_a_when_before_the_entry_was_valid(served: Served) -> None:
    entry = new_entry(served.alpha)
    served.clock.advance(10)
    response = served.alpha.post(
        f"/v1/memory/entries/{entry['id']}/invalidate", json={"when": entry["valid_from"] - 1}
    )
    assert response.status_code == 400 and response.json()["error"].startswith("when:")
    assert ids(served.alpha.get("/v1/memory/entries")) == [entry["id"]]


def test_a_backfilled_entry_is_in_past_reads_of_its_window(served: Served) -> None:
    backfill = served.clock.epoch - 86_400
    entry = new_entry(served.alpha, title="imported fact", created_at=backfill)
    served.clock.advance(10)
    served.alpha.post(
        f"/v1/memory/entries/{entry['id']}/invalidate", json={"when": backfill + 3600}
    )
    inside = served.alpha.get("/v1/memory/entries", params={"as_of": backfill + 60}).json()
    assert [(e["id"], e["valid_to"]) for e in inside["entries"]] == [(entry["id"], backfill + 3600)]
    assert ids(served.alpha.get("/v1/memory/entries", params={"as_of": backfill - 1})) == []
    assert ids(served.alpha.get("/v1/memory/entries", params={"as_of": backfill + 3600})) == []


def test_delete_hides_the_entry_everywhere_but_keeps_its_events(served: Served) -> None:
    entry = new_entry(served.alpha)
    other = new_entry(served.alpha)
    served.alpha.post(
        "/v1/memory/relations",
        json={"source_id": other["id"], "target_id": entry["id"], "relation": "refines"},
    )
    served.clock.advance(5)
    path = f"/v1/memory/entries/{entry['id']}"
    response = served.alpha.delete(path)
    assert (response.status_code, response.json()) == (200, {"deleted": True})
    assert served.alpha.get(path).status_code == 404
    assert served.alpha.delete(path).status_code == 404
    past = served.alpha.get("/v1/memory/entries", params={"as_of": entry["created_at"]})
    assert entry["id"] not in ids(past)
    assert served.alpha.get("/v1/memory/relations").json() == {"count": 0, "relations": []}
    events = [e.event for e in served.engine().history(entry["record_id"])]
    assert events == ["Created", "Retracted"]


def test_delete_of_an_invalidated_entry_works(served: Served) -> None:
    entry = new_entry(served.alpha)
    served.alpha.post(f"/v1/memory/entries/{entry['id']}/invalidate")
    assert served.alpha.delete(f"/v1/memory/entries/{entry['id']}").status_code == 200
    past = served.alpha.get("/v1/memory/entries", params={"as_of": entry["created_at"]})
    assert ids(past) == []


def test_supersedes_ids_invalidates_and_relates_in_one_write(served: Served) -> None:
    old = new_entry(served.alpha, title="old deploy target")
    served.clock.advance(5)
    position = served.engine().application.recorder.max_notification_id()
    new = new_entry(served.alpha, title="new deploy target", supersedes_ids=[old["id"]])
    assert ids(served.alpha.get("/v1/memory/entries")) == [new["id"]]
    relations = served.alpha.get("/v1/memory/relations").json()["relations"]
    assert [(r["source_id"], r["target_id"], r["relation"]) for r in relations] == [
        (new["id"], old["id"], "supersedes")
    ]
    notifications = served.engine().application.recorder.select_notifications(
        start=position + 1, limit=10
    )
    assert len(notifications) == 3  # created, retracted, related: one commit
    bad = served.alpha.post(
        "/v1/memory/entries", json={"type": "user", "title": "x", "supersedes_ids": [old["id"]]}
    )
    assert bad.status_code == 400 and bad.json()["error"].startswith("supersedes_ids:")
    assert len(ids(served.alpha.get("/v1/memory/entries"))) == 1  # nothing written


def test_relations_closed_enum_duplicates_and_self_loops(served: Served) -> None:
    a, b = new_entry(served.alpha), new_entry(served.alpha)
    body = {"source_id": a["id"], "target_id": b["id"], "relation": "contradicts"}
    made = served.alpha.post("/v1/memory/relations", json=body)
    assert made.status_code == 201
    relation = made.json()
    assert set(relation) == {"id", "tenant_id", "source_id", "target_id", "relation", "created_at"}
    duplicate = served.alpha.post("/v1/memory/relations", json=body)
    assert duplicate.status_code == 409
    assert duplicate.json() == {"error": "relation already exists", "existing_id": relation["id"]}
    reverse = {**body, "source_id": b["id"], "target_id": a["id"]}
    assert served.alpha.post("/v1/memory/relations", json=reverse).status_code == 201
    loop = served.alpha.post("/v1/memory/relations", json={**body, "target_id": a["id"]})
    assert loop.status_code == 400 and "self-loop" in loop.json()["error"]
    unknown = served.alpha.post("/v1/memory/relations", json={**body, "relation": "likes"})
    assert unknown.status_code == 400 and "relation" in unknown.json()["error"]
    missing = served.alpha.post("/v1/memory/relations", json={**body, "target_id": 999})
    assert missing.status_code == 400 and missing.json()["error"].startswith("target_id:")
    listed = served.alpha.get("/v1/memory/relations", params={"source_id": a["id"]}).json()
    assert listed["count"] == 1 and listed["relations"][0] == relation
    by_kind = served.alpha.get("/v1/memory/relations", params={"relation": "supports"}).json()
    assert by_kind["count"] == 0
    assert served.alpha.get("/v1/memory/relations", params={"relation": "x"}).status_code == 400


def test_graph_returns_entries_and_the_relations_among_them(served: Served) -> None:
    a = new_entry(served.alpha, type="project")
    b = new_entry(served.alpha, type="user")
    served.alpha.post(
        "/v1/memory/relations",
        json={"source_id": a["id"], "target_id": b["id"], "relation": "relates_to"},
    )
    graph = served.alpha.get("/v1/memory/graph").json()
    assert graph["tenant_id"] == 1
    assert {e["id"] for e in graph["entries"]} == {a["id"], b["id"]}
    assert len(graph["relations"]) == 1
    only = served.alpha.get("/v1/memory/graph", params={"type": "project"}).json()
    assert [e["id"] for e in only["entries"]] == [a["id"]] and only["relations"] == []
    assert served.alpha.get("/v1/memory/graph", params={"type": "nope"}).status_code == 400


def test_bad_parameters_are_400_naming_the_field(served: Served) -> None:
    cases = {
        "type": {"type": "project,bogus"},
        "limit": {"limit": "many"},
        "as_of": {"as_of": "-1"},
        "since": {"since": "yesterday"},
        "before_updated_at": {"before_updated_at": "x"},
        "conversation_id": {"conversation_id": "x"},
        "graduated": {"graduated": "perhaps"},
        "intent": {"intent": "maybe"},
        "decay": {"decay": "2"},
    }
    for field, params in cases.items():
        response = served.alpha.get("/v1/memory/entries", params=params)
        assert response.status_code == 400, (field, response.text)
        assert set(response.json()) == {"error"} and field in response.json()["error"]
    assert served.alpha.get("/v1/memory/entries", params={"limit": 0}).status_code == 400


def test_bad_bodies_are_400_naming_the_field_and_write_nothing(served: Served) -> None:
    cases = {
        "type": {"type": "opinion", "title": "x"},
        "title": {"type": "user", "title": ""},
        "tags": {"type": "user", "title": "x", "tags": ["ok"] * 33},
        "source": {"type": "user", "title": "x", "source": "s" * 201},
        "content": {"type": "user", "title": "x", "content": "c" * 65_537},
        "created_at": {"type": "user", "title": "x", "created_at": -5},
    }
    for field, body in cases.items():
        response = served.alpha.post("/v1/memory/entries", json=body)
        assert response.status_code == 400, (field, response.text)
        assert field in response.json()["error"]
    invalid_json = served.alpha.post(
        "/v1/memory/entries", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert invalid_json.status_code == 400 and "error" in invalid_json.json()
    assert ids(served.alpha.get("/v1/memory/entries")) == []
    entry = new_entry(served.alpha)
    patch = served.alpha.patch(f"/v1/memory/entries/{entry['id']}", json={"title": "t" * 201})
    assert patch.status_code == 400 and "title" in patch.json()["error"]


def test_missing_or_wrong_bearer_is_401(served: Served) -> None:
    for client in (served.client(None), served.client("wrong")):
        for response in (
            client.get("/v1/memory/entries"),
            client.post("/v1/memory/entries", json={"type": "user", "title": "x"}),
            client.get("/v1/memory/graph"),
        ):
            assert response.status_code == 401
            assert set(response.json()) == {"error"}
    plain = httpx.get(f"{served.base}/v1/memory/entries", headers={"Authorization": ALPHA_RAW})
    assert plain.status_code == 401


ALPHA_RAW = "alpha-secret"  # the key without "Bearer "


def test_unknown_ids_and_routes_are_404(served: Served) -> None:
    for response in (
        served.alpha.get("/v1/memory/entries/41"),
        served.alpha.patch("/v1/memory/entries/41", json={"title": "x"}),
        served.alpha.delete("/v1/memory/entries/41"),
        served.alpha.post("/v1/memory/entries/41/invalidate"),
        served.alpha.get("/v1/memory/nothing"),
    ):
        assert response.status_code == 404 and set(response.json()) == {"error"}


def test_bodies_over_the_limit_are_413(serve: object) -> None:
    served = serve(max_body_bytes=4096)  # type: ignore[operator]
    response = served.alpha.post(
        "/v1/memory/entries", json={"type": "user", "title": "x", "content": "c" * 10_000}
    )
    assert response.status_code == 413 and set(response.json()) == {"error"}


def test_tenants_never_see_or_count_each_others_entries(served: Served) -> None:
    mine = new_entry(served.alpha, title="alpha secret plan", conversation_id=3)
    new_entry(served.beta, title="beta notes")
    assert ids(served.beta.get("/v1/memory/entries")) == [1]
    beta_titles = [e["title"] for e in served.beta.get("/v1/memory/entries").json()["entries"]]
    assert beta_titles == ["beta notes"]
    search = served.beta.get("/v1/memory/entries", params={"q": "secret plan"})
    assert search.json() == {"count": 0, "entries": []}
    # another tenant's conversation is one with no entries here: its unscoped entries only
    scoped = served.beta.get("/v1/memory/entries", params={"conversation_id": 3})
    assert [e["title"] for e in scoped.json()["entries"]] == ["beta notes"]
    assert served.beta.get(f"/v1/memory/entries/{mine['id']}").json()["title"] == "beta notes"
    assert served.beta.get("/v1/memory/entries/2").status_code == 404
    assert served.beta.get("/v1/memory/graph").json()["tenant_id"] == "acme"
    pinned = new_entry(served.beta, title="beta pinned", conversation_id=4)
    assert ids(served.beta.get("/v1/memory/entries", params={"conversation_id": 3})) == [1]
    assert pinned["id"] not in ids(
        served.beta.get("/v1/memory/entries", params={"conversation_id": 3, "q": "beta"})
    )


def test_a_keys_ceiling_bounds_what_it_reads_and_writes(served: Served) -> None:
    engine = served.engine("1")
    for sensitivity, scope in (("low", "conversation:7"), ("high", "conversation:7"), ("low", "")):
        engine.create_record(
            {
                "type": "semantic",
                "sensitivity": sensitivity,
                "scope": scope,
                "payload": {
                    "kind": "semantic",
                    "subject": f"{sensitivity} {scope}",
                    "predicate": "p",
                },
                "provenance": {"sources": [{"kind": "observation", "ref": "test"}]},
            }
        )
    engine.create_record(
        {
            "type": "semantic",
            "scope": "conversation:8",
            "payload": {"kind": "semantic", "subject": "other conversation", "predicate": "p"},
            "provenance": {"sources": [{"kind": "observation", "ref": "test"}]},
        }
    )
    titles = {e["title"] for e in served.low.get("/v1/memory/entries").json()["entries"]}
    assert titles == {"low conversation:7", "low"}  # not high, not another conversation
    assert len(ids(served.alpha.get("/v1/memory/entries"))) == 4
    refused = served.low.post(
        "/v1/memory/entries", json={"type": "user", "title": "x", "conversation_id": 8}
    )
    # outside the key's ceiling: 403, as gRPC's PERMISSION_DENIED (test_entries_ceiling.py)
    assert refused.status_code == 403 and refused.json()["error"].startswith("conversation_id")
    allowed = served.low.post(
        "/v1/memory/entries", json={"type": "user", "title": "x", "conversation_id": 7}
    )
    assert allowed.status_code == 201
    assert engine.retrieve_by_id(
        allowed.json()["record_id"], trust=TrustContext(max_sensitivity=Sensitivity.LOW)
    )


def test_openapi_document_and_docs_page(served: Served) -> None:
    document = httpx.get(f"{served.base}/openapi.json").json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    assert {"get", "post"} <= set(paths["/v1/memory/entries"])
    assert {"get", "patch", "delete"} <= set(paths["/v1/memory/entries/{entry_id}"])
    assert "/v1/memory/entries/{entry_id}/invalidate" in paths
    assert {"get", "post"} <= set(paths["/v1/memory/relations"])
    assert "/v1/memory/graph" in paths
    docs = httpx.get(f"{served.base}/docs")
    assert docs.status_code == 200 and "openapi.json" in docs.text


def test_the_docs_page_needs_nothing_but_the_server(served: Served) -> None:
    page = httpx.get(f"{served.base}/docs").text
    linked = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page)
    assert len(linked) == 4 and all(url.startswith("/docs/assets/") for url in linked), linked
    for url in linked:
        asset = httpx.get(f"{served.base}{url}")
        assert asset.status_code == 200 and len(asset.content) > 1000, url
    assert httpx.get(f"{served.base}/docs/assets/swagger-initializer.js").status_code == 404
    assert httpx.get(f"{served.base}/docs/assets/..%2FLICENSE").status_code == 404


def test_delete_with_erase_forgets_every_revision(served: Served) -> None:
    entry = new_entry(served.alpha, title="patient record", content="diagnosis text")
    served.clock.advance(5)
    revised = served.alpha.patch(
        f"/v1/memory/entries/{entry['id']}", json={"content": "second diagnosis"}
    ).json()
    response = served.alpha.delete(f"/v1/memory/entries/{entry['id']}", params={"erase": "true"})
    assert (response.status_code, response.json()) == (200, {"deleted": True})
    engine = served.engine()
    for record_id in (entry["record_id"], revised["record_id"]):
        assert engine.retrieve_by_id(record_id).payload is None  # content erased
        assert engine.history(record_id)[-1].event == "Forgotten"
    assert ids(served.alpha.get("/v1/memory/entries", params={"q": "diagnosis"})) == []
    past = {"q": "diagnosis", "as_of": entry["created_at"]}
    assert ids(served.alpha.get("/v1/memory/entries", params=past)) == []
    bad = served.alpha.delete(f"/v1/memory/entries/{entry['id']}", params={"erase": "maybe"})
    assert bad.status_code == 400 and bad.json()["error"].startswith("erase")


def test_writes_carry_their_log_position_and_reads_may_require_one(served: Served) -> None:
    response = served.alpha.post("/v1/memory/entries", json={"type": "user", "title": "x"})
    position = int(response.headers["x-membrane-position"])
    assert position == served.engine().application.recorder.max_notification_id()
    entry = response.json()
    patched = served.alpha.patch(f"/v1/memory/entries/{entry['id']}", json={"title": "y"})
    assert int(patched.headers["x-membrane-position"]) > position
    read = served.alpha.get(
        "/v1/memory/entries", headers={"x-membrane-min-position": str(position)}
    )
    assert ids(read) == [entry["id"]]
    bad = served.alpha.get("/v1/memory/entries", headers={"x-membrane-min-position": "soon"})
    assert bad.status_code == 400 and "x-membrane-min-position" in bad.json()["error"]


def test_a_min_position_not_reached_in_time_is_a_504(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = serve(durable=True)  # an LMDB store: the wait looks at the log until the bound
    response = served.alpha.post("/v1/memory/entries", json={"type": "user", "title": "x"})
    position = int(response.headers["x-membrane-position"])
    monkeypatch.setattr(http_app, "POSITION_WAIT_SECONDS", 0.05)
    ahead = {"x-membrane-min-position": str(position + 1000)}
    started = time.monotonic()
    for path in ("/v1/memory/entries", f"/v1/memory/entries/{response.json()['id']}"):
        late = served.alpha.get(path, headers=ahead)
        assert late.status_code == 504, late.text
        assert f"min_position {position + 1000} not reached" in late.json()["error"]
    assert time.monotonic() - started < 5  # the bound, not the default wait
    reached = served.alpha.get(
        "/v1/memory/entries", headers={"x-membrane-min-position": str(position)}
    )
    assert reached.status_code == 200

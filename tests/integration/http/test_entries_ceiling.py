"""A key's ceiling bounds every write, not only creation: an entry the key cannot see is not
found (404, as if it did not exist), one it can see but may not write is refused (403), and
a refused write writes nothing. Each write is recorded as the key's, by name."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from membrane_es.access.keys import KeyRing
from membrane_es.commands.entries import entry_record
from membrane_es.engine.entries import ENTRY_ACTOR
from membrane_es.errors import ValidationError
from membrane_es.schema.entries import NewEntry

from .conftest import ALPHA, LOW, Serve, Served, ids, new_entry


def _position(served: Served) -> int:
    position: int = served.engine().application.recorder.max_notification_id()
    return position


@pytest.fixture
def three(served: Served) -> dict[str, dict[str, Any]]:
    """An unscoped entry, one in conversation 7 (the low key's) and one in conversation 8."""
    return {
        "unscoped": new_entry(served.alpha, title="shared runbook"),
        "mine": new_entry(served.alpha, title="conversation seven", conversation_id=7),
        "other": new_entry(served.alpha, title="conversation eight", conversation_id=8),
    }


def _refused(response: httpx.Response, status: int, field: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"].startswith(f"{field}:"), response.text


def test_revise_delete_and_invalidate_need_the_entry_within_the_ceiling(
    served: Served, three: dict[str, dict[str, Any]]
) -> None:
    low = served.low
    before = _position(served)

    def writes(entry_id: int) -> list[httpx.Response]:
        path = f"/v1/memory/entries/{entry_id}"
        return [
            low.patch(path, json={"title": "taken over"}),
            low.delete(path),
            low.delete(path, params={"erase": "true"}),
            low.post(f"{path}/invalidate"),
        ]

    for response in writes(three["unscoped"]["id"]):
        _refused(response, 403, "entry")
    absent = writes(9999)
    for response, like in zip(writes(three["other"]["id"]), absent, strict=True):
        assert response.status_code == 404  # the same answer as for an entry that is not there
        assert response.json() == like.json()
    assert _position(served) == before  # nothing written
    for name in ("unscoped", "other"):
        kept = served.alpha.get(f"/v1/memory/entries/{three[name]['id']}").json()
        assert {key: kept[key] for key in three[name]} == three[name]  # unrevised, active
    mine = f"/v1/memory/entries/{three['mine']['id']}"
    assert low.patch(mine, json={"title": "still mine"}).status_code == 200
    assert low.post(f"{mine}/invalidate").status_code == 200
    assert low.delete(mine).status_code == 200


def test_relations_need_both_entries_within_the_ceiling(
    served: Served, three: dict[str, dict[str, Any]]
) -> None:
    mine, unscoped, other = three["mine"]["id"], three["unscoped"]["id"], three["other"]["id"]
    before = _position(served)

    def relate(source: int, target: int) -> httpx.Response:
        body = {"source_id": source, "target_id": target, "relation": "relates_to"}
        return served.low.post("/v1/memory/relations", json=body)

    _refused(relate(mine, unscoped), 403, "target_id")
    _refused(relate(unscoped, mine), 403, "source_id")
    unseen = relate(mine, other)  # as for an entry that does not exist
    assert unseen.status_code == 400
    assert unseen.json() == {"error": f"target_id: entry {other} not found"}
    assert _position(served) == before
    assert served.alpha.get("/v1/memory/relations").json()["count"] == 0
    yours = new_entry(served.low, title="also conversation seven", conversation_id=7)
    assert relate(mine, yours["id"]).status_code == 201


def test_create_needs_its_scope_and_its_superseded_entries_within_the_ceiling(
    served: Served, three: dict[str, dict[str, Any]]
) -> None:
    before = _position(served)
    body = {"type": "user", "title": "replacement", "conversation_id": 7}
    _refused(served.low.post("/v1/memory/entries", json={**body, "conversation_id": 8}), 403,
             "conversation_id")  # fmt: skip
    _refused(served.low.post("/v1/memory/entries", json={**body, "conversation_id": None}), 403,
             "conversation_id")  # fmt: skip
    superseding = {**body, "supersedes_ids": [three["mine"]["id"], three["unscoped"]["id"]]}
    _refused(served.low.post("/v1/memory/entries", json=superseding), 403, "supersedes_ids")
    unseen = served.low.post(
        "/v1/memory/entries", json={**body, "supersedes_ids": [three["other"]["id"]]}
    )
    assert unseen.status_code == 400
    assert unseen.json()["error"] == (
        f"supersedes_ids: entry {three['other']['id']} not found or not active"
    )
    assert _position(served) == before  # nothing of the batch was written
    assert len(ids(served.alpha.get("/v1/memory/entries"))) == 3
    made = served.low.post(
        "/v1/memory/entries", json={**body, "supersedes_ids": [three["mine"]["id"]]}
    )
    assert made.status_code == 201


def test_erasure_needs_every_revision_within_the_ceiling(served: Served) -> None:
    # An entry whose first revision is unscoped and whose current one is in conversation 7
    # (revised through the record API, which may move a record's scope).
    first = new_entry(served.alpha, title="moved into conversation seven")
    record = entry_record(NewEntry(type="reference", title="now in seven", conversation_id=7))
    served.engine().supersede(first["record_id"], record, "test", "moved")
    path = f"/v1/memory/entries/{first['id']}"
    assert served.low.get(path).json()["conversation_id"] == 7
    _refused(served.low.delete(path, params={"erase": "true"}), 403, "entry")
    assert served.engine().retrieve_by_id(first["record_id"]).payload is not None  # not erased
    assert served.low.delete(path).status_code == 200  # hiding touches the current one only


def _actors(served: Served, record_id: str) -> list[str]:
    return [event.actor for event in served.engine().history(record_id)]


def test_writes_are_recorded_as_the_key_that_made_them(served: Served) -> None:
    alpha_name = "key:" + hashlib.sha256(ALPHA.encode()).hexdigest()[:12]
    low_name = "key:" + hashlib.sha256(LOW.encode()).hexdigest()[:12]
    entry = new_entry(served.alpha, title="first", conversation_id=7)
    revised = served.low.patch(f"/v1/memory/entries/{entry['id']}", json={"title": "second"})
    other = new_entry(served.low, title="other", conversation_id=7)
    served.low.post(
        "/v1/memory/relations",
        json={"source_id": other["id"], "target_id": entry["id"], "relation": "refines"},
    )
    served.alpha.post(f"/v1/memory/entries/{entry['id']}/invalidate")
    assert _actors(served, entry["record_id"]) == [alpha_name, low_name]  # created, superseded
    assert _actors(served, revised.json()["record_id"]) == [low_name, alpha_name]
    assert _actors(served, other["record_id"]) == [low_name, low_name]  # created, related
    served.alpha.delete(f"/v1/memory/entries/{other['id']}", params={"erase": "true"})
    assert _actors(served, other["record_id"])[-1] == alpha_name
    for record_id in (entry["record_id"], other["record_id"]):
        assert not any(key in actor for actor in _actors(served, record_id) for key in (ALPHA, LOW))


def test_a_named_key_writes_under_its_name_and_no_key_under_a_fixed_actor(
    serve: Serve, tmp_path: Path
) -> None:
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text(f'keys:\n  - key: "{ALPHA}"\n    tenant: "1"\n    name: ingest-bot\n')
    named = serve(keys=KeyRing.load("", keys_file))
    entry = new_entry(named.alpha)
    assert _actors(named, entry["record_id"]) == ["ingest-bot"]
    open_server = serve(keys=KeyRing(""))
    anonymous = new_entry(open_server.client(None))
    record = anonymous["record_id"]
    assert [e.actor for e in open_server.engine("").history(record)] == [ENTRY_ACTOR]


def test_a_key_name_is_checked_when_the_keys_file_is_read(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text('keys:\n  - key: "k"\n    name: "two words"\n')
    with pytest.raises(ValidationError) as refused:
        KeyRing.load("", keys_file)
    assert refused.value.field == "keys[0].name"


def test_a_ceilingless_key_writes_anywhere(served: Served, three: dict[str, Any]) -> None:
    for name in ("unscoped", "other"):
        path = f"/v1/memory/entries/{three[name]['id']}"
        assert served.alpha.patch(path, json={"title": f"{name} revised"}).status_code == 200
    assert served.alpha.get("/v1/memory/entries").json()["count"] == 3

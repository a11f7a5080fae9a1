"""Request bodies: strict JSON types as Arbiter's (a string is not a number), an empty or
undecodable body named as such, a lone surrogate named by its field, and a PATCH that would
change nothing refused without writing."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Served, ids, new_entry

JSON = {"content-type": "application/json"}


def _position(served: Served) -> int:
    position: int = served.engine().application.recorder.max_notification_id()
    return position


def _error(response: Any) -> str:
    assert response.status_code == 400, response.text
    assert set(response.json()) == {"error"}
    message: str = response.json()["error"]
    return message


@pytest.mark.parametrize(
    ("field", "body"),
    [
        ("conversation_id", {"conversation_id": "17"}),
        ("artifact_id", {"artifact_id": "88"}),
        ("created_at", {"created_at": "1767225600"}),
        ("supersedes_ids[0]", {"supersedes_ids": ["1"]}),
        ("tags[1]", {"tags": ["ok", 7]}),
        ("title", {"title": 5}),
        ("conversation_id", {"conversation_id": 1.5}),
        ("conversation_id", {"conversation_id": True}),
    ],
)
def test_a_value_of_the_wrong_json_type_is_400_naming_the_field(
    served: Served, field: str, body: dict[str, Any]
) -> None:
    response = served.alpha.post("/v1/memory/entries", json={"type": "user", "title": "x", **body})
    assert _error(response).startswith(f"{field}: Expected")
    assert ids(served.alpha.get("/v1/memory/entries")) == []


def test_relation_ids_are_numbers_not_strings(served: Served) -> None:
    a, b = new_entry(served.alpha), new_entry(served.alpha)
    body = {"source_id": str(a["id"]), "target_id": b["id"], "relation": "refines"}
    assert _error(served.alpha.post("/v1/memory/relations", json=body)).startswith("source_id:")


@pytest.mark.parametrize("raw", [b"", b"  \n"])
def test_an_empty_body_is_400_naming_the_body(served: Served, raw: bytes) -> None:
    entry = new_entry(served.alpha)
    for response in (
        served.alpha.post("/v1/memory/entries", content=raw, headers=JSON),
        served.alpha.patch(f"/v1/memory/entries/{entry['id']}", content=raw, headers=JSON),
        served.alpha.post("/v1/memory/relations", content=raw, headers=JSON),
    ):
        assert _error(response) == "body: a JSON object is required; the body is empty"


def test_a_missing_field_and_a_body_of_the_wrong_shape_are_named(served: Served) -> None:
    missing = served.alpha.post("/v1/memory/entries", json={"type": "user"})
    assert _error(missing) == "title: required"
    for body in ([], "entry", 3):
        shaped = served.alpha.post("/v1/memory/entries", json=body)
        assert _error(shaped).startswith("body: Expected `object`")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (rb'{"type":"user","title":"a\ud800b"}', "title"),
        (rb'{"type":"user","title":"x","tags":["ok","\udc00"]}', "tags[1]"),
        (rb'{"type":"user","title":"x","source":"\ud800"}', "source"),
    ],
)
def test_a_lone_surrogate_is_400_naming_its_field(served: Served, raw: bytes, field: str) -> None:
    response = served.alpha.post("/v1/memory/entries", content=raw, headers=JSON)
    assert _error(response) == f"{field}: not text: holds a lone UTF-16 surrogate escape"


def test_malformed_json_and_bytes_that_are_not_utf8_name_the_body(served: Served) -> None:
    malformed = served.alpha.post("/v1/memory/entries", content=b'{"type": ', headers=JSON)
    assert _error(malformed).startswith("body: not valid JSON:")
    latin1 = '{"type":"user","title":"caf\u00e9"}'.encode("latin-1")
    assert _error(served.alpha.post("/v1/memory/entries", content=latin1, headers=JSON)) == (
        "body: not UTF-8 text"
    )
    nan = served.alpha.post(
        "/v1/memory/entries", content=b'{"type":"user","title":"x","created_at":NaN}', headers=JSON
    )
    assert _error(nan) == "body: not valid JSON"
    assert ids(served.alpha.get("/v1/memory/entries")) == []


def test_a_patch_that_changes_nothing_is_400_and_writes_nothing(served: Served) -> None:
    entry = new_entry(served.alpha, title="same", content="text", tags=["a", "b"], artifact_id=4)
    path = f"/v1/memory/entries/{entry['id']}"
    before = _position(served)
    empty = served.alpha.patch(path, json={})
    assert _error(empty) == "body: no field to change: the patch is empty"
    for unchanged in (
        {"title": "same"},
        {"title": "same", "content": "text", "type": "reference"},
        {"tags": ["a", "b", "a"]},  # stored once each: the same tags
        {"artifact_id": 4},
    ):
        assert _error(served.alpha.patch(path, json=unchanged)) == (
            "body: no field to change: the patch equals the entry"
        )
    assert _position(served) == before
    assert served.alpha.get(path).json()["record_id"] == entry["record_id"]
    assert served.alpha.patch(path, json={"tags": ["b", "a"]}).status_code == 200
    assert served.alpha.patch(path, json={"artifact_id": None}).status_code == 200


def test_an_empty_patch_of_an_unknown_entry_is_still_a_bad_body(served: Served) -> None:
    response = served.alpha.patch("/v1/memory/entries/41", json={})
    assert _error(response).startswith("body: no field to change")


def test_invalidate_takes_no_body_or_a_strict_one(served: Served) -> None:
    entry = new_entry(served.alpha)
    path = f"/v1/memory/entries/{entry['id']}/invalidate"
    assert _error(served.alpha.post(path, json={"when": True})).startswith("when:")
    assert served.alpha.post(path).status_code == 200

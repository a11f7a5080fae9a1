"""Each class of bad input on every part of an HTTP request it reaches: lone surrogates
(``"\\ud800"`` escapes in JSON bodies, in every string field, in fields of other types and in
keys; their bytes in query strings), moments at and past the calendar's ends (``when``, and
epoch seconds in ``as_of``, ``since``, ``created_at``…), and writes or reads beyond a key's
ceiling. No answer is a 5xx; a 400 says what it refused; a refused write writes nothing."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx

from tests.faults import input_classes as classes

from .conftest import LOW, Serve, new_entry

ENTRY = {"type": "user", "title": "t", "content": "c", "tags": ["x"]}
ENTRY_STRINGS = ["type", "title", "content", "source"]
ENTRY_OTHERS = ["tags", "artifact_id", "conversation_id", "created_at", "supersedes_ids"]
EPOCH_PARAMS = ["as_of", "since", "before_updated_at"]
TEXT_PARAMS = ["q", "tag", "type", "decay", "explain"]


def _surrogate_values() -> list[Any]:
    wrong_types = [[s] for s in classes.LONE_SURROGATES[:2]] + [{"\ud800": 1}, {"k": "\udc00"}]
    return [*classes.LONE_SURROGATES, *wrong_types]


def _requests(entry_id: int, other_id: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(class, method, path, httpx arguments) for every value of every class."""
    cases: list[tuple[str, str, str, dict[str, Any]]] = []

    def body(kind: str, method: str, path: str, value: Any) -> None:
        text = json.dumps(value, ensure_ascii=True)  # lone surrogates as \\u escapes
        headers = {"Content-Type": "application/json"}
        cases.append((kind, method, path, {"content": text.encode(), "headers": headers}))

    entries, one = "/v1/memory/entries", f"/v1/memory/entries/{entry_id}"
    for value in _surrogate_values():
        for field in ENTRY_STRINGS + ENTRY_OTHERS:
            body("surrogate", "POST", entries, {**ENTRY, field: value})
            body("surrogate", "PATCH", one, {field: value})
        body("surrogate", "POST", entries, {**ENTRY, value if isinstance(value, str) else "k": 1})
        for field in ("source_id", "target_id", "relation"):
            relation = {"source_id": entry_id, "target_id": other_id, "relation": "refines"}
            body("surrogate", "POST", "/v1/memory/relations", {**relation, field: value})
        body("surrogate", "POST", f"{one}/invalidate", {"when": value})
    for surrogate in classes.LONE_SURROGATES:
        raw = surrogate.encode("utf-8", "surrogatepass")  # not UTF-8: what a raw client sends
        for param in TEXT_PARAMS:
            query = param.encode() + b"=" + b"".join(b"%%%02X" % byte for byte in raw)
            cases.append(("surrogate", "GET", f"{entries}?{query.decode()}", {}))
    for moment in classes.MOMENTS_PAST_THE_ENDS + classes.MOMENTS_AT_THE_ENDS:
        body("moment", "POST", f"{one}/invalidate", {"when": moment})
        for param in EPOCH_PARAMS:
            cases.append(("moment", "GET", entries, {"params": {param: moment}}))
    for seconds in classes.EPOCH_ENDS:
        body("moment", "POST", f"{one}/invalidate", {"when": seconds})
        body("moment", "POST", entries, {**ENTRY, "created_at": seconds})
        for param in EPOCH_PARAMS:
            cases.append(("moment", "GET", entries, {"params": {param: seconds}}))
    # The LOW key may read and write conversation 7 only.
    for conversation in (8, 0, 2**53, 2**63):
        body("ceiling", "POST", entries, {**ENTRY, "conversation_id": conversation})
        cases.append(("ceiling", "GET", entries, {"params": {"conversation_id": conversation}}))
    cases.append(("ceiling", "GET", one, {}))
    body("ceiling", "PATCH", one, {"content": "changed"})
    body("ceiling", "POST", f"{one}/invalidate", {})
    return cases


def test_every_class_on_every_part_of_a_request(serve: Serve) -> None:
    served = serve()
    first = new_entry(served.alpha, title="first")["id"]
    second = new_entry(served.alpha, title="second")["id"]
    log = served.engine("1").application.recorder
    tally: Counter[tuple[str, int]] = Counter()
    low = served.client(LOW)
    for kind, method, path, arguments in _requests(first, second):
        client: httpx.Client = low if kind == "ceiling" else served.alpha
        before = log.max_notification_id()
        response = client.request(method, path, **arguments)
        status = response.status_code
        tally[kind, status // 100 * 100] += 1
        assert status < 500, (method, path, arguments, response.text)
        if status >= 400:
            assert log.max_notification_id() == before, (method, path, "refused but wrote")
            assert response.json()["error"], (method, path, arguments)
        if status >= 300 or method != "POST" or not path.endswith("/invalidate"):
            continue
        # an invalidation that went through: the next case needs an active entry again
        first = new_entry(served.alpha, title="first again")["id"]
    for kind in classes.CLASSES:  # every class was generated, and refused
        assert tally[kind, 400] > 0, (kind, tally)

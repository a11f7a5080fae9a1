"""A bounded schemathesis run over the served OpenAPI document: generated requests to every
operation (valid and not) get no 5xx, and every answer conforms to the document; a request
refused (4xx) writes nothing, and a 400 names the parameter or field it refused."""

from __future__ import annotations

import re
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import ALPHA, Served, new_entry

EXAMPLES_PER_OPERATION = 25
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    content_type_conformance,
    status_code_conformance,
]
_WORD = re.compile(r"[A-Za-z_]+")


def request_fields(document: Any) -> set[str]:
    """The name of every parameter, and of every property of every request body (followed
    through ``$ref``), in an OpenAPI document: what a 400 may name."""
    schemas = document.get("components", {}).get("schemas", {})
    names: set[str] = set()
    seen: set[str] = set()

    def properties(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref not in seen:
                seen.add(ref)
                properties(schemas.get(ref.rsplit("/", 1)[-1]))
            if isinstance(node.get("properties"), dict):
                names.update(node["properties"])
            for value in node.values():
                properties(value)
        elif isinstance(node, list):
            for value in node:
                properties(value)

    for path in document["paths"].values():
        for operation in path.values():
            if not isinstance(operation, dict):
                continue
            names.update(p["name"] for p in operation.get("parameters", []) if "name" in p)
            properties(operation.get("requestBody"))
    return names


def names_a_field(error: str, names: set[str]) -> bool:
    """Whether the error message names one of ``names`` (or the body as a whole)."""
    return bool(names.intersection(_WORD.findall(error))) or "body" in error.lower()


def test_generated_requests_find_no_server_error_and_no_schema_violation(served: Served) -> None:
    for i in range(3):  # something to read, revise, relate and delete
        new_entry(served.alpha, title=f"entry {i}", tags=["t"], conversation_id=17)
    document = httpx.get(f"{served.base}/openapi.json").json()
    names = request_fields(document)
    assert {"limit", "entry_id", "title", "tags", "source_id", "when"} <= names
    schema = schemathesis.openapi.from_url(f"{served.base}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 12
    # The change stream never ends while the client stays (its parameters are checked as the
    # page's are: tests/integration/http/test_changes_route.py).
    operations = [op for op in operations if op.path != "/v1/memory/changes/stream"]
    headers = {"Authorization": f"Bearer {ALPHA}"}
    log = served.engine("1").application.recorder  # ALPHA's tenant
    refused = named = 0
    for operation in operations:

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def call(case: schemathesis.Case) -> None:
            nonlocal refused, named
            before = log.max_notification_id()
            response = case.call(base_url=served.base, headers=headers)
            case.validate_response(response, checks=CHECKS)
            status = response.status_code
            if 400 <= status < 500:
                refused += 1
                assert log.max_notification_id() == before, f"{case.path}: {status} but wrote"
            if status == 400:
                error = response.json()["error"]
                assert names_a_field(error, names), f"{case.method} {case.path}: {error!r}"
                named += 1

        call()
    assert refused and named  # the run did reach the checks it makes

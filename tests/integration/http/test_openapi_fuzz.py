"""A bounded schemathesis run over the served OpenAPI document: generated requests to every
operation (valid and not) get no 5xx, and every answer conforms to the document."""

from __future__ import annotations

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


def test_generated_requests_find_no_server_error_and_no_schema_violation(served: Served) -> None:
    for i in range(3):  # something to read, revise, relate and delete
        new_entry(served.alpha, title=f"entry {i}", tags=["t"], conversation_id=17)
    schema = schemathesis.openapi.from_url(f"{served.base}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 9
    headers = {"Authorization": f"Bearer {ALPHA}"}
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
            case.call_and_validate(base_url=served.base, headers=headers, checks=CHECKS)

        call()

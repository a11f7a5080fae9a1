"""The request checks of spec §8.4, in the reference's order and with its messages.

They run before the engine is touched; the first failure wins. Everything here raises
:class:`WireError`, which the service turns into a gRPC status as is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import grpc
import msgspec

from membrane_es.errors import ValidationError
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.timestamps import utc
from membrane_es.schema.validation import (
    MAX_IDS,
    MAX_LIMIT,
    MAX_PAYLOAD_BYTES,
    MAX_STRING_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS,
    check_amount,
    check_sensitivity,
)

MEMORY_TYPES = ", ".join(kind.value for kind in MemoryType)


class WireError(Exception):
    """A status to send as is: a code and the reference's message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message: str) -> WireError:
    return WireError(grpc.StatusCode.INVALID_ARGUMENT, message)


def check_length(field: str, value: str) -> None:
    if len(value.encode()) > MAX_STRING_BYTES:
        raise invalid(f"{field} exceeds maximum length of {MAX_STRING_BYTES}")


def check_tag_limits(tags: Sequence[str]) -> None:
    """The reference's limits on tags (their number and size); the engine checks the rest."""
    if len(tags) > MAX_TAGS:
        raise invalid(f"too many tags: {len(tags)} (max {MAX_TAGS})")
    for tag in tags:
        if len(tag.encode()) > MAX_TAG_BYTES:
            raise invalid(f"tag exceeds maximum length of {MAX_TAG_BYTES}")


def as_wire_error(check: Callable[..., object], *args: Any, **options: Any) -> None:
    """Run one of the engine's own checks, its failure a status with the same message."""
    try:
        check(*args, **options)
    except ValidationError as error:
        raise invalid(error.message) from None


def check_memory_type(field: str, value: str) -> None:
    if value not in MemoryType.__members__.values():
        raise invalid(f"{field} must be one of: {MEMORY_TYPES}")


def check_json_size(field: str, value: Any) -> None:
    size = len(msgspec.json.encode(value))  # compact UTF-8 JSON, as the reference measures
    if size > MAX_PAYLOAD_BYTES:
        raise invalid(f"{field} exceeds maximum payload size of {MAX_PAYLOAD_BYTES} bytes")


def parse_timestamp(value: str, message: str) -> datetime | None:
    """RFC 3339 (fraction optional, offset required); ``""`` is "not given"."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as error:
        raise invalid(f"{message}: {error}") from None
    if moment.tzinfo is None or "T" not in value.upper():
        raise invalid(f"{message}: {value!r} is not RFC 3339 (date, 'T', time and offset)")
    try:
        utc(moment)  # in range once in UTC, as every later use needs
    except ValueError as error:
        raise invalid(f"{message}: {error}") from None
    return moment


def check_capture(request: pb.CaptureMemoryRequest, content: Any, context: Any) -> None:
    for field in ("source", "source_kind", "reason_to_remember", "summary", "scope"):
        check_length(field, getattr(request, field))
    check_tag_limits(request.tags)
    as_wire_error(check_sensitivity, "sensitivity", request.sensitivity)
    if request.proposed_type:
        check_memory_type("proposed_type", request.proposed_type)
    check_json_size("content", content)
    check_json_size("context", context)


def require_trust(request: pb.RetrieveGraphRequest | pb.RetrieveByIDRequest) -> None:
    if not request.HasField("trust"):
        raise invalid("trust context is required")


def check_retrieve_graph(request: pb.RetrieveGraphRequest) -> None:
    require_trust(request)
    check_length("task_descriptor", request.task_descriptor)
    as_wire_error(
        check_sensitivity, "trust.max_sensitivity", request.trust.max_sensitivity, required=True
    )
    if request.min_salience < 0 or not math.isfinite(request.min_salience):
        raise invalid("min_salience must be non-negative and finite")
    for field in ("root_limit", "node_limit", "edge_limit"):
        value = getattr(request, field)
        if not 0 <= value <= MAX_LIMIT:
            raise invalid(f"{field} must be between 0 and {MAX_LIMIT}")
    if not -1 <= request.max_hops <= MAX_LIMIT:
        raise invalid(f"max_hops must be between -1 and {MAX_LIMIT}")
    for i, kind in enumerate(request.memory_types):
        check_memory_type(f"memory_types[{i}]", kind)


def check_retrieve_by_id(request: pb.RetrieveByIDRequest) -> None:
    require_trust(request)
    as_wire_error(
        check_sensitivity, "trust.max_sensitivity", request.trust.max_sensitivity, required=True
    )


def check_merge_ids(ids: Sequence[str]) -> None:
    if not ids:
        raise invalid("ids must not be empty")
    if len(ids) > MAX_IDS:
        raise invalid(f"too many ids: {len(ids)} (max {MAX_IDS})")


def check_actor_rationale(actor: str, rationale: str) -> None:
    check_length("actor", actor)
    check_length("rationale", rationale)


def check_penalize(request: pb.PenalizeRequest) -> None:
    as_wire_error(check_amount, "amount", request.amount)
    check_actor_rationale(request.actor, request.rationale)

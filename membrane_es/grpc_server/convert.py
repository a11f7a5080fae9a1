"""Records and results ⇄ ``membrane.v1`` messages (spec §8.3).

Both directions go through the schema's JSON form, which already has the wire's field names:
a record is turned into builtins by msgspec, its times into the reference's RFC 3339 form,
its payload wrapped into the ``Payload`` oneof, and parsed into the message; an incoming
message is printed with every scalar (so a ``0`` confidence stays ``0``, as on the
reference server), cleaned of the empty strings proto3 uses for "unset", and validated by
the same :func:`~membrane_es.schema.validation.coerce_record` the library uses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import msgspec
from google.protobuf import json_format, struct_pb2
from google.protobuf.message import Message

from membrane_es.errors import ValidationError
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.schema.capture import CaptureMemoryResult
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import GraphEdge, MemoryRecord, TrustContext
from membrane_es.schema.results import RetrieveGraphResult, SelectionResult
from membrane_es.schema.timestamps import rfc3339
from membrane_es.schema.validation import coerce_record

# --- outgoing: server → client --------------------------------------------------------------


def record_to_wire(record: MemoryRecord) -> pb.MemoryRecord:
    """One record as the reference server sends it.

    Built by the message constructors from the record's builtins, the user-JSON parts
    turned into ``Value`` messages first: several times faster than ``ParseDict``, which
    walks every field in Python.
    """
    data = _record_dict(record)
    # What resolution on write did is not part of Membrane's message (the record's
    # relations and revision state say what changed).
    data.pop("resolution", None)
    payload = data.get("payload")
    if payload is not None:
        for variant, body in payload.items():
            _values_in_payload(variant, body)
    if "interpretation" in data:
        data["interpretation"] = pb.Interpretation(**data["interpretation"])
    return pb.MemoryRecord(**data)


def records_to_wire(records: Iterable[MemoryRecord]) -> list[pb.MemoryRecord]:
    return [record_to_wire(record) for record in records]


def edge_to_wire(edge: GraphEdge) -> pb.GraphEdge:
    return pb.GraphEdge(
        source_id=edge.source_id,
        predicate=edge.predicate,
        target_id=edge.target_id,
        weight=edge.weight,
        created_at=rfc3339(edge.created_at),
    )


def selection_to_wire(selection: SelectionResult) -> pb.SelectionResult:
    return pb.SelectionResult(
        selected=records_to_wire(selection.selected),
        confidence=selection.confidence,
        needs_more=selection.needs_more,
        scores=dict(selection.scores),
    )


def capture_to_wire(result: CaptureMemoryResult) -> pb.CaptureMemoryResponse:
    return pb.CaptureMemoryResponse(
        primary_record=record_to_wire(result.primary_record),
        created_records=records_to_wire(result.created_records),
        edges=[edge_to_wire(edge) for edge in result.edges],
    )


def graph_to_wire(result: RetrieveGraphResult) -> pb.RetrieveGraphResponse:
    response = pb.RetrieveGraphResponse(
        nodes=[
            pb.GraphNode(record=record_to_wire(node.record), root=node.root, hop=node.hop)
            for node in result.nodes
        ],
        edges=[edge_to_wire(edge) for edge in result.edges],
        root_ids=list(result.root_ids),
    )
    # absent, not an empty message, when there is none: the SDK then returns None (§8.7)
    if result.selection is not None:
        response.selection.CopyFrom(selection_to_wire(result.selection))
    return response


def metrics_to_wire(snapshot: Mapping[str, Any]) -> pb.MetricsResponse:
    response = pb.MetricsResponse()
    json_format.ParseDict(_wire_json(snapshot), response.snapshot)
    return response


def _record_dict(record: MemoryRecord) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(record, builtin_types=(datetime,))
    data = _wire_json(data)
    # always present as messages on the reference wire, even when empty
    data.setdefault("lifecycle", {})
    data.setdefault("provenance", {})
    payload = data.pop("payload", None)
    if payload is not None:
        variant = str(payload.get("kind") or record.type.value)
        # a nil object, tool result or constraint value still travels, as an explicit null
        for path in _VALUE_FIELDS.get(variant, ()):
            for holder, key in _holders(payload, path):
                holder.setdefault(key, None)
        if variant == "semantic":
            payload.setdefault("validity", {})  # always present, as on the reference wire
        data["payload"] = {variant: payload}
    return data


# Where a payload holds user JSON: fields that are one Value, and maps of Values, by variant;
# "a.b" reaches into a nested message, "a[]" into each element of a list.
_VALUE_FIELDS: dict[str, tuple[str, ...]] = {
    "episodic": ("tool_graph[].result",),
    "working": ("active_constraints[].value",),
    "semantic": ("object",),
}
_VALUE_MAPS: dict[str, tuple[str, ...]] = {
    "episodic": ("tool_graph[].args", "environment.context"),
    "semantic": ("validity.conditions",),
    "competence": ("triggers[].conditions", "recipe[].args_schema"),
    "plan_graph": (
        "constraints",
        "inputs_schema",
        "outputs_schema",
        "nodes[].params",
        "nodes[].guards",
    ),
}


def _values_in_payload(variant: str, body: dict[str, Any]) -> None:
    for path in _VALUE_FIELDS.get(variant, ()):
        for holder, key in _holders(body, path):
            if key in holder:
                holder[key] = to_value(holder[key])
    for path in _VALUE_MAPS.get(variant, ()):
        for holder, key in _holders(body, path):
            if key in holder:
                holder[key] = {k: to_value(v) for k, v in holder[key].items()}


def _holders(body: dict[str, Any], path: str) -> list[tuple[dict[str, Any], str]]:
    """The dicts that hold the last field of ``path``, each with that field's name."""
    *steps, last = path.split(".")
    holders = [body]
    for step in steps:
        name = step.removesuffix("[]")
        inner_holders: list[dict[str, Any]] = []
        for holder in holders:
            inner = holder.get(name)
            if inner is not None:
                inner_holders.extend(inner if step.endswith("[]") else [inner])
        holders = inner_holders
    return [(holder, last) for holder in holders]


def to_value(data: Any) -> struct_pb2.Value:
    """Plain JSON as a ``google.protobuf.Value`` (``None`` → an explicit null)."""
    value = struct_pb2.Value()
    if data is None:
        value.null_value = struct_pb2.NULL_VALUE
    elif isinstance(data, bool):
        value.bool_value = data
    elif isinstance(data, int | float):
        value.number_value = data
    elif isinstance(data, str):
        value.string_value = data
    elif isinstance(data, dict):
        value.struct_value.update(data)
    elif isinstance(data, list | tuple):
        value.list_value.extend(data)
    else:
        raise TypeError(f"not a JSON value: {type(data).__name__}")
    return value


def _wire_json(value: Any) -> Any:
    """Builtins with times in the reference form and empty maps dropped (Go sends nil)."""
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, dict):
        return {key: _wire_json(item) for key, item in value.items() if item != {}}
    if isinstance(value, list):
        return [_wire_json(item) for item in value]
    return value


# --- incoming: client → server --------------------------------------------------------------


def record_from_wire(message: Message, present: bool, field: str) -> MemoryRecord:
    """The record a revision RPC carries, validated; errors read ``invalid <field>: …``."""
    if not present:
        raise ValidationError(field, f"invalid {field}: record is required")
    assert isinstance(message, pb.MemoryRecord)
    if not message.HasField("payload") or message.payload.WhichOneof("kind") is None:
        raise ValidationError(field, f"invalid {field}: payload is required")
    data = _to_dict(message, field, record=True)
    data = _from_wire_json(data)
    try:
        return coerce_record(data, field)
    except ValidationError as error:
        raise ValidationError(error.field, f"invalid {field}: {_relative(error, field)}") from None


def trust_from_wire(message: pb.TrustContext) -> TrustContext:
    """A request's trust context; the caller has already checked it is present and valid."""
    return TrustContext(
        max_sensitivity=Sensitivity(message.max_sensitivity),
        authenticated=message.authenticated,
        actor_id=message.actor_id,
        scopes=list(message.scopes),
    )


def value_from_wire(message: Message, present: bool, field: str) -> Any:
    """A ``google.protobuf.Value`` as plain JSON (``None`` when absent)."""
    if not present:
        return None
    return _to_dict(message, field)


def _to_dict(message: Message, field: str, *, record: bool = False) -> Any:
    """``MessageToDict`` (for a record: with wire field names and every scalar), except that
    a NaN or infinite number inside a ``Value`` (JSON has neither) is a
    :class:`ValidationError` naming where it is, not an exception."""
    try:
        return json_format.MessageToDict(
            message,
            preserving_proto_field_name=record,
            always_print_fields_with_no_presence=record,
        )
    except (json_format.SerializeToJsonError, ValueError) as error:
        where = _nonfinite_number(message, field)
        if where is None:
            raise ValidationError(field, f"{field}: {error}") from None
        raise ValidationError(where, f"{where}: NaN and infinite numbers are not JSON") from None


def _nonfinite_number(message: Message, path: str) -> str | None:
    """The path of the first NaN or infinite ``number_value`` inside ``message``."""
    if isinstance(message, struct_pb2.Value):
        kind = message.WhichOneof("kind")
        if kind == "number_value":
            return None if math.isfinite(message.number_value) else path
        if kind == "struct_value":
            return _nonfinite_number(message.struct_value, path)
        if kind == "list_value":
            return _nonfinite_number(message.list_value, path)
        return None
    if isinstance(message, struct_pb2.Struct):
        for key, item in message.fields.items():
            found = _nonfinite_number(item, f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(message, struct_pb2.ListValue):
        for i, item in enumerate(message.values):
            found = _nonfinite_number(item, f"{path}[{i}]")
            if found:
                return found
        return None
    for descriptor, item in message.ListFields():
        where = f"{path}.{descriptor.name}"
        if descriptor.message_type is None:
            continue
        if descriptor.is_repeated:
            items = item.values() if descriptor.message_type.GetOptions().map_entry else item
            for i, element in enumerate(items):
                found = _nonfinite_number(element, f"{where}[{i}]")
                if found:
                    return found
        else:
            found = _nonfinite_number(item, where)
            if found:
                return found
    return None


# int64 fields arrive from MessageToDict as decimal strings (proto3 JSON mapping)
_INT64_FIELDS = frozenset(
    {
        "half_life_seconds",
        "max_age_seconds",
        "success_count",
        "failure_count",
        "execution_count",
    }
)
# Fields holding user JSON (Values and maps of Values): their contents are never cleaned.
_OPAQUE = frozenset(
    path.rsplit(".", 1)[-1]
    for paths in (*_VALUE_FIELDS.values(), *_VALUE_MAPS.values())
    for path in paths
)


def _from_wire_json(value: Any) -> Any:
    """Drops proto3's "unset" empty strings (so schema defaults and ``None`` times apply)."""
    if isinstance(value, dict):
        cleaned: dict[str, Any] = {}
        for key, item in value.items():
            if key in _OPAQUE:
                cleaned[key] = item
            elif key in _INT64_FIELDS and isinstance(item, str):
                cleaned[key] = int(item)
            elif item == "":
                continue
            else:
                cleaned[key] = _from_wire_json(item)
        return cleaned
    if isinstance(value, list):
        return [_from_wire_json(item) for item in value]
    return value


def _relative(error: ValidationError, field: str) -> str:
    """``new_record.created_at: …`` → ``created_at: …``, as the reference words it."""
    where = error.field.removeprefix(field).lstrip(".")
    if not where or error.message.startswith(where):
        return error.message
    return f"{where}: {error.message}"

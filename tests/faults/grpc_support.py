"""A daemon on loopback for the fault tests, and hypothesis strategies that fill any
``membrane.v1`` or ``membrane_es.v1`` request message from its descriptor."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from membrane_es.grpc_server.config import DaemonConfig
from membrane_es.grpc_server.server import Daemon
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2 as es_pb

API_KEY = "fault-test-secret"
AUTH = (("authorization", f"Bearer {API_KEY}"),)
# Every unary RPC the daemon serves: Membrane's contract and our own service (Forget). The
# change feed streams (a follow never ends on its own): its own tests fuzz it
# (tests/integration/grpc/test_changes_rpc.py).
SERVICES = (
    pb.DESCRIPTOR.services_by_name["MembraneService"],
    es_pb.DESCRIPTOR.services_by_name["MembraneEsService"],
)
UNARY = [m for service in SERVICES for m in service.methods if not m.server_streaming]
METHODS = {method.name: method for method in UNARY}
assert len(METHODS) == len(UNARY), "an RPC name repeats"


@contextmanager
def running_daemon(path: Path, **overrides: Any) -> Iterator[Daemon]:
    settings = {
        "db_path": str(path),
        "listen_addr": "127.0.0.1:0",
        "api_key": API_KEY,
        "consolidation_interval": "0",
        "rate_limit_per_second": 0,  # the properties call far faster than a client would
        **overrides,
    }
    daemon = Daemon(msgspec.convert(settings, DaemonConfig)).start()
    try:
        yield daemon
    finally:
        daemon.stop(grace=0)


def event_count(daemon: Daemon) -> int:
    return daemon.tenants.get("").application.recorder.max_notification_id() or 0


def path_of(method: str) -> str:
    return f"/{METHODS[method].containing_service.full_name}/{method}"


# --- messages filled from their descriptors -----------------------------------------------

_NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 0.0, 1e308]),
)
_TEXT = st.text(max_size=12)
_JSON: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)),
    max_leaves=8,
)

_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FieldDescriptor.TYPE_DOUBLE: _NUMBERS,
    FieldDescriptor.TYPE_FLOAT: st.floats(width=32, allow_nan=True, allow_infinity=True),
    FieldDescriptor.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: st.integers(-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: st.integers(-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: st.integers(0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: st.integers(0, 2**64 - 1),
    FieldDescriptor.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: st.integers(-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: st.integers(-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: st.integers(0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: st.integers(0, 2**32 - 1),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_STRING: st.one_of(
        _TEXT, st.sampled_from(["low", "hyper", "semantic", "observation", "", "x" * 300])
    ),
    FieldDescriptor.TYPE_BYTES: st.binary(max_size=12),
}


def _value(data: Any) -> struct_pb2.Value:
    value = struct_pb2.Value()
    if data is None:
        value.null_value = struct_pb2.NULL_VALUE
    elif isinstance(data, bool):
        value.bool_value = data
    elif isinstance(data, float):
        value.number_value = data
    elif isinstance(data, str):
        value.string_value = data
    elif isinstance(data, list):
        value.list_value.values.extend(_value(item) for item in data)
    else:
        for key, item in data.items():
            value.struct_value.fields[key].CopyFrom(_value(item))
    return value


def messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """Any message of ``descriptor``'s type: each field set or not, scalars over their
    whole range (NaN and infinities included), ``Value`` fields any JSON with NaN/Inf."""
    message_class: Any = pb.__dict__.get(descriptor.name) or _well_known(descriptor)

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        message = message_class()
        for field in descriptor.fields:
            if not draw(st.booleans()):
                continue
            _fill(draw, message, field, depth)
        return message

    return build()


def _well_known(descriptor: Descriptor) -> Any:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


def _fill(draw: st.DrawFn, message: Any, field: FieldDescriptor, depth: int) -> None:
    target = field.message_type
    if target is not None and target.GetOptions().map_entry:
        value_field = target.fields_by_name["value"]
        for _ in range(draw(st.integers(0, 2))):
            key = draw(_TEXT)
            if value_field.message_type is None:
                getattr(message, field.name)[key] = draw(_SCALARS[value_field.type])
            else:
                getattr(message, field.name)[key].CopyFrom(_nested(draw, value_field, depth))
        return
    if field.is_repeated:
        for _ in range(draw(st.integers(0, 2))):
            if target is None:
                getattr(message, field.name).append(draw(_scalar(field)))
            else:
                getattr(message, field.name).add().CopyFrom(_nested(draw, field, depth))
        return
    if target is None:
        setattr(message, field.name, draw(_scalar(field)))
    else:
        getattr(message, field.name).CopyFrom(_nested(draw, field, depth))


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.enum_type is not None:
        return st.sampled_from([v.number for v in field.enum_type.values])
    return _SCALARS[field.type]


def _nested(draw: st.DrawFn, field: FieldDescriptor, depth: int) -> Message:
    target = field.message_type
    if target.full_name == "google.protobuf.Value":
        return _value(draw(_JSON))
    if target.full_name == "google.protobuf.Struct":
        struct = struct_pb2.Struct()
        struct.update({})
        for key, item in draw(st.dictionaries(_TEXT, _JSON, max_size=3)).items():
            struct.fields[key].CopyFrom(_value(item))
        return struct
    if target.full_name == "google.protobuf.Timestamp" or depth > 4:
        return _well_known(target)()
    return draw(messages(target, depth + 1))

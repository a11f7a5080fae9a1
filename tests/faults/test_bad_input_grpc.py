"""Bad input on every ``membrane.v1`` and ``membrane_es.v1`` RPC, property-based, through a
generic channel: any message of the request's type with any field values (NaN and infinities
in numbers and in ``Value`` content included), arbitrary bytes, bytes of another message
type, and content nested past protobuf's limit. No call ends INTERNAL or UNKNOWN; a call that
fails writes nothing; the API key is checked before a request's bytes are parsed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es.grpc_server.server import Daemon
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from tests.faults import input_classes as classes
from tests.faults.grpc_support import (
    AUTH,
    METHODS,
    event_count,
    messages,
    path_of,
    running_daemon,
)

NEVER = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
# Where each revision RPC names the records it touches: filled with real ids half the time.
ID_FIELDS = {
    "RetrieveByID": ["id"],
    "Supersede": ["old_id"],
    "Fork": ["source_id"],
    "Retract": ["id"],
    "Reinforce": ["id"],
    "Penalize": ["id"],
    "Contest": ["id", "contesting_ref"],
    "Merge": ["ids"],
    "Forget": ["id"],
}


class Served:
    def __init__(self, daemon: Daemon, channel: grpc.Channel) -> None:
        self.daemon = daemon
        self.channel = channel
        self.ids: list[str] = []

    def call(
        self, method: str, payload: bytes, metadata: tuple[tuple[str, str], ...] = AUTH
    ) -> tuple[grpc.StatusCode, str]:
        raw = self.channel.unary_unary(path_of(method))  # bytes in, bytes out
        try:
            raw(payload, metadata=metadata, timeout=30)
        except grpc.RpcError as error:
            return error.code(), error.details() or ""
        return grpc.StatusCode.OK, ""

    def new_record(self) -> str:
        engine = self.daemon.tenants.get("")
        record = engine.capture_memory(
            {"subject": "s", "predicate": "p", "object": "o"}, source_kind="observation"
        )
        fact = next(r for r in record.created_records if r.type == "semantic")
        return fact.id


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path: Path = tmp_path_factory.mktemp("grpc-faults")
    with running_daemon(path / "store") as daemon:
        with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
            yield Served(daemon, channel)


def _expect_clean(served: Served, method: str, payload: bytes) -> grpc.StatusCode:
    before = event_count(served.daemon)
    code, details = served.call(method, payload)
    assert code not in NEVER, f"{method}: {code} {details}"
    if code is not grpc.StatusCode.OK:
        assert event_count(served.daemon) == before, f"{method} failed ({details}) but wrote"
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        assert details
    return code


SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(data=st.data())
def test_any_request_of_the_right_type(served: Served, data: st.DataObject) -> None:
    method = data.draw(st.sampled_from(sorted(METHODS)), label="rpc")
    request: Any = data.draw(messages(METHODS[method].input_type), label="request")
    for name in ID_FIELDS.get(method, []):
        if data.draw(st.booleans(), label=f"real {name}"):
            known = served.new_record()
            field = getattr(request, name)
            if isinstance(field, str):
                setattr(request, name, known)
            else:
                field.extend([known, served.new_record()])
    _expect_clean(served, method, request.SerializeToString())


@SETTINGS
@given(method=st.sampled_from(sorted(METHODS)), payload=st.binary(max_size=64))
def test_arbitrary_bytes(served: Served, method: str, payload: bytes) -> None:
    _expect_clean(served, method, payload)


@SETTINGS
@given(
    method=st.sampled_from(sorted(METHODS)),
    other=st.sampled_from(sorted(METHODS)),
    data=st.data(),
)
def test_another_messages_bytes(
    served: Served, method: str, other: str, data: st.DataObject
) -> None:
    request = data.draw(messages(METHODS[other].input_type), label="other request")
    _expect_clean(served, method, request.SerializeToString())


MALFORMED = b"\x0a\xff\xff\xff\xff\x0f"  # field 1, length-delimited, length beyond the end


def _length_delimited(field: int, body: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(body)) + body


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _deep_content(levels: int) -> bytes:
    """A capture whose content is a list in a list… ``levels`` deep: written byte by byte,
    since protobuf itself refuses to build a message nested past its limit."""
    value = _length_delimited(3, b"leaf")  # Value.string_value
    for _ in range(levels):
        value = _length_delimited(6, _length_delimited(1, value))  # Value.list_value.values
    return _length_delimited(1, b"c") + _length_delimited(2, b"event") + _length_delimited(3, value)


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ((), grpc.StatusCode.UNAUTHENTICATED),
        ((("authorization", "Bearer wrong"),), grpc.StatusCode.UNAUTHENTICATED),
        (AUTH, grpc.StatusCode.INVALID_ARGUMENT),
    ],
    ids=["no key", "wrong key", "right key"],
)
@pytest.mark.parametrize("payload", [MALFORMED, _deep_content(200)], ids=["malformed", "deep"])
def test_the_key_is_checked_before_the_bytes_are_parsed(
    served: Served,
    metadata: tuple[tuple[str, str], ...],
    expected: grpc.StatusCode,
    payload: bytes,
) -> None:
    before = event_count(served.daemon)
    code, details = served.call("CaptureMemory", payload, metadata)
    assert code is expected, details
    assert "Exception" not in details
    assert event_count(served.daemon) == before


def _semantic(obj: struct_pb2.Value) -> pb.MemoryRecord:
    record = pb.MemoryRecord(type="semantic", sensitivity="low", confidence=0.9, salience=1)
    record.payload.semantic.subject = "s"
    record.payload.semantic.predicate = "p"
    record.payload.semantic.object.CopyFrom(obj)
    record.provenance.sources.add(kind="observation", ref="r")
    return record


def _nan_requests(known: str) -> list[tuple[str, bytes, str]]:
    nan = struct_pb2.Value(number_value=float("nan"))
    inf = struct_pb2.Value()
    inf.struct_value.fields["x"].list_value.values.add(number_value=float("-inf"))
    capture = pb.CaptureMemoryRequest(source="c", source_kind="event", content=inf)
    return [
        ("CaptureMemory", capture.SerializeToString(), "content.x[0]"),
        (
            "Supersede",
            pb.SupersedeRequest(
                old_id=known, new_record=_semantic(nan), actor="a", rationale="r"
            ).SerializeToString(),
            "new_record",
        ),
        (
            "Fork",
            pb.ForkRequest(
                source_id=known, forked_record=_semantic(inf), actor="a", rationale="r"
            ).SerializeToString(),
            "forked_record",
        ),
        (
            "Merge",
            pb.MergeRequest(
                ids=[known], merged_record=_semantic(nan), actor="a", rationale="r"
            ).SerializeToString(),
            "merged_record",
        ),
    ]


@pytest.mark.parametrize("case", range(4), ids=["capture", "supersede", "fork", "merge"])
def test_nan_and_infinity_in_values_are_invalid_arguments(served: Served, case: int) -> None:
    method, payload, field = _nan_requests(served.new_record())[case]
    before = event_count(served.daemon)
    code, details = served.call(method, payload)
    assert code is grpc.StatusCode.INVALID_ARGUMENT, details
    assert field in details
    assert "Fail to serialize" not in details
    assert event_count(served.daemon) == before


# --- each class of input that once escaped, on purpose (tests/faults/input_classes.py) ----

PLACEHOLDER = "\x01\x02\x03"  # three bytes on the wire, where a lone surrogate's would go


def _string_paths(descriptor: Any, depth: int = 0) -> list[tuple[str, ...]]:
    """Every string field of a message, and of the messages it holds (not repeated), as
    paths of field names."""
    paths: list[tuple[str, ...]] = []
    for field in descriptor.fields:
        if field.type == FieldDescriptor.TYPE_STRING:
            paths.append((field.name,))
        elif (
            field.message_type is not None
            and not field.is_repeated
            and depth < 2
            and not field.message_type.full_name.startswith("google.protobuf")
        ):
            paths += [(field.name, *rest) for rest in _string_paths(field.message_type, depth + 1)]
    return paths


def _with_surrogate(request: Any, path: tuple[str, ...], surrogate: str) -> bytes:
    """The request's bytes with one string field holding a lone surrogate, encoded as a
    client that does not check UTF-8 would send it (protobuf refuses to build it)."""
    holder = request
    for name in path[:-1]:
        holder = getattr(holder, name)
    field = holder.DESCRIPTOR.fields_by_name[path[-1]]
    if field.is_repeated:
        getattr(holder, path[-1]).append(PLACEHOLDER)
    else:
        setattr(holder, path[-1], PLACEHOLDER)
    lone = next(c for c in surrogate if 0xD800 <= ord(c) <= 0xDFFF)
    wire = lone.encode("utf-8", "surrogatepass")  # three bytes
    return request.SerializeToString().replace(PLACEHOLDER.encode(), wire, 1)


@SETTINGS
@given(data=st.data())
def test_a_lone_surrogate_in_any_string_field(served: Served, data: st.DataObject) -> None:
    method = data.draw(st.sampled_from(sorted(METHODS)), label="rpc")
    descriptor = METHODS[method].input_type
    paths = _string_paths(descriptor)
    if not paths:
        return
    request: Any = data.draw(messages(descriptor), label="request")
    path = data.draw(st.sampled_from(paths), label="field")
    surrogate = data.draw(classes.SURROGATE_TEXT, label="surrogate")
    code = _expect_clean(served, method, _with_surrogate(request, path, surrogate))
    assert code is not grpc.StatusCode.OK, (method, path)  # not valid UTF-8: never taken


READS_AS_OF = ["RetrieveGraph", "RetrieveByID", "GetMetrics"]


@pytest.mark.parametrize("moment", classes.MOMENTS_PAST_THE_ENDS + classes.MOMENTS_AT_THE_ENDS)
def test_moments_at_and_past_the_calendars_ends(served: Served, moment: str) -> None:
    past = moment in classes.MOMENTS_PAST_THE_ENDS
    capture = pb.CaptureMemoryRequest(source="c", source_kind="event", timestamp=moment)
    capture.content.string_value = "a note"
    code = _expect_clean(served, "CaptureMemory", capture.SerializeToString())
    assert code is (grpc.StatusCode.INVALID_ARGUMENT if past else code)
    known = served.new_record()
    for method in READS_AS_OF:
        request: Any = METHODS[method].input_type
        message = pb.__dict__[request.name]()
        if method == "RetrieveByID":
            message.id = known
        if method != "GetMetrics":
            message.trust.max_sensitivity = "hyper"
        code, details = served.call(
            method, message.SerializeToString(), (*AUTH, ("x-membrane-as-of", moment))
        )
        assert code not in NEVER, (method, moment, details)
        if past:
            assert code is grpc.StatusCode.INVALID_ARGUMENT and "as-of" in details, details


# Metadata values are printable ASCII (a client refuses anything else before sending).
PRINTABLE = st.characters(min_codepoint=0x20, max_codepoint=0x7E)


@given(position=st.one_of(st.text(PRINTABLE, max_size=30), st.integers().map(str)))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_as_of_positions_fuzzed_are_clean(served: Served, position: str) -> None:
    """Any ``x-membrane-as-of-position`` text: an answer or INVALID_ARGUMENT, never a fault."""
    known = served.new_record()
    for method in READS_AS_OF:
        request: Any = METHODS[method].input_type
        message = pb.__dict__[request.name]()
        if method == "RetrieveByID":
            message.id = known
        if method != "GetMetrics":
            message.trust.max_sensitivity = "hyper"
        metadata = (*AUTH, ("x-membrane-as-of-position", position))
        code, details = served.call(method, message.SerializeToString(), metadata)
        assert code not in NEVER, (method, position, details)
        if not (position.strip().isascii() and position.strip().isdigit()):
            assert code is grpc.StatusCode.INVALID_ARGUMENT, (method, position, details)


CEILING_KEY = "ceiling-test-secret"


@pytest.fixture(scope="module")
def ceiling_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path: Path = tmp_path_factory.mktemp("grpc-ceiling")
    keys = path / "keys.yaml"
    keys.write_text(f"keys:\n  - key: {CEILING_KEY}\n    max_sensitivity: low\n")
    with running_daemon(path / "store", api_keys_file=str(keys)) as daemon:
        with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
            yield Served(daemon, channel)


@pytest.mark.parametrize("level", classes.ABOVE_CEILING)
def test_levels_above_a_keys_ceiling(ceiling_served: Served, level: str) -> None:
    auth = (("authorization", f"Bearer {CEILING_KEY}"),)
    capture = pb.CaptureMemoryRequest(
        source="c", source_kind="event", sensitivity=level.encode("utf-8", "replace").decode()
    )
    capture.content.string_value = "a note"
    known = ceiling_served.new_record()
    supersede = pb.SupersedeRequest(
        old_id=known, new_record=_semantic(struct_pb2.Value(string_value="x")), actor="a"
    )
    supersede.rationale = "r"
    supersede.new_record.sensitivity = capture.sensitivity
    before = event_count(ceiling_served.daemon)
    for method, request in (("CaptureMemory", capture), ("Supersede", supersede)):
        code, details = ceiling_served.call(method, request.SerializeToString(), auth)
        assert code in {grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT}, (
            method,
            level,
            code,
            details,
        )
        assert details
    assert event_count(ceiling_served.daemon) == before

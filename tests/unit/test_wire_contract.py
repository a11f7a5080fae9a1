"""Our ``membrane.v1`` proto is Membrane's, field for field, and the committed stubs are
the proto's.

``data/membrane_v1_messages.md`` is the message list of the reference contract (spec §8.2),
kept verbatim; every message, field name, number and (where it states one) type in it must
match our descriptor, and our messages must have no fields it lacks — so a client generated
from either proto exchanges the same bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf.descriptor import FieldDescriptor

from membrane_es.grpc_server import codegen
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb

# whitespace normalised: the list wraps lines in the middle of entries
SPEC = " ".join((Path(__file__).parent / "data" / "membrane_v1_messages.md").read_text().split())
_FIELD = re.compile(r"(\d+) `(\w+)`(?: (repeated \w+(?:\.\w+)*|map<[^>]+>|\w+(?:\.\w+)*))?")
_SCALARS = {
    "string": FieldDescriptor.TYPE_STRING,
    "double": FieldDescriptor.TYPE_DOUBLE,
    "int32": FieldDescriptor.TYPE_INT32,
    "int64": FieldDescriptor.TYPE_INT64,
    "bool": FieldDescriptor.TYPE_BOOL,
}


def _spec_messages() -> dict[str, dict[str, tuple[int, str | None]]]:
    parts = re.split(r"\*\*(\w+)\*\*:", SPEC)
    messages: dict[str, dict[str, tuple[int, str | None]]] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name == "Payload":
            pairs = re.findall(r"(\d+) (\w+) (\w+Payload)", body)
            messages[name] = {field: (int(n), kind) for n, field, kind in pairs}
            continue
        messages[name] = {field: (int(n), kind or None) for n, field, kind in _FIELD.findall(body)}
    return messages


MESSAGES = _spec_messages()


def test_the_message_list_was_read() -> None:
    assert len(MESSAGES) >= 55
    assert MESSAGES["MemoryRecord"]["audit_log"] == (15, "repeated AuditEntry")


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_each_message_matches_the_reference(name: str) -> None:
    descriptor = pb.DESCRIPTOR.message_types_by_name[name]
    ours = {field.name: field for field in descriptor.fields}
    expected = MESSAGES[name]
    assert set(ours) == set(expected), name
    for field_name, (number, kind) in expected.items():
        field = ours[field_name]
        assert field.number == number, f"{name}.{field_name}"
        if kind is not None:
            _check_kind(field, kind, f"{name}.{field_name}")


def _check_kind(field: FieldDescriptor, kind: str, where: str) -> None:
    repeated = kind.startswith("repeated ")
    kind = kind.removeprefix("repeated ")
    if kind.startswith("map<"):
        assert field.message_type is not None and field.message_type.GetOptions().map_entry, where
        value_kind = kind[4:-1].split(",")[1].strip()
        _check_kind(field.message_type.fields_by_name["value"], value_kind, where)
        return
    is_repeated = field.is_repeated
    assert is_repeated == repeated, where
    if kind in _SCALARS:
        assert field.type == _SCALARS[kind], where
    else:
        assert field.message_type is not None, where
        names = (kind, f"membrane.v1.{kind}", f"google.protobuf.{kind}")
        assert field.message_type.full_name in names, where


def test_the_payload_is_a_oneof_named_kind() -> None:
    oneof = pb.Payload.DESCRIPTOR.oneofs_by_name["kind"]
    assert [f.name for f in oneof.fields] == list(MESSAGES["Payload"])


def test_the_service_has_the_reference_methods() -> None:
    service = pb.DESCRIPTOR.services_by_name["MembraneService"]
    methods = {m.name: (m.input_type.name, m.output_type.name) for m in service.methods}
    assert methods == {
        "CaptureMemory": ("CaptureMemoryRequest", "CaptureMemoryResponse"),
        "RetrieveGraph": ("RetrieveGraphRequest", "RetrieveGraphResponse"),
        "RetrieveByID": ("RetrieveByIDRequest", "MemoryRecordResponse"),
        "Supersede": ("SupersedeRequest", "MemoryRecordResponse"),
        "Fork": ("ForkRequest", "MemoryRecordResponse"),
        "Retract": ("RetractRequest", "RetractResponse"),
        "Merge": ("MergeRequest", "MemoryRecordResponse"),
        "Reinforce": ("ReinforceRequest", "ReinforceResponse"),
        "Penalize": ("PenalizeRequest", "PenalizeResponse"),
        "GetMetrics": ("GetMetricsRequest", "MetricsResponse"),
        "Contest": ("ContestRequest", "ContestResponse"),
    }
    assert all(not (m.client_streaming or m.server_streaming) for m in service.methods)


def test_the_descriptor_has_the_reference_file_name_and_package() -> None:
    assert pb.DESCRIPTOR.name == "membrane/v1/membrane.proto"
    assert pb.DESCRIPTOR.package == "membrane.v1"
    assert [d.name for d in pb.DESCRIPTOR.dependencies] == ["google/protobuf/struct.proto"]


def test_the_committed_stubs_are_generated_from_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    codegen.generate(tmp_path)
    for name in codegen.GENERATED:
        fresh = (tmp_path / name).read_text()
        committed = (codegen.WIRE_DIR / name).read_text()
        assert fresh == committed, f"{name} is stale: run python -m membrane_es.grpc_server.codegen"


def test_our_own_rpcs_live_in_their_own_package() -> None:
    """membrane.v1 is Membrane's alone: every RPC beyond it is in membrane_es.v1."""
    from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2 as es_pb

    assert es_pb.DESCRIPTOR.name == "membrane_es/v1/membrane_es.proto"
    assert es_pb.DESCRIPTOR.package == "membrane_es.v1"
    service = es_pb.DESCRIPTOR.services_by_name["MembraneEsService"]
    assert {m.name: (m.input_type.name, m.output_type.name) for m in service.methods} == {
        "Forget": ("ForgetRequest", "ForgetResponse"),
        "Changes": ("ChangesRequest", "Change"),
    }
    assert service.methods_by_name["Changes"].server_streaming
    assert [d.name for d in pb.DESCRIPTOR.dependencies] == ["google/protobuf/struct.proto"]
    assert any(name.startswith("membrane_es/v1/") for name in codegen.GENERATED)

"""API keys with trust ceilings and tenants: stronger than declared trust (issue: the
effective trust is the lower of the declared one and the key's ceiling; tenants never see
each other's records on any RPC)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from tests.integration.grpc.conftest import AUTH, StartDaemon, as_dict, capture, code_of, observe

Stub = pb_grpc.MembraneServiceStub
HYPER = pb.TrustContext(max_sensitivity="hyper", authenticated=True)


def _bearer(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


LOW_KEY = _bearer("low-ceiling")
ALPHA_KEY = _bearer("alpha-only")
ACME = _bearer("acme-key")
GLOBEX = _bearer("globex-key")


@pytest.fixture
def stub(start_daemon: StartDaemon, tmp_path: Path) -> Any:
    keys = {
        "keys": [
            {"key": "low-ceiling", "max_sensitivity": "low"},
            {
                "key_sha256": hashlib.sha256(b"alpha-only").hexdigest(),
                "max_sensitivity": "medium",
                "scopes": ["alpha"],
            },
            {"key": "acme-key", "tenant": "acme"},
            {"key": "globex-key", "tenant": "globex"},
        ]
    }
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text(yaml.safe_dump(keys))
    daemon = start_daemon(api_keys_file=str(keys_file))
    channel = grpc.insecure_channel(f"127.0.0.1:{daemon.port}")
    yield pb_grpc.MembraneServiceStub(channel)
    channel.close()


def _graph_ids(stub: Stub, metadata: Any, trust: pb.TrustContext = HYPER) -> set[str]:
    request = pb.RetrieveGraphRequest(trust=trust, root_limit=100, node_limit=100, max_hops=1)
    return {n.record.id for n in stub.RetrieveGraph(request, metadata=metadata).nodes}


def _levels(stub: Stub) -> dict[str, str]:
    """One event per sensitivity level, written with the shared (unrestricted) key."""
    ids = {}
    for level in ("public", "low", "medium", "high", "hyper"):
        response = capture(
            stub, {"ref": level, "text": level}, source_kind="event", sensitivity=level
        )
        ids[level] = response.primary_record.id
    return ids


def test_a_low_ceiling_key_declaring_hyper_sees_only_what_low_allows(stub: Stub) -> None:
    ids = _levels(stub)
    request = pb.RetrieveGraphRequest(trust=HYPER, root_limit=100, node_limit=100, max_hops=-1)
    nodes = {n.record.id: n.record for n in stub.RetrieveGraph(request, metadata=LOW_KEY).nodes}
    # public and low in full, medium redacted (one above the ceiling), high and hyper hidden
    assert set(nodes) == {ids["public"], ids["low"], ids["medium"]}
    assert nodes[ids["low"]].HasField("payload")
    assert not nodes[ids["medium"]].HasField("payload")
    for level in ("medium", "high", "hyper"):
        code, _ = code_of(
            lambda level=level: stub.RetrieveByID(
                pb.RetrieveByIDRequest(id=ids[level], trust=HYPER), metadata=LOW_KEY
            )
        )
        assert code is grpc.StatusCode.PERMISSION_DENIED
    full = stub.RetrieveByID(pb.RetrieveByIDRequest(id=ids["hyper"], trust=HYPER), metadata=AUTH)
    assert full.record.HasField("payload")  # the shared key has no ceiling


def test_a_ceiling_never_raises_the_declared_trust(stub: Stub) -> None:
    ids = _levels(stub)
    public_only = pb.TrustContext(max_sensitivity="public")
    seen = _graph_ids(stub, ALPHA_KEY, public_only)
    # the key allows medium, but the caller asked for public: medium is two levels up
    assert ids["public"] in seen and ids["medium"] not in seen


def test_a_scoped_key_sees_its_scopes_and_unscoped_records_only(stub: Stub) -> None:
    alpha = capture(stub, {"ref": "a", "text": "alpha"}, source_kind="event", scope="alpha")
    beta = capture(stub, {"ref": "b", "text": "beta"}, source_kind="event", scope="beta")
    shared = capture(stub, {"ref": "s", "text": "shared"}, source_kind="event")
    seen = _graph_ids(stub, ALPHA_KEY)
    assert alpha.primary_record.id in seen and shared.primary_record.id in seen
    assert beta.primary_record.id not in seen
    # declaring only a scope the key does not hold leaves just the unscoped records
    beta_trust = pb.TrustContext(max_sensitivity="medium", scopes=["beta"])
    assert _graph_ids(stub, ALPHA_KEY, beta_trust) == {shared.primary_record.id}


def test_a_restricted_key_cannot_write_or_revise_beyond_its_ceiling(stub: Stub) -> None:
    code, message = code_of(
        lambda: capture(stub, {"text": "x"}, sensitivity="high", scope="alpha", metadata=ALPHA_KEY)
    )
    assert code is grpc.StatusCode.PERMISSION_DENIED, message
    code, _ = code_of(lambda: capture(stub, {"text": "x"}, scope="beta", metadata=ALPHA_KEY))
    assert code is grpc.StatusCode.PERMISSION_DENIED
    assert capture(stub, {"text": "x"}, scope="alpha", metadata=ALPHA_KEY).primary_record.id
    secret = observe(stub, "vault", "code", "1234", sensitivity="hyper")
    for call in (
        lambda: stub.Reinforce(
            pb.ReinforceRequest(id=secret.id, actor="a", rationale="r"), metadata=LOW_KEY
        ),
        lambda: stub.Retract(
            pb.RetractRequest(id=secret.id, actor="a", rationale="r"), metadata=LOW_KEY
        ),
    ):
        code, _ = code_of(call)
        assert code is grpc.StatusCode.PERMISSION_DENIED


def test_tenants_never_see_each_other(stub: Stub) -> None:
    acme_fact = observe(stub, "Orchid", "deploy_target", "staging", metadata=ACME)
    globex_fact = observe(stub, "Orchid", "deploy_target", "production", metadata=GLOBEX)
    # graph retrieval, by the very words, at full declared trust
    request = pb.RetrieveGraphRequest(task_descriptor="Orchid", trust=HYPER, node_limit=100)
    acme_ids = {n.record.id for n in stub.RetrieveGraph(request, metadata=ACME).nodes}
    globex_ids = {n.record.id for n in stub.RetrieveGraph(request, metadata=GLOBEX).nodes}
    assert acme_fact.id in acme_ids and globex_fact.id not in acme_ids
    assert globex_fact.id in globex_ids and acme_fact.id not in globex_ids
    # each tenant has its own Orchid entity
    assert not acme_ids & globex_ids
    # by id and every revision: the other tenant's record does not exist
    other = globex_fact.id
    calls = [
        lambda: stub.RetrieveByID(pb.RetrieveByIDRequest(id=other, trust=HYPER), metadata=ACME),
        lambda: stub.Reinforce(
            pb.ReinforceRequest(id=other, actor="a", rationale="r"), metadata=ACME
        ),
        lambda: stub.Penalize(
            pb.PenalizeRequest(id=other, amount=0.1, actor="a", rationale="r"), metadata=ACME
        ),
        lambda: stub.Retract(pb.RetractRequest(id=other, actor="a", rationale="r"), metadata=ACME),
        lambda: stub.Contest(
            pb.ContestRequest(id=other, contesting_ref="x", actor="a", rationale="r"), metadata=ACME
        ),
        lambda: stub.Supersede(
            pb.SupersedeRequest(old_id=other, new_record=acme_fact, actor="a", rationale="r"),
            metadata=ACME,
        ),
        lambda: stub.Fork(
            pb.ForkRequest(source_id=other, forked_record=acme_fact, actor="a", rationale="r"),
            metadata=ACME,
        ),
        lambda: stub.Merge(
            pb.MergeRequest(ids=[other], merged_record=acme_fact, actor="a", rationale="r"),
            metadata=ACME,
        ),
    ]
    for call in calls:
        code, _ = code_of(call)
        assert code is grpc.StatusCode.NOT_FOUND

    # metrics count each tenant's own records; the default tenant has none of them
    def total(metadata: Any) -> int:
        snapshot = as_dict(stub.GetMetrics(pb.GetMetricsRequest(), metadata=metadata))["snapshot"]
        return int(snapshot["total_records"])

    assert total(ACME) == total(GLOBEX) >= 2
    assert total(AUTH) == 0
    # and the other tenant's fact is untouched by all of the above
    untouched = stub.RetrieveByID(pb.RetrieveByIDRequest(id=other, trust=HYPER), metadata=GLOBEX)
    assert [a.action for a in untouched.record.audit_log] == ["create"]


def test_a_bad_keys_file_fails_at_startup(start_daemon: StartDaemon, tmp_path: Path) -> None:
    from membrane_es.errors import ValidationError

    keys_file = tmp_path / "bad.yaml"
    keys_file.write_text(yaml.safe_dump({"keys": [{"key": "k", "tenant": "../escape"}]}))
    with pytest.raises(ValidationError, match="tenant"):
        start_daemon(api_keys_file=str(keys_file))
    keys_file.write_text(yaml.safe_dump({"keys": [{"tenant": "x"}]}))
    with pytest.raises(ValidationError, match="exactly one of key and key_sha256"):
        start_daemon(api_keys_file=str(keys_file))

"""Every RPC over loopback: happy paths and the reference's scenarios (spec §10.13 P4–P7, P9,
P11; §9.3 the SDK integration tests)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import grpc
import pytest

from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from membrane_es.schema.timestamps import rfc3339
from tests.integration.grpc.conftest import (
    AUTH,
    FULL,
    StartDaemon,
    as_dict,
    capture,
    code_of,
    observe,
    value,
)

Stub = pb_grpc.MembraneServiceStub


def _semantic_record(subject: str, obj: str, *, evidence: str = "ticket-1") -> pb.MemoryRecord:
    record = pb.MemoryRecord(
        type="semantic",
        sensitivity="low",
        confidence=0.9,
        salience=0.8,
        scope="alpha",
        lifecycle=pb.Lifecycle(
            decay=pb.DecayProfile(curve="exponential", half_life_seconds=86400),
            deletion_policy="auto_prune",
        ),
        provenance=pb.Provenance(sources=[pb.ProvenanceSource(kind="observation", ref=evidence)]),
        audit_log=[
            pb.AuditEntry(action="create", actor="client", timestamp="2026-05-01T12:00:00Z")
        ],
    )
    record.payload.semantic.CopyFrom(
        pb.SemanticPayload(
            kind="semantic",
            subject=subject,
            predicate="prefers",
            object=value(obj),
            validity=pb.Validity(mode="global"),
            evidence=[pb.ProvenanceRef(source_type="observation", source_id=evidence)],
        )
    )
    return record


def test_capture_links_a_second_mention_to_the_first_entity(stub: Stub) -> None:
    """§9.3 case 1 (and the TypeScript test): one entity, reused by the second capture."""
    first = capture(
        stub,
        {"text": "Remember Orchid as the staging deploy target.", "project": "Orchid"},
        scope="project:alpha",
        tags=["python", "integration"],
        sensitivity="low",
    )
    entities = [r for r in first.created_records if r.type == "entity"]
    assert len(entities) == 1
    second = capture(
        stub, {"text": "Orchid deploys at noon.", "project": "Orchid"}, scope="project:alpha"
    )
    assert not [r for r in second.created_records if r.type == "entity"]
    assert any(
        e.source_id == second.primary_record.id
        and e.predicate == "mentions_entity"
        and e.target_id == entities[0].id
        for e in second.edges
    )

    trust = pb.TrustContext(
        max_sensitivity="medium", authenticated=True, actor_id="py-test", scopes=["project:alpha"]
    )
    graph = stub.RetrieveGraph(
        pb.RetrieveGraphRequest(
            task_descriptor="Orchid deploy target",
            trust=trust,
            root_limit=10,
            node_limit=20,
            edge_limit=20,
            max_hops=1,
        ),
        metadata=AUTH,
    )
    node_ids = {n.record.id for n in graph.nodes}
    assert graph.root_ids
    assert first.primary_record.id in node_ids
    assert any(n.record.type == "entity" for n in graph.nodes)
    assert any(e.predicate == "mentions_entity" for e in graph.edges)
    found = stub.RetrieveByID(
        pb.RetrieveByIDRequest(id=first.primary_record.id, trust=trust), metadata=AUTH
    )
    assert found.record.id == first.primary_record.id
    metrics = as_dict(stub.GetMetrics(pb.GetMetricsRequest(), metadata=AUTH))["snapshot"]
    assert metrics["total_records"] >= 1


def test_capture_p5_exact_shape(stub: Stub) -> None:
    response = capture(
        stub,
        {
            "ref": "evt-capture-1",
            "text": "Remember Orchid as the staging deploy target",
            "project": "Orchid",
        },
        source_kind="event",
        context=value({"thread_id": "thread-1"}),
        tags=["grpc", "orchid"],
        scope="alpha",
        timestamp="2026-05-01T12:00:00Z",
    )
    assert response.primary_record.type == "episodic"
    assert [r.type for r in response.created_records] == ["entity"]
    assert len(response.edges) == 2
    graph = stub.RetrieveGraph(
        pb.RetrieveGraphRequest(
            task_descriptor="Orchid deploy target",
            trust=pb.TrustContext(max_sensitivity="low", scopes=["alpha"]),
            root_limit=10,
            node_limit=20,
            edge_limit=20,
            max_hops=1,
        ),
        metadata=AUTH,
    )
    ids = {n.record.id for n in graph.nodes}
    assert response.primary_record.id in ids and response.created_records[0].id in ids


def test_retract_of_an_episodic_capture_is_a_failed_precondition(stub: Stub) -> None:
    """§9.3 case 2."""
    event = capture(stub, {"ref": "evt-1", "text": "deployed"}, source_kind="event")
    code, _ = code_of(
        lambda: stub.Retract(
            pb.RetractRequest(id=event.primary_record.id, actor="py", rationale="wrong"),
            metadata=AUTH,
        )
    )
    assert code is grpc.StatusCode.FAILED_PRECONDITION


def test_the_whole_surface_in_sequence(stub: Stub) -> None:
    """P4: every kind of capture, then every revision, all succeeding."""
    event = capture(
        stub, {"ref": "e1", "text": "user prefers Go"}, source_kind="event", scope="alpha"
    )
    tool = capture(
        stub,
        {"tool_name": "go", "args": {"cmd": "build"}, "result": "ok"},
        source_kind="tool_output",
        scope="alpha",
    )
    fact = observe(stub, "user", "prefers", "Go", scope="alpha")
    working = capture(
        stub,
        {"thread_id": "t-1", "state": "executing", "next_actions": ["test"]},
        source_kind="working_state",
        scope="alpha",
    )
    graph = stub.RetrieveGraph(
        pb.RetrieveGraphRequest(
            task_descriptor="user prefers Go",
            trust=pb.TrustContext(max_sensitivity="high", scopes=["alpha"]),
            memory_types=["semantic"],
            root_limit=10,
            node_limit=20,
            edge_limit=20,
            max_hops=1,
        ),
        metadata=AUTH,
    )
    assert fact.id in graph.root_ids
    assert stub.RetrieveByID(pb.RetrieveByIDRequest(id=fact.id, trust=FULL), metadata=AUTH)
    stub.Reinforce(
        pb.ReinforceRequest(id=event.primary_record.id, actor="a", rationale="useful"),
        metadata=AUTH,
    )
    stub.Penalize(
        pb.PenalizeRequest(id=tool.primary_record.id, amount=0.2, actor="a", rationale="stale"),
        metadata=AUTH,
    )
    newer = stub.Supersede(
        pb.SupersedeRequest(
            old_id=fact.id,
            new_record=_semantic_record("user", "Rust"),
            actor="a",
            rationale="changed",
        ),
        metadata=AUTH,
    ).record
    assert newer.payload.semantic.object.string_value == "Rust"
    assert newer.payload.semantic.revision.supersedes == fact.id
    conditional = _semantic_record("user", "Go at work")
    conditional.payload.semantic.validity.mode = "conditional"
    conditional.payload.semantic.validity.conditions["context"].string_value = "work"
    forked = stub.Fork(
        pb.ForkRequest(source_id=newer.id, forked_record=conditional, actor="a", rationale="work"),
        metadata=AUTH,
    ).record
    assert forked.payload.semantic.validity.mode == "conditional"
    left = observe(stub, "service", "uses", "Postgres", scope="alpha")
    right = observe(stub, "service", "uses", "PostgreSQL", scope="alpha")
    merged = stub.Merge(
        pb.MergeRequest(
            ids=[left.id, right.id],
            merged_record=_semantic_record("service", "PostgreSQL"),
            actor="a",
            rationale="same",
        ),
        metadata=AUTH,
    ).record
    assert {r.target_id for r in merged.relations} >= {left.id, right.id}
    stub.Contest(
        pb.ContestRequest(id=newer.id, contesting_ref=forked.id, actor="a", rationale="conflict"),
        metadata=AUTH,
    )
    stub.Retract(pb.RetractRequest(id=left.id, actor="a", rationale="wrong"), metadata=AUTH)
    snapshot = as_dict(stub.GetMetrics(pb.GetMetricsRequest(), metadata=AUTH))["snapshot"]
    assert snapshot["total_records"] >= 8
    again = stub.RetrieveByID(
        pb.RetrieveByIDRequest(id=working.primary_record.id, trust=FULL), metadata=AUTH
    )
    assert again.record.payload.working.thread_id == "t-1"


def test_a_fact_links_to_its_subject_entity_p7(stub: Stub) -> None:
    fact = observe(stub, "Orchid", "deploy_target_for", "staging")
    graph = stub.RetrieveGraph(
        pb.RetrieveGraphRequest(
            task_descriptor="Orchid",
            trust=FULL,
            memory_types=["semantic"],
            root_limit=1,
            node_limit=3,
            edge_limit=6,
            max_hops=1,
        ),
        metadata=AUTH,
    )
    assert list(graph.root_ids) == [fact.id]
    entity_nodes = [n for n in graph.nodes if n.record.type == "entity"]
    assert entity_nodes and entity_nodes[0].hop == 1
    assert any(e.predicate == "subject_entity" for e in graph.edges)


def test_redacted_neighbour_has_no_payload_p6(stub: Stub) -> None:
    captured = capture(
        stub, {"ref": "m-1", "text": "medium secret"}, source_kind="event", sensitivity="medium"
    )
    graph = stub.RetrieveGraph(
        pb.RetrieveGraphRequest(
            trust=pb.TrustContext(max_sensitivity="low"),
            memory_types=["episodic"],
            root_limit=5,
            node_limit=5,
            max_hops=-1,
        ),
        metadata=AUTH,
    )
    node = next(n for n in graph.nodes if n.record.id == captured.primary_record.id)
    assert node.record.sensitivity == "medium"
    assert not node.record.HasField("payload")
    assert not node.record.HasField("interpretation")


def test_wire_max_hops_zero_means_the_default_and_minus_one_roots_only(stub: Stub) -> None:
    fact = observe(stub, "Orchid", "deploy_target_for", "staging")

    def nodes(hops: int) -> list[pb.GraphNode]:
        request = pb.RetrieveGraphRequest(
            task_descriptor="Orchid deploy", trust=FULL, memory_types=["semantic"], max_hops=hops
        )
        return list(stub.RetrieveGraph(request, metadata=AUTH).nodes)

    assert [n.record.id for n in nodes(-1)] == [fact.id]
    assert {n.hop for n in nodes(0)} == {0, 1}  # 0 → the configured default, one hop
    assert {n.hop for n in nodes(1)} == {0, 1}


def test_selection_is_absent_without_competence_or_plan_candidates(stub: Stub) -> None:
    observe(stub, "Orchid", "deploy_target_for", "staging")
    graph = stub.RetrieveGraph(pb.RetrieveGraphRequest(trust=FULL), metadata=AUTH)
    assert not graph.HasField("selection")


def test_an_empty_store_answers_an_empty_graph(stub: Stub) -> None:
    graph = stub.RetrieveGraph(
        pb.RetrieveGraphRequest(task_descriptor="anything", trust=FULL), metadata=AUTH
    )
    assert not graph.nodes and not graph.edges and not graph.root_ids
    assert not graph.HasField("selection")


def test_records_carry_the_reference_wire_forms(stub: Stub) -> None:
    response = capture(
        stub,
        {"ref": "e-9", "text": "shipped"},
        source_kind="event",
        timestamp="2026-05-01T12:00:00Z",
    )
    record = response.primary_record
    assert record.HasField("lifecycle") and record.HasField("provenance")
    assert record.created_at.endswith("Z") and "+" not in record.created_at
    assert record.lifecycle.decay.half_life_seconds > 0
    assert record.audit_log[0].action == "create"
    fact = observe(stub, "Orchid", "owner", None)
    # a nil object still travels as an explicit null Value (§8.3)
    assert fact.payload.semantic.HasField("object")
    assert fact.payload.semantic.object.WhichOneof("kind") == "null_value"
    assert fact.payload.semantic.HasField("validity")


@pytest.mark.parametrize(
    "call",
    [
        "supersede",
        "fork",
        "retract",
        "merge",
        "reinforce",
        "penalize",
        "contest",
        "retrieve_by_id",
    ],
)
def test_mutations_on_missing_ids_are_not_found(stub: Stub, call: str) -> None:
    """P9, P11."""
    record = _semantic_record("x", "y")
    calls = {
        "supersede": lambda: stub.Supersede(
            pb.SupersedeRequest(old_id="missing", new_record=record, actor="a", rationale="r"),
            metadata=AUTH,
        ),
        "fork": lambda: stub.Fork(
            pb.ForkRequest(source_id="missing", forked_record=record, actor="a", rationale="r"),
            metadata=AUTH,
        ),
        "retract": lambda: stub.Retract(
            pb.RetractRequest(id="missing", actor="a", rationale="r"), metadata=AUTH
        ),
        "merge": lambda: stub.Merge(
            pb.MergeRequest(ids=["missing"], merged_record=record, actor="a", rationale="r"),
            metadata=AUTH,
        ),
        "reinforce": lambda: stub.Reinforce(
            pb.ReinforceRequest(id="missing", actor="a", rationale="r"), metadata=AUTH
        ),
        "penalize": lambda: stub.Penalize(
            pb.PenalizeRequest(id="missing", amount=0.1, actor="a", rationale="r"), metadata=AUTH
        ),
        "contest": lambda: stub.Contest(
            pb.ContestRequest(id="missing", contesting_ref="x", actor="a", rationale="r"),
            metadata=AUTH,
        ),
        "retrieve_by_id": lambda: stub.RetrieveByID(
            pb.RetrieveByIDRequest(id="missing-record", trust=FULL), metadata=AUTH
        ),
    }
    code, message = code_of(calls[call])
    assert code is grpc.StatusCode.NOT_FOUND, message
    assert "not found" in message


def test_reading_above_trust_by_id_is_permission_denied(stub: Stub) -> None:
    secret = capture(stub, {"ref": "h", "text": "high"}, source_kind="event", sensitivity="high")
    code, message = code_of(
        lambda: stub.RetrieveByID(
            pb.RetrieveByIDRequest(
                id=secret.primary_record.id, trust=pb.TrustContext(max_sensitivity="medium")
            ),
            metadata=AUTH,
        )
    )
    assert code is grpc.StatusCode.PERMISSION_DENIED
    assert message == "access denied by trust context"


def test_as_of_metadata_reads_the_past(stub: Stub) -> None:
    fact = observe(stub, "Orchid", "deploy_target", "staging")
    moment = rfc3339(datetime.now(UTC))  # after the capture's events, before the revisions
    stub.Penalize(
        pb.PenalizeRequest(id=fact.id, amount=0.5, actor="a", rationale="doubt"), metadata=AUTH
    )
    stub.Retract(pb.RetractRequest(id=fact.id, actor="a", rationale="gone"), metadata=AUTH)
    then = (*AUTH, ("x-membrane-as-of", moment))
    past = stub.RetrieveByID(pb.RetrieveByIDRequest(id=fact.id, trust=FULL), metadata=then)
    assert [a.action for a in past.record.audit_log] == ["create"]
    now = stub.RetrieveByID(pb.RetrieveByIDRequest(id=fact.id, trust=FULL), metadata=AUTH)
    assert [a.action for a in now.record.audit_log][-1] == "delete"  # the reference's action name
    past_graph = stub.RetrieveGraph(
        pb.RetrieveGraphRequest(task_descriptor="Orchid", trust=FULL, memory_types=["semantic"]),
        metadata=then,
    )
    assert fact.id in past_graph.root_ids
    past_metrics = as_dict(stub.GetMetrics(pb.GetMetricsRequest(), metadata=then))["snapshot"]
    assert past_metrics["collected_at"] == moment
    early = (*AUTH, ("x-membrane-as-of", "2000-01-01T00:00:00Z"))
    code, _ = code_of(
        lambda: stub.RetrieveByID(pb.RetrieveByIDRequest(id=fact.id, trust=FULL), metadata=early)
    )
    assert code is grpc.StatusCode.NOT_FOUND
    bad = (*AUTH, ("x-membrane-as-of", "yesterday"))
    code, message = code_of(lambda: stub.GetMetrics(pb.GetMetricsRequest(), metadata=bad))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert message.startswith("invalid x-membrane-as-of")


def test_as_of_position_metadata_reads_right_after_an_event(stub: Stub) -> None:
    fact = observe(stub, "Orchid", "deploy_target", "staging")
    _, call = stub.Penalize.with_call(
        pb.PenalizeRequest(id=fact.id, amount=0.5, actor="a", rationale="doubt"), metadata=AUTH
    )
    penalized = int(dict(call.initial_metadata())["x-membrane-position"])
    stub.Retract(pb.RetractRequest(id=fact.id, actor="a", rationale="gone"), metadata=AUTH)
    at = (*AUTH, ("x-membrane-as-of-position", str(penalized)))
    past = stub.RetrieveByID(pb.RetrieveByIDRequest(id=fact.id, trust=FULL), metadata=at)
    assert [a.action for a in past.record.audit_log] == ["create", "decay"]  # not yet retracted
    before = (*AUTH, ("x-membrane-as-of-position", str(penalized - 1)))
    earlier = stub.RetrieveByID(pb.RetrieveByIDRequest(id=fact.id, trust=FULL), metadata=before)
    assert [a.action for a in earlier.record.audit_log] == ["create"]
    graph = stub.RetrieveGraph(
        pb.RetrieveGraphRequest(task_descriptor="Orchid", trust=FULL, memory_types=["semantic"]),
        metadata=at,
    )
    assert fact.id in graph.root_ids
    assert stub.GetMetrics(pb.GetMetricsRequest(), metadata=at).snapshot
    for bad in ("-1", "x", "1.5", "", str(2**64), "99999999"):
        metadata = (*AUTH, ("x-membrane-as-of-position", bad))
        code, message = code_of(
            lambda metadata=metadata: stub.GetMetrics(pb.GetMetricsRequest(), metadata=metadata)
        )
        assert code is grpc.StatusCode.INVALID_ARGUMENT, (bad, message)
        assert "as_of_position" in message or "x-membrane-as-of-position" in message
    both = (*at, ("x-membrane-as-of", "2026-01-01T00:00:00Z"))
    code, message = code_of(
        lambda: stub.RetrieveByID(pb.RetrieveByIDRequest(id=fact.id, trust=FULL), metadata=both)
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "not both" in message


def test_explain_metadata_returns_explanations_in_trailing_metadata(stub: Stub) -> None:
    fact = observe(stub, "Orchid", "deploy_target", "staging")
    request = pb.RetrieveGraphRequest(task_descriptor="Orchid deploy target", trust=FULL)

    plain, call = stub.RetrieveGraph.with_call(request, metadata=AUTH)
    asked, explained_call = stub.RetrieveGraph.with_call(
        request, metadata=(*AUTH, ("x-membrane-explain", "true"))
    )

    # the membrane.v1 response is the same (salience aside: a moment later, it decayed)
    assert asked.root_ids == plain.root_ids
    assert [n.record.id for n in asked.nodes] == [n.record.id for n in plain.nodes]
    assert "x-membrane-explanation" not in dict(call.trailing_metadata())
    trailing = dict(explained_call.trailing_metadata())
    explained = json.loads(trailing["x-membrane-explanation"])
    assert [e["record_id"] for e in explained] == list(asked.root_ids)
    assert isinstance(json.loads(trailing["x-membrane-searched-toward"]), list)
    assert fact.id in asked.root_ids
    for item in explained:
        assert {
            "vector_similarity",
            "lexical_score",
            "time_score",
            "salience",
            "boost",
            "score",
        } <= set(item)
        assert item["trust"] == "full"
    bad = (*AUTH, ("x-membrane-explain", "please"))
    code, message = code_of(lambda: stub.RetrieveGraph(request, metadata=bad))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert message.startswith("invalid x-membrane-explain")


def test_explain_metadata_names_the_records_a_read_searched_toward(
    start_daemon: StartDaemon,
) -> None:
    daemon = start_daemon(embedding_model="hashing")  # reads the task: a query vector
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        stub = pb_grpc.MembraneServiceStub(channel)
        fact = observe(stub, "Orchid", "deploy_target", "staging")
        request = pb.RetrieveGraphRequest(task_descriptor="Orchid deploy target", trust=FULL)

        _, call = stub.RetrieveGraph.with_call(
            request, metadata=(*AUTH, ("x-membrane-explain", "true"))
        )

    assert fact.id in json.loads(dict(call.trailing_metadata())["x-membrane-searched-toward"])


def test_sdk_shaped_dicts_work_both_ways(stub: Stub) -> None:
    """What the Python SDK does (§9.1): ParseDict a record dict with the payload under its
    oneof key, MessageToDict the answer (int64 as strings, defaults omitted)."""
    from google.protobuf import json_format

    fact = observe(stub, "service", "database", "MySQL")
    sdk_record = {
        "type": "semantic",
        "sensitivity": "low",
        "confidence": 0.9,
        "salience": 1.0,
        "lifecycle": {
            "decay": {"curve": "exponential", "half_life_seconds": "86400"},
            "deletion_policy": "auto_prune",
        },
        "provenance": {"sources": [{"kind": "observation", "ref": "migration-42"}]},
        "payload": {
            "semantic": {
                "kind": "semantic",
                "subject": "service",
                "predicate": "database",
                "object": "Postgres",
                "validity": {"mode": "global"},
            }
        },
    }
    request = pb.SupersedeRequest(old_id=fact.id, actor="py", rationale="migrated")
    json_format.ParseDict(sdk_record, request.new_record)
    assert request.new_record.payload.semantic.object.string_value == "Postgres"
    created = as_dict(stub.Supersede(request, metadata=AUTH).record)
    assert created["payload"]["semantic"]["object"] == "Postgres"
    assert created["lifecycle"]["decay"]["half_life_seconds"] == "86400"
    assert created["relations"][0] == {
        "predicate": "supersedes",
        "target_id": fact.id,
        "weight": 1.0,
        "created_at": created["created_at"],
    }


def test_a_redacted_root_explained_over_grpc_withholds_its_score(stub: Stub) -> None:
    captured = capture(
        stub, {"ref": "m-2", "text": "medium vault combination"}, sensitivity="medium"
    )
    request = pb.RetrieveGraphRequest(
        trust=pb.TrustContext(max_sensitivity="low"),
        memory_types=["episodic"],
        root_limit=5,
        max_hops=-1,
    )
    _, call = stub.RetrieveGraph.with_call(
        request, metadata=(*AUTH, ("x-membrane-explain", "true"))
    )
    explained = json.loads(dict(call.trailing_metadata())["x-membrane-explanation"])
    (item,) = [e for e in explained if e["record_id"] == captured.primary_record.id]
    assert item["trust"] == "redacted"
    for name in ("score", "vector_similarity", "vector_score", "lexical_score", "relevance"):
        assert item[name] is None, name

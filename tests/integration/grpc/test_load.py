"""Load: 8 client threads of mixed operations against a real daemon, then the invariants.

One daemon on loopback over a temporary LMDB directory (rate limit off, API keys on), eight
threads each with its own channel, for a bounded time (``DURATION`` seconds, at most
``MAX_OPS_PER_THREAD`` calls each). Six threads share the default tenant's key and run every
RPC: captures (events, observations, agent turns naming shared entities), graph and by-id
reads, reinforce, penalize, supersedes of semantic facts (all six supersede one fact at the
start line, then pick mostly among the newest few, so supersedes race), retracts of episodic
records (refused), contests, metrics. Each thread's first round runs every operation once.
Two threads hold keys of two other tenants and capture, read and probe each other's ids.

Every call's status code is recorded; afterwards (over the wire, then on the stores opened
directly once the daemon has stopped) the test checks that nothing unexpected failed and
that the stores are consistent: every returned id reads back, the metrics count exactly the
records created, supersedes form proper links and lose no event, entities named concurrently
exist once, tenants saw nothing of each other, and every hash chain verifies. Racing
supersedes of one fact: exactly one wins, the others are refused (FAILED_PRECONDITION), so no
fact ever has two successors.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from membrane_es import Membrane
from membrane_es.grpc_server.config import DaemonConfig
from membrane_es.grpc_server.server import Daemon
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext

DURATION = 3.5  # seconds of load
MAX_OPS_PER_THREAD = 600
CALL_TIMEOUT = 30.0
THREADS = 8
SHARED_THREADS = 6  # threads 0..5 use the shared key; 6 and 7 one tenant each
SCOPE = "project:load"
PROJECTS = ["Orchid", "Lotus", "Iris"]  # entity names every capturing thread mentions
SHARED_KEY = "load-shared-secret"
TENANT_KEYS = {"acme": "load-acme-secret", "globex": "load-globex-secret"}
OK = grpc.StatusCode.OK
FULL = pb.TrustContext(max_sensitivity="hyper", authenticated=True, actor_id="load")
FULL_TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)


def _value(data: Any) -> struct_pb2.Value:
    value = struct_pb2.Value()
    json_format.ParseDict(data, value)
    return value


def _new_fact(subject: str, obj: str) -> pb.MemoryRecord:
    return pb.MemoryRecord(
        type="semantic",
        sensitivity="low",
        confidence=0.9,
        salience=1.0,
        scope=SCOPE,
        tags=["load"],
        provenance=pb.Provenance(sources=[pb.ProvenanceSource(kind="observation", ref="load")]),
        payload=pb.Payload(
            semantic=pb.SemanticPayload(
                kind="semantic",
                subject=subject,
                predicate="runs_on",
                object=_value(obj),
                validity=pb.Validity(mode="global"),
            )
        ),
    )


@dataclass
class Call:
    """One RPC as a client saw it."""

    thread: int
    op: str
    target: str
    code: grpc.StatusCode
    detail: str = ""


@dataclass
class Tenant:
    """What the clients of one tenant created, from the responses they got."""

    name: str
    key: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    captured: list[str] = field(default_factory=list)  # every id a capture returned
    episodic: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # every semantic fact id
    active_facts: list[str] = field(default_factory=list)  # not (yet) seen superseded
    entities: list[pb.MemoryRecord] = field(default_factory=list)
    records_created: int = 0
    # old fact id → successors returned by successful supersedes
    successors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def note_capture(self, response: pb.CaptureMemoryResponse) -> None:
        with self.lock:
            records = [response.primary_record, *response.created_records]
            self.records_created += len(records)
            for record in records:
                self.captured.append(record.id)
                if record.type == "episodic":
                    self.episodic.append(record.id)
                elif record.type == "semantic":
                    self.facts.append(record.id)
                    self.active_facts.append(record.id)
                elif record.type == "entity":
                    self.entities.append(record)

    def note_supersede(self, old_id: str, new: pb.MemoryRecord) -> None:
        with self.lock:
            self.records_created += 1
            self.successors[old_id].append(new.id)
            self.facts.append(new.id)
            self.active_facts.append(new.id)
            if old_id in self.active_facts:
                self.active_facts.remove(old_id)


class Client:
    """One thread's channel, stub and call log."""

    def __init__(self, port: int, key: str, thread: int, calls: list[Call]) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = pb_grpc.MembraneServiceStub(self.channel)
        self.metadata = (("authorization", f"Bearer {key}"),)
        self.thread = thread
        self.calls = calls

    def call(self, op: str, target: str, request: Any) -> Any:
        """The response, or None when the call failed; either way the code is recorded.

        ``op`` is the method's name, optionally labelled (``RetrieveByID:probe``).
        """
        method: Callable[..., Any] = getattr(self.stub, op.split(":")[0])
        try:
            response = method(request, metadata=self.metadata, timeout=CALL_TIMEOUT)
        except grpc.RpcError as error:
            self.calls.append(Call(self.thread, op, target, error.code(), error.details() or ""))
            return None
        self.calls.append(Call(self.thread, op, target, OK))
        return response

    def close(self) -> None:
        self.channel.close()


# --- the workload ----------------------------------------------------------------------------


def _capture(client: Client, tenant: Tenant, rng: random.Random, n: int) -> None:
    kind = rng.choice(("event", "observation", "agent_turn"))
    project = rng.choice(PROJECTS)
    if kind == "event":
        content: dict[str, Any] = {
            "ref": f"evt-{client.thread}-{n}",
            "text": f"deployed {project}",
            "project": project,
        }
    elif kind == "observation":
        content = {
            "subject": f"service-{rng.randrange(4)}",
            "predicate": "runs_on",
            "object": f"host-{rng.randrange(6)}",
        }
    else:
        content = {"text": f"Remember {project} as the staging deploy target.", "project": project}
    request = pb.CaptureMemoryRequest(
        source="load-test",
        source_kind=kind,
        content=_value(content),
        reason_to_remember="load",
        tags=["load", kind],
        scope=SCOPE,
        sensitivity="low",
    )
    response = client.call("CaptureMemory", "", request)
    if response is not None:
        tenant.note_capture(response)


def _pick(tenant: Tenant, rng: random.Random, pool: str) -> str | None:
    with tenant.lock:
        items: list[str] = getattr(tenant, pool)
        if not items:
            return None
        if pool == "active_facts":  # mostly the newest few, so that supersedes collide
            return rng.choice(items[-3:] if rng.random() < 0.7 else items)
        return rng.choice(items)


def _supersede(client: Client, tenant: Tenant, target: str, rng: random.Random, n: int) -> None:
    record = _new_fact(f"service-{rng.randrange(4)}", f"host-{client.thread}-{n}")
    request = pb.SupersedeRequest(
        old_id=target, new_record=record, actor=f"client-{client.thread}", rationale="moved"
    )
    response = client.call("Supersede", target, request)
    if response is not None:
        tenant.note_supersede(target, response.record)


SHARED_OPS = (
    "capture",
    "graph",
    "by_id",
    "reinforce",
    "penalize",
    "supersede",
    "retract",
    "contest",
    "metrics",
)
SHARED_WEIGHTS = (40, 12, 12, 6, 6, 10, 4, 5, 3)
TENANT_OPS = ("capture", "by_id", "probe", "graph", "metrics")
TENANT_WEIGHTS = (5, 2, 2, 2, 1)


def _shared_step(client: Client, tenant: Tenant, rng: random.Random, n: int) -> None:
    # the first round runs every operation once, so each thread covers them all
    op = SHARED_OPS[n] if n < len(SHARED_OPS) else rng.choices(SHARED_OPS, SHARED_WEIGHTS)[0]
    request: Any
    if op == "capture":
        _capture(client, tenant, rng, n)
    elif op == "graph":
        request = pb.RetrieveGraphRequest(
            task_descriptor=f"{rng.choice(PROJECTS)} deploy target",
            trust=FULL,
            root_limit=10,
            node_limit=20,
            edge_limit=20,
            max_hops=1,
        )
        client.call("RetrieveGraph", "", request)
    elif op == "by_id":
        target = _pick(tenant, rng, "captured")
        if target is not None:
            client.call("RetrieveByID", target, pb.RetrieveByIDRequest(id=target, trust=FULL))
    elif op == "reinforce":
        target = _pick(tenant, rng, "captured")
        if target is not None:
            request = pb.ReinforceRequest(id=target, actor="load", rationale="useful")
            client.call("Reinforce", target, request)
    elif op == "penalize":
        target = _pick(tenant, rng, "captured")
        if target is not None:
            request = pb.PenalizeRequest(id=target, amount=0.05, actor="load", rationale="noise")
            client.call("Penalize", target, request)
    elif op == "supersede":
        target = _pick(tenant, rng, "active_facts")
        if target is not None:
            _supersede(client, tenant, target, rng, n)
    elif op == "retract":
        target = _pick(tenant, rng, "episodic")
        if target is not None:
            request = pb.RetractRequest(id=target, actor="load", rationale="episodic")
            client.call("Retract", target, request)
    elif op == "contest":
        target = _pick(tenant, rng, "facts")
        ref = _pick(tenant, rng, "episodic")
        if target is not None and ref is not None:
            request = pb.ContestRequest(
                id=target, contesting_ref=ref, actor="load", rationale="disputed"
            )
            client.call("Contest", target, request)
    else:
        client.call("GetMetrics", "", pb.GetMetricsRequest())


def _tenant_step(
    client: Client, tenant: Tenant, other: Tenant, rng: random.Random, n: int, leaks: list[str]
) -> None:
    """Captures and reads in its own tenant; probes of the other tenant's ids."""
    op = TENANT_OPS[n] if n < len(TENANT_OPS) else rng.choices(TENANT_OPS, TENANT_WEIGHTS)[0]
    if op == "capture":
        _capture(client, tenant, rng, n)
    elif op == "by_id":
        target = _pick(tenant, rng, "captured")
        if target is not None:
            client.call("RetrieveByID", target, pb.RetrieveByIDRequest(id=target, trust=FULL))
    elif op == "probe":
        target = _pick(other, rng, "captured")
        if target is not None:
            client.call("RetrieveByID:probe", target, pb.RetrieveByIDRequest(id=target, trust=FULL))
    elif op == "graph":
        request = pb.RetrieveGraphRequest(
            task_descriptor=f"{rng.choice(PROJECTS)} deploy target", trust=FULL, max_hops=2
        )
        response = client.call("RetrieveGraph", "", request)
        if response is not None:
            with other.lock:
                foreign = set(other.captured)
            seen = {node.record.id for node in response.nodes} | set(response.root_ids)
            seen |= {edge.target_id for edge in response.edges}
            leaks.extend(sorted(seen & foreign))
    else:
        client.call("GetMetrics", "", pb.GetMetricsRequest())


# --- the run ---------------------------------------------------------------------------------


@dataclass
class LoadRun:
    root: Path
    port: int
    calls: list[Call]
    tenants: dict[str, Tenant]
    leaks: list[str]
    elapsed: float
    # taken over the wire after the load, before the daemon stopped
    read_back: dict[str, dict[str, tuple[grpc.StatusCode, pb.MemoryRecord | None]]]
    metrics: dict[str, dict[str, Any]]


def _seed(port: int, tenant: Tenant) -> None:
    """A few facts and events per tenant before the threads start."""
    client = Client(port, tenant.key, -1, [])
    try:
        for n in range(6):
            content = (
                {"subject": f"service-{n % 4}", "predicate": "runs_on", "object": f"host-{n}"}
                if n % 2 == 0
                else {"ref": f"seed-{n}", "text": "seed", "project": PROJECTS[n % 3]}
            )
            request = pb.CaptureMemoryRequest(
                source="load-seed",
                source_kind="observation" if n % 2 == 0 else "event",
                content=_value(content),
                scope=SCOPE,
            )
            response = client.call("CaptureMemory", "", request)
            assert response is not None, client.calls
            tenant.note_capture(response)
    finally:
        client.close()


def _run_load(root: Path) -> LoadRun:
    keys_file = root.parent / "keys.yaml"
    keys_file.write_text(
        "keys:\n"
        + "".join(f'  - key: "{key}"\n    tenant: {name}\n' for name, key in TENANT_KEYS.items())
    )
    config = DaemonConfig(
        db_path=str(root),
        listen_addr="127.0.0.1:0",
        api_key=SHARED_KEY,
        api_keys_file=str(keys_file),
        rate_limit_per_second=0,
        embedding_model="hashing",
        consolidation_interval="0",
    )
    tenants = {"": Tenant("", SHARED_KEY)}
    tenants.update({name: Tenant(name, key) for name, key in TENANT_KEYS.items()})
    calls: list[Call] = []
    leaks: list[str] = []
    errors: list[BaseException] = []
    with Daemon(config) as daemon:
        port = daemon.port
        for tenant in tenants.values():
            _seed(port, tenant)
        race_target = tenants[""].facts[0]
        start_line = threading.Barrier(THREADS + 1)
        deadline = [0.0]

        def worker(thread: int) -> None:
            rng = random.Random(thread)
            if thread < SHARED_THREADS:
                tenant, other = tenants[""], tenants[""]
            else:
                names = sorted(TENANT_KEYS)
                tenant = tenants[names[thread - SHARED_THREADS]]
                other = tenants[names[1 - (thread - SHARED_THREADS)]]
            client = Client(port, tenant.key, thread, calls)
            try:
                start_line.wait()
                if thread < SHARED_THREADS:  # every shared thread supersedes one fact at once
                    _supersede(client, tenant, race_target, rng, -1)
                for n in range(MAX_OPS_PER_THREAD):
                    if n >= len(SHARED_OPS) and time.monotonic() >= deadline[0]:
                        break
                    if thread < SHARED_THREADS:
                        _shared_step(client, tenant, rng, n)
                    else:
                        _tenant_step(client, tenant, other, rng, n, leaks)
            except BaseException as error:  # noqa: BLE001 - reported by the test
                errors.append(error)
            finally:
                client.close()

        workers = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
        for thread in workers:
            thread.start()
        deadline[0] = time.monotonic() + DURATION
        began = time.monotonic()
        start_line.wait()
        for thread in workers:
            thread.join(timeout=60)
        elapsed = time.monotonic() - began
        assert not any(thread.is_alive() for thread in workers), "a client thread hung"
        assert not errors, errors

        read_back: dict[str, dict[str, tuple[grpc.StatusCode, pb.MemoryRecord | None]]] = {}
        metrics: dict[str, dict[str, Any]] = {}
        for name, tenant in tenants.items():
            client = Client(port, tenant.key, -1, [])
            try:
                answers: dict[str, tuple[grpc.StatusCode, pb.MemoryRecord | None]] = {}
                ids = set(tenant.captured) | {s for ss in tenant.successors.values() for s in ss}
                for record_id in sorted(ids):
                    request = pb.RetrieveByIDRequest(id=record_id, trust=FULL)
                    response = client.call("RetrieveByID", record_id, request)
                    answers[record_id] = (
                        client.calls[-1].code,
                        None if response is None else response.record,
                    )
                read_back[name] = answers
                snapshot = client.call("GetMetrics", "", pb.GetMetricsRequest())
                assert snapshot is not None, client.calls[-1]
                metrics[name] = json_format.MessageToDict(snapshot.snapshot)
            finally:
                client.close()
    return LoadRun(root, port, calls, tenants, leaks, elapsed, read_back, metrics)


@pytest.fixture(scope="module")
def load(tmp_path_factory: pytest.TempPathFactory) -> LoadRun:
    root = tmp_path_factory.mktemp("load") / "store"
    return _run_load(root)


@pytest.fixture(scope="module")
def stores(load: LoadRun) -> Iterator[dict[str, Membrane]]:
    """Each tenant's store, opened directly once the daemon has stopped."""
    opened = {"": Membrane.open(load.root)}
    for name in TENANT_KEYS:
        opened[name] = Membrane.open(load.root / "tenants" / name)
    try:
        yield opened
    finally:
        for memory in opened.values():
            memory.close()


# --- invariants ------------------------------------------------------------------------------


def _superseded(load: LoadRun) -> set[str]:
    return {old for tenant in load.tenants.values() for old in tenant.successors}


def test_the_load_ran_every_operation(load: LoadRun) -> None:
    ops = Counter(call.op for call in load.calls)
    for op in (
        "CaptureMemory",
        "RetrieveGraph",
        "RetrieveByID",
        "RetrieveByID:probe",
        "Reinforce",
        "Penalize",
        "Supersede",
        "Retract",
        "Contest",
        "GetMetrics",
    ):
        assert ops[op] > 0, (op, ops)
    assert len({call.thread for call in load.calls}) == THREADS
    assert load.elapsed < DURATION + 30


def test_no_unexpected_status_codes(load: LoadRun) -> None:
    """Only the expected failures: retracting episodic memory is refused, another tenant's
    ids are not found, and a supersede that lost a race with a successful supersede of the
    same fact is refused."""
    superseded = _superseded(load)
    unexpected = []
    for call in load.calls:
        if call.op == "Retract":
            expected = {grpc.StatusCode.FAILED_PRECONDITION}
        elif call.op == "RetrieveByID:probe":
            expected = {grpc.StatusCode.NOT_FOUND}
        elif call.op in ("Supersede", "Contest") and call.target in superseded:
            expected = {OK, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED}
        else:
            expected = {OK}
        if call.code not in expected:
            unexpected.append(call)
    assert not unexpected, unexpected[:20]
    retracts = [call for call in load.calls if call.op == "Retract"]
    assert all("episodic" in call.detail for call in retracts)


def test_every_returned_id_reads_back_in_full(load: LoadRun) -> None:
    superseded = _superseded(load)
    for name, tenant in load.tenants.items():
        answers = load.read_back[name]
        for record_id, (code, record) in answers.items():
            assert code == OK, (name, record_id, code)
            assert record is not None and record.id == record_id
            assert record.payload.WhichOneof("kind") is not None, record_id  # not redacted
            if record.type != "semantic":
                continue
            revision = record.payload.semantic.revision
            if record_id in superseded:
                # retracted by its supersede (a later contest may mark it contested)
                assert revision.superseded_by in tenant.successors[record_id]
                assert revision.status in ("retracted", "contested"), (record_id, revision)
            else:
                assert revision.status != "retracted", (record_id, revision)


def test_supersedes_link_old_and_new(load: LoadRun) -> None:
    for name, tenant in load.tenants.items():
        answers = load.read_back[name]
        for old_id, successors in tenant.successors.items():
            for new_id in successors:
                _, record = answers[new_id]
                assert record is not None
                assert record.payload.semantic.revision.supersedes == old_id
                links = [r.target_id for r in record.relations if r.predicate == "supersedes"]
                assert links == [old_id], (new_id, links)


def test_metrics_count_exactly_the_records_created(load: LoadRun) -> None:
    for name, tenant in load.tenants.items():
        assert load.metrics[name]["total_records"] == tenant.records_created, name


def test_tenants_never_see_each_other(load: LoadRun, stores: dict[str, Membrane]) -> None:
    assert not load.leaks
    probes = [call for call in load.calls if call.op == "RetrieveByID:probe"]
    assert probes and all(call.code == grpc.StatusCode.NOT_FOUND for call in probes)
    for name, tenant in load.tenants.items():
        own = set(tenant.captured)
        for other_name, other in load.tenants.items():
            if other_name != name:
                assert not own & set(other.captured)
        everything = stores[name].retrieve(trust=FULL_TRUST, include_retracted=True)
        assert {record.id for record in everything.records} >= own


def test_entities_named_concurrently_exist_once(load: LoadRun) -> None:
    for name, tenant in load.tenants.items():
        names = Counter(
            (entity.scope, entity.payload.entity.canonical_name.lower())
            for entity in tenant.entities
        )
        duplicated = {key: count for key, count in names.items() if count > 1}
        assert not duplicated, (name, duplicated)
        created = {key[1] for key in names}
        assert {project.lower() for project in PROJECTS} <= created, (name, created)


def test_supersedes_lose_no_event(load: LoadRun, stores: dict[str, Membrane]) -> None:
    """Each successful supersede left its own Superseded event on the old fact, and the
    superseded fact is out of active reads."""
    for name, tenant in load.tenants.items():
        memory = stores[name]
        active = {record.id for record in memory.retrieve(trust=FULL_TRUST).records}
        for old_id, successors in tenant.successors.items():
            events = [
                entry
                for entry in memory.history(old_id, trust=FULL_TRUST)
                if entry.event == "Superseded"
            ]
            assert sorted(entry.rationale.split()[2].rstrip(":") for entry in events) == sorted(
                successors
            ), old_id
            assert old_id not in active


def test_every_superseded_fact_has_exactly_one_successor(load: LoadRun) -> None:
    forks = {
        old: successors
        for tenant in load.tenants.values()
        for old, successors in tenant.successors.items()
        if len(successors) != 1
    }
    assert not forks, forks


def test_every_log_verifies(load: LoadRun, stores: dict[str, Membrane]) -> None:
    for name, memory in stores.items():
        report = memory.verify()
        assert report.ok, (name, str(report))
        assert report.checked > 0

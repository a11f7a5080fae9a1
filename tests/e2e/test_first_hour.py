"""A new user's first hour, step by step: the surprises such a user could meet, each shown not
to happen. The README's tour itself runs, verbatim, in test_readme.py; here the same user
mistypes paths, sends empty writes, reads derived facts, starts servers, opens the API page,
mixes the spellings of moments and flags, and asks questions the store cannot answer.

Commands run through the command line's own entry point in this process (a process costs a
second), servers as real processes where what they print or bind is the point.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import grpc
import pytest
import yaml
from litestar.testing import TestClient
from mcp.client import Client

from membrane_es import Membrane, TrustContext
from membrane_es.access.ceiling import Caller
from membrane_es.access.keys import KeyRing
from membrane_es.cli import main
from membrane_es.grpc_server.config import DaemonConfig
from membrane_es.grpc_server.server import Daemon, open_stores
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from membrane_es.http_api import create_app
from membrane_es.mcp_server.server import build_server
from membrane_es.schema.enums import Sensitivity
from membrane_es.serving.listening import is_loopback, warn_if_open
from membrane_es.serving.tenants import Tenants

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PROCESS_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    "MEMBRANE_EMBEDDER": "none",
}
PROCESS_ENV.pop("MEMBRANE_API_KEY", None)
REX = '{"subject": "Rex", "predicate": "is_a", "object": "dog"}'


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``membrane-es ARGS`` through its entry point, in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exited:  # argparse's help
            status = int(exited.code or 0)
    return subprocess.CompletedProcess(list(args), status, out.getvalue(), err.getvalue())


def ok(*args: str) -> str:
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def server(*args: str, says: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A server process until the block ends; yields what it said on standard error up to
    the line containing ``says``."""
    process = subprocess.Popen(
        [sys.executable, *args],
        env={**PROCESS_ENV, **(env or {})},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert process.stderr is not None
    said = ""
    try:
        for line in process.stderr:
            said += line
            if says in line:
                break
        assert says in said, said
        yield said
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)  # a server that does not stop on SIGTERM fails here
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # ... and leaves nothing behind
            process.wait()
            raise
        finally:
            process.stderr.close()


# --- a mistyped path never silently makes a store -----------------------------------------


def test_a_new_store_is_announced_and_a_mistyped_path_makes_none(tmp_path: Path) -> None:
    made = cli("capture", str(tmp_path / "memory"), "--text", "Orchid deploys on Fridays")
    assert made.returncode == 0, made.stderr
    assert f"created a new store at {tmp_path / 'memory'}" in made.stderr
    again = cli("capture", str(tmp_path / "memory"), "--text", "and on Tuesdays")
    assert "created a new store" not in again.stderr  # only when one is made

    missing = tmp_path / "typo" / "deep"
    for args in (
        ("capture", str(missing / "memory"), "--text", "lost"),
        ("create", str(missing / "memory"), '{"type": "episodic"}'),
    ):
        refused = cli(*args)
        assert refused.returncode == 1
        assert f"no directory {missing}" in refused.stderr
    # a read names the path and creates nothing either
    assert cli("list", str(tmp_path / "memroy")).returncode == 1
    assert not (tmp_path / "typo").exists() and not (tmp_path / "memroy").exists()


def test_servers_refuse_a_store_whose_directory_is_missing(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "deep"
    for args in (
        ["-m", "membrane_es", "mcp", str(missing / "dir")],
        ["-m", "membrane_es", "serve", "--db", str(missing / "dir"), "--addr", "127.0.0.1:0"],
        ["-m", "membrane_es.grpc_server.membraned", "-db", str(missing / "d"), "-addr", ":0"],
    ):
        result = subprocess.run(
            [sys.executable, *args],
            env=PROCESS_ENV,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 1, result.stderr
        assert f"no directory {missing}" in result.stderr
    assert not (tmp_path / "nonexistent").exists()


def test_a_read_never_creates_a_tenants_store(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": [{"key": "acme-key", "tenant": "acme"}]}))
    config = DaemonConfig(
        db_path=str(tmp_path / "memory"), api_keys_file=str(keys), embedding_model="none"
    )
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        tenants, ring = open_stores(config)
    assert f"created a new store at {tmp_path / 'memory'}" in err.getvalue()
    acme = tmp_path / "memory" / "tenants" / "acme"
    headers = {"authorization": "Bearer acme-key"}
    try:
        assert not acme.exists()  # not at startup either
        with TestClient(create_app(tenants, ring)) as client:
            listed = client.get("/v1/memory/entries", headers=headers)
            assert listed.status_code == 200 and listed.json()["count"] == 0
            assert client.get("/v1/memory/entries/1", headers=headers).status_code == 404
            assert not acme.exists()
            body = {"type": "project", "title": "Deploys go out on Fridays"}
            assert client.post("/v1/memory/entries", json=body, headers=headers).status_code == 201
            assert acme.is_dir()  # the first write makes it
            assert client.get("/v1/memory/entries", headers=headers).json()["count"] == 1
    finally:
        tenants.close()


def test_a_grpc_read_never_creates_a_tenants_store(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": [{"key": "acme-key", "tenant": "acme"}]}))
    config = DaemonConfig(
        db_path=str(tmp_path / "memory"),
        listen_addr="127.0.0.1:0",
        api_keys_file=str(keys),
        embedding_model="none",
        consolidation_interval="0",
    )
    acme = tmp_path / "memory" / "tenants" / "acme"
    with contextlib.redirect_stderr(io.StringIO()), Daemon(config) as daemon:
        with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
            stub = pb_grpc.MembraneServiceStub(channel)
            key = (("authorization", "Bearer acme-key"),)
            trust = pb.TrustContext(max_sensitivity="hyper", authenticated=True)
            graph = stub.RetrieveGraph(
                pb.RetrieveGraphRequest(task_descriptor="anything", trust=trust), metadata=key
            )
            assert list(graph.nodes) == []
            with pytest.raises(grpc.RpcError) as missing:
                stub.RetrieveByID(pb.RetrieveByIDRequest(id="r-1", trust=trust), metadata=key)
            assert missing.value.code() is grpc.StatusCode.NOT_FOUND
            stub.GetMetrics(pb.GetMetricsRequest(), metadata=key)
            assert not acme.exists()


# --- empty and meaningless writes are refused, naming the field ---------------------------


def test_empty_writes_are_refused_naming_the_field(tmp_path: Path) -> None:
    store = str(tmp_path / "memory")
    ok("capture", store, "--text", "a first memory")
    for args, field in (
        (("capture", store, "--text", ""), "content"),
        (("capture", store, "--text", "   "), "content"),
        (("capture", store, "{}"), "content"),
        (("create", store, '{"type": "semantic", "payload": {"kind": "semantic"}}'), "subject"),
        (
            (
                "create",
                store,
                '{"type": "semantic", "payload": {"subject": "Orchid", "predicate": " "}}',
            ),
            "predicate",
        ),
    ):
        refused = cli(*args)
        assert refused.returncode == 1 and field in refused.stderr, (args, refused.stderr)
    assert "1 record" in ok("list", store)  # nothing was written


def test_mcp_refuses_an_empty_capture() -> None:
    async def body(client: Client) -> None:
        result = await client.call_tool("capture", {"content": ""})
        assert result.is_error
        said = " ".join(getattr(block, "text", "") for block in result.content)
        assert "content" in said and "empty" in said

    memory = Membrane.in_memory(embedder=None)

    async def run() -> None:
        async with Client(build_server(memory, Caller())) as client:
            await body(client)

    anyio.run(run)
    assert memory.get_metrics()["total_records"] == 0


def test_http_refuses_unknown_fields(tmp_path: Path) -> None:
    memory = Membrane.in_memory(embedder=None)

    with TestClient(create_app(Tenants(":memory:", lambda _t, _p: memory), KeyRing())) as http:
        made = http.post("/v1/memory/entries", json={"type": "user", "title": "t", "colour": "red"})
        assert made.status_code == 400 and made.json()["error"].startswith("colour:")
        entry = http.post("/v1/memory/entries", json={"type": "user", "title": "t"}).json()
        patched = http.patch(f"/v1/memory/entries/{entry['id']}", json={"colour": "red"})
        assert patched.status_code == 400 and patched.json()["error"].startswith("colour:")


# --- derived facts read as words ----------------------------------------------------------


def test_a_derived_fact_reads_with_its_entitys_name(tmp_path: Path) -> None:
    store = str(tmp_path / "memory")
    captured = ok("capture", store, REX, "--source-kind", "observation")
    assert "Rex is_a dog" in captured
    assert "Concept: Rex" in captured and "Person" not in captured  # a dog is no person
    assert re.search(r"edge \S+ mentions_entity Rex \(", captured)
    listed = ok("list", store, "--type", "semantic")
    assert "Rex is_a dog" in listed
    fact = json.loads(ok("list", store, "--type", "semantic", "--json", "--detail"))["records"][0]
    assert fact["interpretation"]["summary"] == "Rex is_a dog"  # what MCP and gRPC carry


# --- network defaults ---------------------------------------------------------------------


def test_servers_listen_on_loopback_unless_told_and_warn_beyond_it(tmp_path: Path) -> None:
    assert DaemonConfig().listen_addr == "127.0.0.1:9090"
    assert is_loopback("127.0.0.1:8080") and is_loopback("localhost:1") and is_loopback("[::1]:2")
    assert not is_loopback(":9090") and not is_loopback("0.0.0.0:80")
    err = io.StringIO()
    assert warn_if_open("membraned", "gRPC", ":9090", keyed=False, stream=err)
    assert "without API keys" in err.getvalue()
    assert not warn_if_open("membraned", "gRPC", ":9090", keyed=True, stream=err)

    store = str(tmp_path / "memory")
    http = f"127.0.0.1:{free_port()}"
    # only HTTP asked for an address: gRPC stays on loopback too (on a free port here)
    args = ["-m", "membrane_es", "serve", "--db", store, "--http", http, "--addr", "127.0.0.1:0"]
    with server(*args, says="listening on") as said:
        assert "membrane-es serve listening on 127.0.0.1:0" in said and "warning" not in said
    wide = ["-m", "membrane_es", "serve", "--db", store, "--addr", ":0"]
    with server(*wide, says="listening on") as said:
        assert "warning: gRPC listens on :0, beyond this machine, without API keys" in said


def test_mcp_over_http_checks_the_api_keys(tmp_path: Path) -> None:
    port = free_port()
    args = ["-m", "membrane_es", "mcp", str(tmp_path / "memory"), "--http", f"127.0.0.1:{port}"]
    initialize = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "first-hour", "version": "1"},
            },
        }
    ).encode()

    def status(key: str | None) -> int:
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/mcp", data=initialize, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            return int(refused.code)

    with server(*args, says="running on", env={"MEMBRANE_API_KEY": "mcp-key"}):
        assert status(None) == 401
        assert status("wrong") == 401
        assert status("mcp-key") == 200


# --- the API page speaks to its users -----------------------------------------------------


def test_the_api_page_is_written_for_its_users() -> None:
    memory = Membrane.in_memory(embedder=None)

    with TestClient(create_app(Tenants(":memory:", lambda _t, _p: memory), KeyRing())) as http:
        home = http.get("/")
        assert home.status_code == 200 and "text/html" in home.headers["content-type"]
        assert "swagger" in home.text.lower()  # the docs page
        document = http.get("/openapi.json").text
    for developer_words in ("seed 0", ":mod:", ":class:", "``"):
        assert developer_words not in document
    spec = json.loads(document)
    assert "Authorization: Bearer" in spec["info"]["description"]
    bad = spec["paths"]["/v1/memory/entries"]["post"]["responses"]["400"]
    examples = bad["content"]["application/json"]["examples"]
    assert [e["value"] for e in examples.values()] == [{"error": "title: required"}]


# --- inputs and exits are consistent ------------------------------------------------------


def test_moments_flags_exits_and_files_are_consistent(tmp_path: Path) -> None:
    assert re.fullmatch(r"membrane-es \S+\n", ok("--version"))
    store = str(tmp_path / "memory")
    captured = json.loads(ok("capture", store, "--text", "Orchid deploys on Fridays", "--json"))
    record_id = captured["primary_record"]["id"]

    forgot = cli("forget", store, record_id)
    assert forgot.returncode == 2 and "--why" in forgot.stderr  # usage, as for any option
    ok("forget", store, record_id, "--why", "asked to forget")
    shown = ok("get", store, record_id)
    assert re.search(
        r"forgotten: asked to forget \(at \d{4}-\d\d-\d\dT\S+, by membrane-es-cli\)", shown
    )

    export = tmp_path / "memory.jsonl"
    ok("export", store, str(export))
    first = export.read_bytes()
    refused = cli("export", store, str(export))
    assert refused.returncode == 1 and "--force" in refused.stderr
    assert export.read_bytes() == first
    ok("export", store, str(export), "--force")

    usage = cli("serve", "--help")
    assert "--db DIR" in usage.stdout and "-db DIR" not in usage.stdout.replace("--db DIR", "")

    memory = Membrane.in_memory(embedder=None)

    with TestClient(create_app(Tenants(":memory:", lambda _t, _p: memory), KeyRing())) as http:
        http.post("/v1/memory/entries", json={"type": "user", "title": "dark mode"})
        for moment in ("2100-01-01T00:00:00Z", "4102444800"):
            read = http.get("/v1/memory/entries", params={"as_of": moment})
            assert read.status_code == 200 and read.json()["count"] == 1, moment
        for moment in ("1999-01-01T00:00:00+02:00", "915148800"):
            assert http.get("/v1/memory/entries", params={"as_of": moment}).json()["count"] == 0
        wrong = http.get("/v1/memory/entries", params={"as_of": "yesterday"})
        assert wrong.status_code == 400 and wrong.json()["error"].startswith("as_of:")


# --- the tour ----------------------------------------------------------------------------


def test_the_tour_holds_together() -> None:
    """What test_readme.py cannot see by running the blocks: what the prose promises."""
    tour = README[README.index("## A five-minute tour") : README.index("## Memory that lasts")]
    assert "empty directory" not in tour  # a directory of one's own, the virtualenv active
    daemon = tour[tour.index("### 3.") : tour.index("### 4.")]
    assert re.search(r"membraned .*> membraned\.log 2>&1 &\n", daemon)  # in the background
    assert 'kill "$(cat membraned.pid)"' in daemon  # and stopped
    assert "membrane_pb2_grpc" in daemon and "<!-- not run" not in daemon.split("```python")[0]
    assert "and the unscoped records" in tour  # what --trust-scope does with them
    first_key = README.index("$KEY")
    assert README.rindex("export KEY=", 0, first_key) < first_key  # set before it is used


# --- questions without evidence, and what a search is by ----------------------------------


def test_a_question_returns_only_what_it_has_evidence_for(tmp_path: Path) -> None:
    store = str(tmp_path / "memory")
    ok("capture", store, "--text", "Orchid deploys on Fridays")
    ok("capture", store, "--text", "the coffee machine is broken")
    found = json.loads(ok("retrieve", store, "when does Orchid deploy?", "--json"))
    assert [r["text"] for r in found["records"]] == ["Orchid deploys on Fridays"]
    assert json.loads(ok("retrieve", store, "what is a quasar?", "--json"))["records"] == []
    listed = json.loads(ok("retrieve", store, "", "--json"))["records"]  # no task: by salience
    assert len(listed) == 2

    words = json.loads(ok("stats", store, "--json", "--embedder", "none"))
    assert words["embedder"] == "none" and words["search"].startswith("words only")
    hashed = json.loads(ok("stats", store, "--json", "--embedder", "hashing"))
    assert hashed["embedder"].startswith("hashing") and "meaning" in hashed["search"]


def test_a_task_on_the_library_keeps_the_same_rule() -> None:
    memory = Membrane.in_memory(embedder=None)
    memory.capture_memory("Orchid deploys on Fridays", source_kind="event")
    memory.capture_memory("the coffee machine is broken", source_kind="event")
    reader = TrustContext(max_sensitivity=Sensitivity.HYPER)
    assert len(memory.retrieve("Orchid", trust=reader).records) == 1
    assert memory.retrieve("quasar", trust=reader).records == []
    assert len(memory.retrieve("", trust=reader).records) == 2


def test_a_captured_fact_is_titled_in_words_over_http() -> None:
    memory = Membrane.in_memory(embedder=None)
    memory.capture_memory(json.loads(REX), source_kind="observation")
    with TestClient(create_app(Tenants(":memory:", lambda _t, _p: memory), KeyRing())) as http:
        found = http.get("/v1/memory/entries", params={"q": "Rex dog"}).json()["entries"]
    fact = next(
        entry for entry in found if entry["type"] == "reference" and "dog" in entry["content"]
    )
    assert fact["title"] == "Rex"  # the entity's name, not its id

"""The MCP server through the SDK's own client, in process: tools, as_of, errors, and the
server's trust ceiling, which a client can narrow but never widen."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from mcp.client import Client

from membrane_es import Membrane, TrustContext
from membrane_es.access.ceiling import Caller
from membrane_es.embedding import HashingEmbedder
from membrane_es.mcp_server.server import build_server
from membrane_es.schema.enums import Sensitivity


def fact(obj: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "semantic",
        "scope": "project:orchid",
        "payload": {
            "kind": "semantic",
            "subject": "Orchid",
            "predicate": "deploy_target",
            "object": obj,
        },
        "provenance": {"sources": [{"kind": "observation", "ref": "standup"}]},
        **extra,
    }


def session(memory: Membrane, caller: Caller, body: Callable[[Client], Awaitable[None]]) -> None:
    async def run() -> None:
        async with Client(build_server(memory, caller)) as client:
            await body(client)

    anyio.run(run)


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def error(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return " ".join(getattr(block, "text", "") for block in result.content)


@pytest.fixture
def memory() -> Membrane:
    return Membrane.in_memory()


def test_tools_write_revise_and_read_as_of(memory: Membrane) -> None:
    async def body(client: Client) -> None:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {
            "capture",
            "create_record",
            "context",
            "retrieve",
            "retrieve_graph",
            "list",
            "get",
            "history",
            "changes",
            "supersede",
            "fork",
            "merge",
            "retract",
            "contest",
            "reinforce",
            "penalize",
            "forget",
        }
        first = (await call(client, "create_record", record=fact("staging")))["record"]
        moved = (
            await call(
                client, "supersede", id=first["id"], record=fact("production"), rationale="r"
            )
        )["record"]
        variant = (await call(client, "fork", id=moved["id"], record=fact("dev"), rationale="d"))[
            "record"
        ]
        assert await call(client, "reinforce", id=moved["id"], rationale="ok") == {"ok": True}
        await call(client, "penalize", id=variant["id"], amount=0.2, rationale="vague")
        await call(
            client,
            "contest",
            id=moved["id"],
            contesting_ref=variant["id"],
            rationale="disagrees",
        )
        # two values of one single-valued fact, stored as given (resolution would supersede)
        a = (await call(client, "create_record", record=fact("a"), resolve=False))["record"]
        b = (await call(client, "create_record", record=fact("b"), resolve=False))["record"]
        assert "resolution" not in b
        merged = (
            await call(client, "merge", ids=[a["id"], b["id"]], record=fact("ab"), rationale="=")
        )["record"]
        await call(client, "retract", id=variant["id"], rationale="wrong")
        captured = await call(
            client,
            "capture",
            content={"text": "Orchid deploys on Fridays", "project": "Orchid"},
            source_kind="event",
            scope="project:orchid",
        )
        assert set(captured) == {"record", "created"} and captured["created"]
        assert captured["record"]["type"] == "episodic"
        assert captured["record"]["text"] == "Orchid deploys on Fridays"

        now = (await call(client, "get", id=first["id"], detail=True))["record"]
        assert now["payload"]["revision"]["status"] == "retracted"
        then = (await call(client, "get", id=first["id"], as_of=first["at"]))["record"]
        assert then["text"] == "Orchid deploy_target: staging"
        events = [e["event"] for e in (await call(client, "history", id=moved["id"]))["entries"]]
        assert events[0] == "Created" and "Reinforced" in events

        found = await call(client, "retrieve", task="where does Orchid deploy", limit=5)
        ids = [record["id"] for record in found["records"]]
        assert moved["id"] in ids and merged["id"] in ids and first["id"] not in ids
        past = await call(client, "retrieve", task="Orchid", as_of=first["at"])
        assert [record["id"] for record in past["records"]] == [first["id"]]
        graph = await call(client, "retrieve_graph", task="Orchid", max_hops=1)
        assert graph["nodes"][0]["hop"] == 0 and graph["edges"]
        explained = await call(client, "retrieve", task="Orchid", limit=2, explain=True)
        assert [e["record_id"] for e in explained["explanations"]] == [
            record["id"] for record in explained["records"]
        ]
        roots = await call(client, "retrieve_graph", task="Orchid", max_hops=0, explain=True)
        assert [e["record_id"] for e in roots["explanations"]] == [
            node["id"] for node in roots["nodes"]
        ]

        assert "record not found" in await error(client, "get", id="nope")
        assert "RFC 3339" in await error(client, "get", id=first["id"], as_of="2026-W47")
        assert "payload" in await error(client, "create_record", record={"type": "semantic"})

    session(memory, Caller(), body)


def test_the_server_ceiling_is_never_widened(memory: Membrane) -> None:
    public = memory.create_record(fact("staging"))
    secret = memory.create_record(fact("vault", sensitivity="hyper"))
    elsewhere = memory.create_record(fact("other", scope="project:lily"))
    caller = Caller(max_sensitivity=Sensitivity.MEDIUM, scopes=("project:orchid",))

    async def body(client: Client) -> None:
        found = await call(client, "retrieve", task="Orchid", max_sensitivity="hyper")
        by_id = {record["id"]: record for record in found["records"]}
        assert public.id in by_id and elsewhere.id not in by_id
        assert secret.id not in by_id or by_id[secret.id]["redacted"]
        # asking for a scope outside the ceiling does not reach it
        wider = await call(client, "retrieve", task="Orchid", scopes=["project:lily"])
        assert elsewhere.id not in {record["id"] for record in wider["records"]}
        assert "denied" in await error(client, "get", id=secret.id, max_sensitivity="hyper")
        # narrowing works: at "public" even the low record is not read in full
        assert "denied" in await error(client, "get", id=public.id, max_sensitivity="public")
        # writes: nothing above the ceiling, no revising what it cannot read
        assert "ceiling" in await error(
            client, "create_record", record=fact("x", sensitivity="high")
        )
        assert "ceiling" in await error(
            client, "capture", content={"text": "x"}, scope="project:lily"
        )
        assert "denied" in await error(client, "retract", id=secret.id, rationale="x")
        assert "denied" in await error(client, "reinforce", id=elsewhere.id, rationale="x")

    session(memory, caller, body)
    owner = TrustContext(max_sensitivity=Sensitivity.HYPER)
    assert memory.retrieve_by_id(secret.id, trust=owner).salience > 0  # not retracted


SHORT = [
    "Orchid deploys on Fridays",
    "Orchid moved to the new cluster in March",
    "The Orchid team prefers blue-green deploys",
    "Lily deploys every day",
]


async def text_of(client: Client, tool: str, **arguments: Any) -> str:
    """What the model reads of an answer: the text of its content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return " ".join(getattr(block, "text", "") for block in result.content)


def test_answers_are_compact_unless_detail_is_asked_for() -> None:
    memory = Membrane.in_memory(embedder=HashingEmbedder())

    async def body(client: Client) -> None:
        for text in SHORT:
            await call(
                client,
                "capture",
                content={"text": text, "project": "Orchid"},
                source_kind="event",
                scope="project:orchid",
            )
        task = "when does Orchid deploy?"
        short = await text_of(client, "retrieve", task=task, limit=3)
        assert len(short) <= 1200, short
        found = await call(client, "retrieve", task=task, limit=3)
        for record in found["records"]:
            assert set(record) <= {"id", "type", "who", "text", "at", "score"}
            assert record["text"] and isinstance(record["score"], float)
        full = await call(client, "retrieve", task=task, limit=3, detail=True)
        assert [r["id"] for r in full["records"]] == [r["id"] for r in found["records"]]
        assert "payload" in full["records"][0] and "audit_log" in full["records"][0]
        assert len(await text_of(client, "retrieve", task=task, limit=3, detail=True)) > 4 * len(
            short
        )
        assert len(await text_of(client, "retrieve_graph", task=task, node_limit=3)) <= 1200
        one = (await call(client, "get", id=found["records"][0]["id"]))["record"]
        assert one == {k: v for k, v in found["records"][0].items() if k != "score"}

    session(memory, Caller(), body)


def test_context_list_and_forget_tools() -> None:
    memory = Membrane.in_memory(embedder=HashingEmbedder())

    async def body(client: Client) -> None:
        ids = []
        for text in SHORT:
            captured = await call(
                client, "capture", content={"text": text}, source_kind="event", scope="project:x"
            )
            ids.append(captured["record"]["id"])
        packed = await call(client, "context", task="Orchid deploys", budget_tokens=64)
        assert set(packed) == {"text", "ids", "tokens", "budget_tokens"}
        assert packed["ids"] and 0 < packed["tokens"] <= 64
        assert all(f"[{i[:8]}]" in packed["text"] for i in packed["ids"])
        detailed = await call(client, "context", task="Orchid deploys", detail=True)
        assert detailed["counted_with"] and detailed["memories"][0]["ref"]
        listed = await call(client, "list", limit=2)
        assert len(listed["records"]) == 2 and "text" in listed["records"][0]
        assert len((await call(client, "list", scope="project:none"))["records"]) == 0
        assert (await call(client, "forget", id=ids[0], rationale="asked"))["forgotten"] == [ids[0]]
        after = await call(client, "context", task="Orchid deploys on Fridays")
        assert ids[0] not in after["ids"] and "Fridays" not in after["text"]
        assert "budget_tokens" in await error(client, "context", task="x", budget_tokens=3)

    session(memory, Caller(), body)


def test_context_and_forget_keep_to_the_ceiling() -> None:
    memory = Membrane.in_memory(embedder=HashingEmbedder())
    public = memory.capture_memory({"text": "Orchid budget is fine"}, scope="project:orchid")
    secret = memory.capture_memory(
        {"text": "Orchid budget secret 42"}, scope="project:orchid", sensitivity="high"
    )
    caller = Caller(max_sensitivity=Sensitivity.MEDIUM, scopes=("project:orchid",))

    async def body(client: Client) -> None:
        packed = await call(client, "context", task="Orchid budget", max_sensitivity="hyper")
        assert packed["ids"] == [public.primary_record.id] and "secret 42" not in packed["text"]
        listed = await call(client, "list")
        by_id = {record["id"]: record for record in listed["records"]}
        assert by_id[secret.primary_record.id] == {
            "id": secret.primary_record.id,
            "type": "episodic",
            "text": "",
            "at": by_id[secret.primary_record.id]["at"],
            "redacted": True,
        }
        assert "denied" in await error(client, "forget", id=secret.primary_record.id, rationale="x")

    session(memory, caller, body)


def test_arguments_that_do_not_fit_are_refused_in_one_short_line(memory: Membrane) -> None:
    async def body(client: Client) -> None:
        missing = await error(client, "get")
        assert missing == "get: id: required", missing
        typed = await error(client, "penalize", id="x", amount="lots", rationale="r")
        assert typed.startswith("penalize: amount: ") and "\n" not in typed
        assert "pydantic" not in typed and "http" not in typed, typed
        # a name the tools used before is not ignored: it is named, with the ones taken
        old = await error(client, "retract", record_id="x", rationale="r")
        assert old.startswith("retract takes no argument 'record_id'") and "id" in old
        # the engine's field names are the tools' own
        bare = {"type": "semantic", "payload": {"kind": "semantic", "subject": "s"}}
        first = (await call(client, "create_record", record=fact("staging")))["record"]
        said = await error(client, "supersede", id=first["id"], record=bare, rationale="r")
        assert ": validation error for record.payload." in said, said
        assert "new_record" not in said

    session(memory, Caller(), body)


def test_an_answer_read_below_what_was_asked_says_so(memory: Membrane) -> None:
    memory.create_record(fact("staging"))
    caller = Caller(max_sensitivity=Sensitivity.LOW, scopes=("project:orchid",))

    async def body(client: Client) -> None:
        asked = await call(client, "list", max_sensitivity="hyper")
        assert asked["trust"] == (
            "asked for max_sensitivity hyper; answered at low, this server's ceiling"
        )
        scoped = await call(client, "retrieve", task="Orchid", scopes=["project:lily"])
        assert "project:lily" in scoped["trust"] and "left out" in scoped["trust"]
        assert "trust" not in await call(client, "list", max_sensitivity="low")
        assert "trust" not in await call(client, "list")

    session(memory, caller, body)


def test_changes_come_in_bounded_pages_under_the_ceiling(memory: Membrane) -> None:
    memory.create_record(fact("the secret cluster", sensitivity="hyper"))  # above the ceiling

    async def body(client: Client) -> None:
        for n in range(3):
            await call(client, "create_record", record=fact(f"cluster-{n}"), resolve=False)
        first = await call(client, "changes", limit=2)
        assert [c["position"] for c in first["changes"]] == [2, 3]
        assert first["changes"][0]["operation"] == "created"
        assert "id" in first["changes"][0]["record"] and first["next_after"] == 3
        rest = await call(client, "changes", after=first["next_after"], limit=200)
        assert [c["position"] for c in rest["changes"]] == [4]
        assert rest["next_after"] == rest["head"] == 4
        assert "limit" in await error(client, "changes", limit=201)
        assert "after" in await error(client, "changes", after=-1)

    session(memory, Caller(max_sensitivity=Sensitivity.MEDIUM), body)


def test_reads_as_of_a_log_position(memory: Membrane) -> None:
    """Each read takes a position the changes tool gave: the store right after that event."""

    async def body(client: Client) -> None:
        first = (await call(client, "create_record", record=fact("staging")))["record"]
        made = (await call(client, "changes", limit=10))["changes"][0]["position"]
        await call(client, "reinforce", id=first["id"], rationale="it helped")
        await call(client, "create_record", record=fact("production"), resolve=False)
        at = {"as_of_position": made}
        got = await call(client, "get", id=first["id"], detail=True, **at)
        assert [a["action"] for a in got["record"]["audit_log"]] == ["create"]
        for tool, arguments in (
            ("retrieve", {"task": "Orchid"}),
            ("retrieve_graph", {"task": "Orchid"}),
            ("list", {}),
        ):
            answer = await call(client, tool, **arguments, **at)
            records = answer.get("records") or answer.get("nodes")
            assert [r["id"] for r in records] == [first["id"]], (tool, answer)
        context = await call(client, "context", task="Orchid deploy target", **at)
        assert context["ids"] == [first["id"]]
        assert "production" not in context["text"]
        # before the first event: nothing yet
        assert (await call(client, "list", as_of_position=0))["records"] == []
        for bad in (-1, 10_000):
            said = await error(client, "get", id=first["id"], as_of_position=bad)
            assert "as_of_position" in said
        said = await error(client, "retrieve", task="Orchid", as_of_position="x")
        assert "as_of_position" in said and "\n" not in said
        both = await error(client, "get", id=first["id"], as_of="2026-01-01T00:00:00Z", **at)
        assert "as_of_position" in both and "not both" in both

    session(memory, Caller(), body)

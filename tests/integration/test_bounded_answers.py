"""Compact answers stay bounded whatever the store holds: with a 1 MB capture in it, MCP's
retrieve, list and retrieve_graph and the command line's ``retrieve --json`` and ``graph
--json`` cut the record's text, say how much more there is and how to read it, and ``get``
gives the whole text back."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from membrane_es import Membrane, TrustContext
from membrane_es.access.ceiling import Caller
from membrane_es.cli import main
from membrane_es.mcp_server.server import build_server
from membrane_es.queries import compact
from membrane_es.schema.enums import Sensitivity

OWNER = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)
MEGABYTE = 1 << 20
# A compact answer with one record: the record's fields and its cut text, well under this.
ONE_RECORD_ANSWER = compact.TEXT_CHARACTERS + 1_000


def big_text() -> str:
    words = ("orchid", "deploys", "to", "production", "every", "friday", "afternoon")
    text = " ".join(words[n % len(words)] for n in range(MEGABYTE // 6))
    return text[:MEGABYTE]


def assert_cut(item: dict[str, Any], whole: int) -> None:
    assert len(item["text"]) <= compact.TEXT_CHARACTERS + 100
    assert item["more_characters"] > whole - compact.TEXT_CHARACTERS - 1
    assert f"more characters: get {item['id']}]" in item["text"]
    assert f"{item['more_characters']:,}" in item["text"]


def test_a_text_is_cut_at_a_word_with_a_marker_and_get_gives_it_whole() -> None:
    text = "word " * 1_000
    cut, more = compact.cut(text, "abc", limit=102)
    assert cut.startswith("word word") and cut.endswith("… [4,901 more characters: get abc]")
    assert more == len(text) - len(cut.split(" … [")[0])
    assert compact.cut("short", "abc") == ("short", 0)


def test_an_answer_with_many_records_stops_before_its_bound_and_says_how_many() -> None:
    memory = Membrane.in_memory(embedder=None)
    for n in range(60):
        memory.capture_memory(f"deploy note {n}: " + "orchid " * 300, source_kind="note")
    found = memory.retrieve("orchid deploy", trust=OWNER, limit=60, explain=True)
    answer = compact.retrieved(found, explain=True)
    assert len(json.dumps(answer)) < compact.ANSWER_CHARACTERS + 2 * compact.TEXT_CHARACTERS
    kept = len(answer["records"])
    assert 0 < kept < 60 and answer["omitted"] == 60 - kept
    assert "left out" in answer["note"] and "get ID" in answer["note"]
    assert {e["record_id"] for e in answer["explanations"]} == {r["id"] for r in answer["records"]}
    listed = compact.listed(memory.retrieve(trust=OWNER).records)
    assert listed["omitted"] > 0 and len(json.dumps(listed)) < 2 * compact.ANSWER_CHARACTERS


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, str]:
    """An LMDB store holding one 1 MB capture, and its record's id."""
    path = tmp_path / "memory"
    with contextlib.closing(Membrane.open(str(path), embedder=None)) as memory:
        captured = memory.capture_memory(big_text(), source_kind="document")
    return path, captured.primary_record.id


def test_mcp_answers_are_bounded_and_get_reads_the_whole_text(stored: tuple[Path, str]) -> None:
    path, record_id = stored
    memory = Membrane.open(str(path), embedder=None)

    async def body(client: Client) -> None:
        async def call(tool: str, **arguments: Any) -> tuple[dict[str, Any], int]:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content
            text = "".join(getattr(block, "text", "") for block in result.content)
            return result.structured_content or {}, len(text)

        found, size = await call("retrieve", task="orchid deploys to production")
        assert size < ONE_RECORD_ANSWER
        assert_cut(found["records"][0], MEGABYTE)
        listed, size = await call("list")
        assert size < ONE_RECORD_ANSWER
        assert_cut(listed["records"][0], MEGABYTE)
        graph, size = await call("retrieve_graph", task="orchid deploys to production")
        assert size < ONE_RECORD_ANSWER + 1_000  # and its edges
        assert_cut(next(n for n in graph["nodes"] if n["id"] == record_id), MEGABYTE)
        whole, size = await call("get", id=record_id)
        assert whole["record"]["text"] == big_text() and "more_characters" not in whole["record"]

    async def run() -> None:
        async with Client(build_server(memory, Caller())) as client:
            await body(client)

    try:
        anyio.run(run)
    finally:
        memory.close()


def cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0
    return out.getvalue()


def test_cli_compact_json_is_bounded(stored: tuple[Path, str]) -> None:
    path, record_id = stored
    found = cli("retrieve", str(path), "orchid deploys to production", "--json")
    assert len(found.encode()) < ONE_RECORD_ANSWER
    assert_cut(json.loads(found)["records"][0], MEGABYTE)
    graph = cli("graph", str(path), "orchid deploys to production", "--json")
    assert len(graph.encode()) < ONE_RECORD_ANSWER + 1_000
    whole = json.loads(cli("get", str(path), record_id, "--json"))
    assert len(json.dumps(whole)) > MEGABYTE  # get gives the full record

"""``membrane-es mcp`` as an agent framework starts it: a process speaking MCP on standard
input and output, or on streamable HTTP; the SDK's own client on the other end."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters


async def _capture_then_retrieve(client: Client) -> list[Any]:
    captured = await client.call_tool(
        "capture",
        {"content": {"text": "Orchid deploys to staging", "project": "Orchid"}, "scope": "p"},
    )
    assert not captured.is_error, captured.content
    found = await client.call_tool("retrieve", {"task": "Orchid", "scopes": ["p"]})
    assert not found.is_error, found.content
    return list(found.structured_content["records"])


def test_stdio(tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "membrane_es", "mcp", str(store), "--trust", "medium"]
    )

    async def run() -> list[Any]:
        async with Client(server) as client:
            return await _capture_then_retrieve(client)

    records = anyio.run(run)
    assert any(record["type"] == "episodic" for record in records)
    assert (store / "data.mdb").is_file()


def test_streamable_http(tmp_path: Path) -> None:
    store = tmp_path / "store"
    process = subprocess.Popen(
        [sys.executable, "-m", "membrane_es", "mcp", str(store), "--http", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        url = None
        for line in process.stderr:  # uvicorn says where it listens once it does
            found = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
            if found:
                url = found.group(1) + "/mcp"
                break
        assert url, "the server never said where it listens"

        async def run() -> list[Any]:
            async with Client(url) as client:
                return await _capture_then_retrieve(client)

        assert any(record["type"] == "episodic" for record in anyio.run(run))
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()

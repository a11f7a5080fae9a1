"""Each class of bad input on every MCP tool argument it reaches, on a server with a
ceiling: lone surrogates (in strings and in values of the wrong type), moments at and past
the calendar's ends, levels above the ceiling or none at all. Every call either succeeds or
fails with a reason the model can read — never the SDK's bare "Error executing tool X", and
never an error the engine did not anticipate."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import anyio
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

from membrane_es import Membrane
from membrane_es.access.ceiling import Caller
from membrane_es.mcp_server.server import build_server
from membrane_es.schema.enums import Sensitivity
from tests.faults import input_classes as classes

BARE = re.compile(r"^Error executing tool \w+:?\s*$")
UNANTICIPATED = "the server failed on this call"
MOMENT_ARGS = {"as_of", "timestamp"}
LEVEL_ARGS = {"sensitivity", "max_sensitivity"}
RECORD_ARGS = {"record"}
CEILING = Caller(max_sensitivity=Sensitivity.LOW)


def _fact(**extra: Any) -> dict[str, Any]:
    return {
        "type": "semantic",
        "sensitivity": "low",
        "payload": {"kind": "semantic", "subject": "s", "predicate": "p", "object": "o"},
        "provenance": {"sources": [{"kind": "observation", "ref": "r"}]},
        **extra,
    }


def _arguments(tool: str, known: str) -> dict[str, Any]:
    """Arguments with which each tool works."""
    revision = {"rationale": "r", "actor": "a"}
    return {
        "capture": {
            "content": "a note",
            "summary": "s",
            "tags": ["t"],
            "scope": "",
            "sensitivity": "low",
            "timestamp": "2026-01-01T00:00:00Z",
        },
        "create_record": {"record": _fact(), "actor": "a", "rationale": "r"},
        "supersede": {"id": known, "record": _fact(), **revision},
        "fork": {"id": known, "record": _fact(), **revision},
        "merge": {"ids": [known], "record": _fact(), **revision},
        "retract": {"id": known, **revision},
        "contest": {"id": known, "contesting_ref": known, **revision},
        "reinforce": {"id": known, **revision},
        "penalize": {"id": known, "amount": 0.1, **revision},
        "retrieve": {"task": "a note", "as_of": "2026-01-01T00:00:00Z", "max_sensitivity": "low"},
        "retrieve_graph": {"task": "a", "as_of": "2026-01-01T00:00:00Z", "max_sensitivity": "low"},
        "get": {"id": known, "as_of": "2030-01-01T00:00:00Z", "max_sensitivity": "low"},
        "history": {"id": known, "max_sensitivity": "low"},
        "changes": {"after": 0, "limit": 5, "max_sensitivity": "low"},
        "context": {"task": "a note", "as_of": "2026-01-01T00:00:00Z", "max_sensitivity": "low"},
        "list": {"scope": "s", "tags": ["t"], "as_of": "2026-01-01T00:00:00Z"},
        "forget": {"id": known, "rationale": "r", "actor": "a"},
    }[tool]


def _values(kind: str, argument: str) -> list[Any]:
    """The class's values for one argument (empty: the class does not reach it)."""
    if kind == "surrogate":
        wrong_types = [[s] for s in classes.LONE_SURROGATES[:2]] + [{"\ud800": 1}]
        return [*classes.LONE_SURROGATES, *wrong_types]
    if kind == "moment":
        if argument not in MOMENT_ARGS:
            return []
        return classes.MOMENTS_PAST_THE_ENDS + classes.MOMENTS_AT_THE_ENDS
    return classes.ABOVE_CEILING if argument in LEVEL_ARGS else []


def _cases(known: str, tools: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(class, tool, arguments) for every value of every class on every argument it
    reaches, and in the records the writing tools take (surrogates in each field, levels
    above the ceiling)."""
    cases = []
    for kind in classes.CLASSES:
        for tool in tools:
            base = _arguments(tool, known)
            for argument in base:
                for value in _values(kind, argument):
                    cases.append((kind, tool, {**base, argument: value}))
                if argument in RECORD_ARGS:
                    fields = {"surrogate": ["scope", "sensitivity", "tags", "confidence"]}
                    for field in fields.get(kind, ["sensitivity"] if kind == "ceiling" else []):
                        for value in _values(kind, "sensitivity" if kind == "ceiling" else field):
                            record = _fact(**{field: value})
                            cases.append((kind, tool, {**base, argument: record}))
    return cases


def test_every_class_on_every_tool_fails_with_a_reason() -> None:
    """The server's own tool dispatch, in process: the SDK's client refuses to send a lone
    surrogate, but a client over stdio or HTTP can (``"\\ud800"`` is valid JSON). What the
    server answers is what its request handler makes of each outcome: a ``ToolError``'s
    text, or the bare "Error executing tool X" for anything else."""
    memory = Membrane.in_memory(embedder=None)
    server = build_server(memory, CEILING)
    tally: Counter[tuple[str, str]] = Counter()
    failures: list[str] = []

    async def run() -> None:
        tools = sorted(tool.name for tool in await server.list_tools())
        for kind, tool, arguments in _cases(memory.create_record(_fact()).id, tools):
            try:
                await server.call_tool(tool, arguments)
            except UnexpectedToolError as error:
                text = str(error)
            except ToolError as error:
                text = str(error)
                if not BARE.match(text) and UNANTICIPATED not in text:
                    text.encode("utf-8")  # a reply that can be sent
                    tally[kind, "refused with a reason"] += 1
                    continue
            else:
                tally[kind, "ok"] += 1
                continue
            failures.append(f"{tool}({arguments!r}): {text}")
            tally[kind, "without a reason"] += 1

    try:
        anyio.run(run)
    finally:
        memory.close()
    assert not failures, failures[:5]
    for kind in classes.CLASSES:  # every class was generated, and refused somewhere
        assert tally[kind, "refused with a reason"] > 0, (kind, tally)


def test_an_unknown_level_under_a_ceiling_is_a_validation_error() -> None:
    memory = Membrane.in_memory(embedder=None)
    server = build_server(memory, CEILING)

    async def run() -> str:
        try:
            await server.call_tool("capture", {"content": "x", "sensitivity": "ultra"})
        except UnexpectedToolError as error:
            raise AssertionError(f"a crash, not a refusal: {error.__cause__!r}") from error
        except ToolError as error:
            return str(error)
        raise AssertionError("an unknown level was taken")

    try:
        text = anyio.run(run)
    finally:
        memory.close()
    assert "validation error for sensitivity" in text and "'ultra'" in text, text

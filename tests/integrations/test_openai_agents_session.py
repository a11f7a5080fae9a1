"""The OpenAI Agents SDK session answers as the SDK's own ``SQLiteSession`` does, for any
sequence of operations; and what it adds: turns as searchable memory, ``as_of``, trust."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from agents.memory import Session, SessionSettings, SQLiteSession
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es import Membrane, ReadOnlyError, TrustContext, ValidationError
from membrane_es.integrations.openai_agents_session import MembraneSession

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": TEXT}
)
ITEM = MESSAGE | st.dictionaries(TEXT, JSON, max_size=4)
OPERATION = st.one_of(
    st.tuples(st.just("add"), st.lists(ITEM, max_size=4)),
    st.tuples(st.just("get"), st.sampled_from([None, 0, 1, 2, 5, -1])),
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("clear"), st.none()),
    st.tuples(st.just("reopen"), st.none()),  # a new session object over the same store
)


@pytest.fixture
def memory() -> Iterator[Membrane]:
    with Membrane.in_memory(embedder=None) as engine:
        yield engine


async def _apply(session: Any, operation: str, argument: Any) -> Any:
    if operation == "add":
        return await session.add_items(argument)
    if operation == "get":
        return await session.get_items(argument)
    if operation == "pop":
        return await session.pop_item()
    if operation == "clear":
        return await session.clear_session()
    raise AssertionError(operation)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPERATION, max_size=12))
def test_every_sequence_answers_as_sqlite_session_does(operations: list[tuple[str, Any]]) -> None:
    async def run() -> None:
        oracle = SQLiteSession("conversation")
        with Membrane.in_memory(embedder=None) as engine:
            ours = MembraneSession("conversation", engine)
            for operation, argument in operations:
                if operation == "reopen":
                    ours = MembraneSession("conversation", engine)
                    continue
                expected = await _apply(oracle, operation, argument)
                assert await _apply(ours, operation, argument) == expected, operation
            assert await ours.get_items() == await oracle.get_items()
        oracle.close()

    asyncio.run(run())


def test_sessions_are_apart_and_settings_limit_applies(memory: Membrane) -> None:
    async def run() -> None:
        a = MembraneSession("a", memory, session_settings=SessionSettings(limit=1))
        b = MembraneSession("b", memory)
        assert isinstance(b, Session)  # the SDK's protocol, checked at run time
        await a.add_items([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}])
        await b.add_items([{"role": "user", "content": "other"}])
        assert await a.get_items() == [{"role": "user", "content": "two"}]
        assert await a.get_items(5) == [
            {"role": "user", "content": "one"},
            {"role": "user", "content": "two"},
        ]
        assert await b.pop_item() == {"role": "user", "content": "other"}
        assert await b.pop_item() is None
        assert len(await a.get_items(-1)) == 2
        await a.add_items([{"role": "user", "content": "three"}])
        assert len(await a.get_items(5)) == 3  # a limit above the count: every item

    asyncio.run(run())


def test_turns_are_searchable_memory_and_readable_as_of(memory: Membrane) -> None:
    async def run() -> None:
        session = MembraneSession("trip", memory)
        await session.add_items([{"role": "user", "content": "book a flight to Lisbon"}])
        before = datetime.now(UTC)
        await session.add_items([{"role": "assistant", "content": "done: TP 1234 on Friday"}])
        (best, *_) = await session.search("which flight on Friday?")
        assert best == {"role": "assistant", "content": "done: TP 1234 on Friday"}
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.search("flight") == []
        assert await session.as_of(before).get_items() == [
            {"role": "user", "content": "book a flight to Lisbon"}
        ]
        with pytest.raises(ReadOnlyError):
            await session.as_of(before).add_items([{"role": "user", "content": "x"}])
        # cleared from the session and from active reads; every turn kept in its history
        reader = TrustContext(scopes=[session.scope])
        assert memory.retrieve("Lisbon flight", trust=reader).records == []
        then = memory.retrieve("Lisbon flight", trust=reader, as_of=before).records
        assert [record.scope for record in then] == ["session:trip"]

    asyncio.run(run())


def test_a_caller_never_reads_above_its_ceiling(memory: Membrane) -> None:
    async def run() -> None:
        secret = MembraneSession(
            "s", memory, trust=TrustContext(max_sensitivity="high"), sensitivity="high"
        )
        await secret.add_items([{"role": "user", "content": "the vault code is 0000"}])
        assert await MembraneSession("s", memory).get_items() == []
        assert await MembraneSession("s", memory).pop_item() is None
        assert len(await secret.get_items()) == 1

    asyncio.run(run())


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ([{"role": "user"}, "hello"], "items[1]"),
        ([{"when": datetime.now(UTC)}], "items[0]"),
        ({"role": "user"}, "items"),
    ],
)
def test_bad_items_name_the_item_and_write_nothing(
    memory: Membrane, items: Any, field: str
) -> None:
    session = MembraneSession("bad", memory)
    with pytest.raises(ValidationError) as error:
        asyncio.run(session.add_items(items))
    assert error.value.field == field
    assert memory.get_metrics()["total_records"] == 0


def test_a_session_the_caller_could_not_read_back_is_refused(memory: Membrane) -> None:
    for options, field in (
        ({"sensitivity": "high"}, "sensitivity"),
        ({"trust": TrustContext(scopes=["team:a"])}, "scope"),
        ({"scope": ""}, "scope"),
    ):
        with pytest.raises(ValidationError) as error:
            MembraneSession("x", memory, **options)  # type: ignore[arg-type]
        assert error.value.field == field
    with pytest.raises(ValidationError) as error:
        MembraneSession(" ", memory)
    assert error.value.field == "session_id"


WRITER = """
import asyncio, sys
from membrane_es import Membrane
from membrane_es.integrations.openai_agents_session import MembraneSession

async def write() -> None:
    with Membrane.open(sys.argv[1], embedder=None) as memory:
        await MembraneSession("shared", memory).add_items([{"role": "user", "content": "two"}])

asyncio.run(write())
"""


def test_items_another_process_adds_are_read(tmp_path: Path) -> None:
    async def run() -> None:
        with Membrane.open(tmp_path, embedder=None) as memory:
            session = MembraneSession("shared", memory)
            await session.add_items([{"role": "user", "content": "one"}])
            assert len(await session.get_items()) == 1
            subprocess.run([sys.executable, "-c", WRITER, str(tmp_path)], check=True)
            assert [item["content"] for item in await session.get_items()] == ["one", "two"]

    asyncio.run(run())

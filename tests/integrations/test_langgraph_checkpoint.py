"""The LangGraph checkpointer: LangGraph's own conformance suite, every capability, then what
only the event log gives — time travel, ``as_of`` reads, restarts, trust — and bad input."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from membrane_es import (
    AccessDeniedError,
    Membrane,
    ReadOnlyError,
    TrustContext,
    ValidationError,
)
from membrane_es.integrations.langgraph_checkpoint import MembraneSaver


@pytest.fixture
def memory() -> Iterator[Membrane]:
    with Membrane.in_memory(embedder=None) as store:
        yield store


# --- LangGraph's conformance suite ------------------------------------------------------------


@pytest.mark.parametrize("store", ["in_memory", "lmdb"])
def test_conformance_suite_passes_every_capability(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    opened: list[Membrane] = []

    @checkpointer_test(name=f"MembraneSaver ({store})")
    async def saver() -> AsyncIterator[MembraneSaver]:
        path = tmp_path / f"store-{len(opened)}"
        memory = (
            Membrane.in_memory(embedder=None)
            if store == "in_memory"
            else Membrane.open(path, embedder=None)
        )
        opened.append(memory)
        yield MembraneSaver(memory)
        memory.close()

    report = asyncio.run(validate(saver))
    with capsys.disabled():  # the report belongs in the test log, passing or not
        report.print_report()
    assert report.passed_all_base()
    assert report.passed_all()
    for capability in ALL_CAPABILITIES:
        result = report.results[capability.value]
        assert result.detected and result.passed, (capability.value, result.failures)
        assert result.tests_skipped == 0 and result.tests_passed > 0, capability.value


# --- a graph on it ----------------------------------------------------------------------------


class Tally(TypedDict):
    seen: Annotated[list[str], operator.add]


def _graph(saver: MembraneSaver) -> Any:
    def note(state: Tally) -> dict[str, list[str]]:
        return {"seen": [f"step {len(state['seen'])}"]}

    builder = StateGraph(Tally)
    builder.add_node("note", note)
    builder.add_edge(START, "note")
    return builder.compile(checkpointer=saver)


THREAD = {"configurable": {"thread_id": "chat-1"}}


def _story(saver: BaseCheckpointSaver[Any]) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
    """Two turns, a fork from the first, and the thread's history read back."""
    graph = _graph(saver)
    graph.invoke({"seen": ["hello"]}, THREAD)
    first = graph.get_state(THREAD)
    graph.invoke({"seen": ["again"]}, THREAD)
    assert graph.get_state(first.config).values["seen"] == ["hello", "step 1"]  # time travel
    graph.invoke({"seen": ["instead"]}, first.config)  # runs on from there: a fork
    return [(s.values, s.next) for s in graph.get_state_history(THREAD)]


def test_time_travel_and_forks_read_as_on_langgraphs_own_saver(memory: Membrane) -> None:
    ours = _story(MembraneSaver(memory))
    assert ours == _story(InMemorySaver())
    assert ours[0][0]["seen"] == ["hello", "step 1", "instead", "step 3"]
    # the branch left behind is still there, by its checkpoint id
    saver = MembraneSaver(memory)
    ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(THREAD)]
    assert ids == sorted(ids, reverse=True)
    values = [t.checkpoint["channel_values"].get("seen") for t in saver.list(THREAD)]
    assert ["hello", "step 1", "again", "step 3"] in values


def test_async_graph_runs_on_the_same_records(memory: Membrane) -> None:
    graph = _graph(MembraneSaver(memory))

    async def run() -> list[str]:
        await graph.ainvoke({"seen": ["a"]}, THREAD)
        await graph.ainvoke({"seen": ["b"]}, THREAD)
        return list((await graph.aget_state(THREAD)).values["seen"])

    assert asyncio.run(run()) == ["a", "step 1", "b", "step 3"]
    assert _graph(MembraneSaver(memory)).get_state(THREAD).values["seen"][-1] == "step 3"


def test_as_of_reads_the_thread_as_it_was_deletes_included(memory: Membrane) -> None:
    saver = MembraneSaver(memory)
    graph = _graph(saver)
    graph.invoke({"seen": ["one"]}, THREAD)
    after_first = datetime.now(UTC)
    graph.invoke({"seen": ["two"]}, THREAD)
    before_delete = datetime.now(UTC)
    saver.delete_thread("chat-1")

    assert saver.get_tuple(THREAD) is None and list(saver.list(THREAD)) == []
    then = saver.as_of(after_first).get_tuple(THREAD)
    assert then is not None and then.checkpoint["channel_values"]["seen"] == ["one", "step 1"]
    past = saver.as_of(before_delete)
    assert len(list(past.list(THREAD))) == 6
    assert _graph(past).get_state(THREAD).values["seen"][-1] == "step 3"
    with pytest.raises(ReadOnlyError):
        past.put(THREAD, empty_checkpoint(), {}, {})

    # the log keeps the whole story: each checkpoint's creation and its retraction
    record_id = memory.record_ids(
        trust=TrustContext(max_sensitivity="low"), include_retracted=True
    )[0]
    events = [entry.event for entry in memory.history(record_id)]
    assert events[0] == "Created" and events[-1] == "Retracted"


def test_a_thread_survives_a_restart(tmp_path: Path) -> None:
    with Membrane.open(tmp_path / "memory", embedder=None) as memory:
        _graph(MembraneSaver(memory)).invoke({"seen": ["before"]}, THREAD)
    with Membrane.open(tmp_path / "memory", embedder=None) as memory:
        graph = _graph(MembraneSaver(memory))
        assert graph.get_state(THREAD).values["seen"] == ["before", "step 1"]
        graph.invoke({"seen": ["after"]}, THREAD)
        assert graph.get_state(THREAD).values["seen"] == ["before", "step 1", "after", "step 3"]
        assert memory.verify().ok


def test_pending_writes_survive_an_interrupted_step(memory: Membrane) -> None:
    saver = MembraneSaver(memory)
    stored = saver.put(generate_config("t"), generate_checkpoint(), {"step": 0}, {})
    saver.put_writes(stored, [("seen", ["x"]), ("other", 1)], "task-1", "path")
    saver.put_writes(stored, [("seen", ["x"])], "task-1", "path")  # a retry: no duplicate
    tuple_ = saver.get_tuple(stored)
    assert tuple_ is not None
    assert tuple_.pending_writes == [("task-1", "seen", ["x"]), ("task-1", "other", 1)]


def test_two_savers_on_one_store_see_each_others_checkpoints(memory: Membrane) -> None:
    first, second = MembraneSaver(memory), MembraneSaver(memory)
    graph_one, graph_two = _graph(first), _graph(second)
    graph_one.invoke({"seen": ["a"]}, THREAD)
    graph_two.invoke({"seen": ["b"]}, THREAD)  # reads what the first wrote
    graph_one.invoke({"seen": ["c"]}, THREAD)  # and the first what the second wrote
    expected = ["a", "step 1", "b", "step 3", "c", "step 5"]
    assert graph_two.get_state(THREAD).values["seen"] == expected
    assert [t.checkpoint["id"] for t in first.list(THREAD)] == [
        t.checkpoint["id"] for t in second.list(THREAD)
    ]


def test_what_a_saver_keeps_goes_when_another_saver_or_an_erasure_touches_it(
    memory: Membrane,
) -> None:
    first, second = MembraneSaver(memory), MembraneSaver(memory)
    config = generate_config("kept")
    stored = first.put(config, generate_checkpoint(), {"step": 0}, {})
    again = first.put(stored, generate_checkpoint(), {"step": 1}, {})
    assert first.get_tuple(again) is not None  # read, and kept
    calls = 0
    retrieve_by_id = memory.retrieve_by_id

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return retrieve_by_id(*args, **kwargs)

    memory.retrieve_by_id = counted  # type: ignore[method-assign]
    try:
        assert first.get_tuple(again) is not None
        first.put(again, generate_checkpoint(), {"step": 2}, {})  # its parent: kept
    finally:
        del memory.retrieve_by_id
    assert calls == 0
    second.put(again, {**generate_checkpoint(), "id": again["configurable"]["checkpoint_id"]},
               {"step": "stored again"}, {})  # fmt: skip
    found = first.get_tuple(again)
    assert found is not None and found.metadata["step"] == "stored again"
    second.delete_thread("kept")
    assert first.get_tuple(again) is None and list(first.list(config)) == []
    third = first.put(config, generate_checkpoint(), {"step": 2}, {})
    assert first.get_tuple(third) is not None
    record_id = first._thread("kept").checkpoints[""][third["configurable"]["checkpoint_id"]]
    memory.forget(record_id, "langgraph", "erased")
    assert first.get_tuple(third) is None


def test_a_checkpoint_stored_again_after_its_thread_was_deleted_is_a_new_generation(
    memory: Membrane,
) -> None:
    saver = MembraneSaver(memory)
    checkpoint = generate_checkpoint()
    stored = saver.put(generate_config("again"), checkpoint, {"step": 0}, {})
    saver.delete_thread("again")
    assert saver.get_tuple(stored) is None
    # the listing shows no live record: the first generation is tried, exists (retracted),
    # and the saver looks the generations up instead
    saver.put(generate_config("again"), checkpoint, {"step": "back"}, {})
    found = saver.get_tuple(stored)
    assert found is not None and found.metadata["step"] == "back"
    assert len(list(saver.list(generate_config("again")))) == 1


def test_tasks_saving_their_writes_at_once_lose_none(memory: Membrane) -> None:
    saver = MembraneSaver(memory)
    stored = saver.put(generate_config("t"), generate_checkpoint(), {"step": 0}, {})
    tasks = [f"task-{n}" for n in range(8)]
    with ThreadPoolExecutor(max_workers=4) as pool:  # as LangGraph's parallel tasks do
        list(pool.map(lambda task: saver.put_writes(stored, [("seen", [task])], task), tasks))
    found = saver.get_tuple(stored)
    assert found is not None
    assert sorted(write[0] for write in found.pending_writes or []) == tasks


# --- trust ------------------------------------------------------------------------------------


def test_a_reader_below_the_sensitivity_sees_nothing(memory: Membrane) -> None:
    writer = MembraneSaver(memory, sensitivity="high", trust=TrustContext(max_sensitivity="high"))
    _graph(writer).invoke({"seen": ["secret"]}, THREAD)
    reader = MembraneSaver(memory, trust=TrustContext(max_sensitivity="medium"))
    assert reader.get_tuple(THREAD) is None
    assert list(reader.list(None)) == []
    assert writer.get_tuple(THREAD) is not None


def test_a_thread_outside_the_trusts_scopes_does_not_exist(memory: Membrane) -> None:
    _graph(MembraneSaver(memory)).invoke({"seen": ["mine"]}, THREAD)
    other = MembraneSaver(memory, trust=TrustContext(scopes=["langgraph:chat-2"]))
    assert other.get_tuple(THREAD) is None
    assert list(other.list(None)) == []
    position = memory.position
    with pytest.raises(AccessDeniedError):
        other.put(THREAD, empty_checkpoint(), {}, {})
    assert memory.position == position


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda s: s.put({"configurable": {}}, empty_checkpoint(), {}, {}), "thread_id"),
        (lambda s: s.put({}, empty_checkpoint(), {}, {}), "config"),
        (lambda s: s.put(THREAD, {"id": ""}, {}, {}), "checkpoint.id"),
        (lambda s: s.put(THREAD, empty_checkpoint(), "meta", {}), "metadata"),
        (lambda s: s.put_writes(THREAD, [("ch", 1)], "task"), "checkpoint_id"),
        (lambda s: s.put_writes(_at("c1"), [("ch",)], "task"), "writes[0]"),
        (lambda s: s.put_writes(_at("c1"), [("ch", 1)], ""), "task_id"),
        (lambda s: s.prune(["chat-1"], strategy="all"), "strategy"),
        (lambda s: s.delete_for_runs("run-1"), "run_ids"),
        (lambda s: list(s.list(THREAD, limit="2")), "limit"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(
    memory: Membrane, call: Any, field: str
) -> None:
    saver = MembraneSaver(memory)
    saver.put(THREAD, {**empty_checkpoint(), "id": "c1"}, {}, {})
    position = memory.position
    with pytest.raises(ValidationError) as raised:
        call(saver)
    assert field in raised.value.field
    assert memory.position == position


def test_a_saver_that_could_not_read_back_its_writes_is_refused(memory: Membrane) -> None:
    with pytest.raises(ValidationError, match="sensitivity"):
        MembraneSaver(memory, sensitivity="high", trust=TrustContext(max_sensitivity="low"))
    with pytest.raises(ValidationError, match="sensitivity"):
        MembraneSaver(memory, sensitivity="secret")


def _at(checkpoint_id: str) -> dict[str, Any]:
    return generate_config("chat-1", checkpoint_id=checkpoint_id)


def test_a_copy_of_a_pruned_thread_keeps_the_values_it_pointed_at(memory: Membrane) -> None:
    saver = MembraneSaver(memory)
    first = saver.put(
        generate_config("chat-1"),
        generate_checkpoint(channel_values={"a": 1, "b": 2}, channel_versions={"a": 1, "b": 1}),
        {"step": 0},
        {"a": 1, "b": 1},
    )
    latest = saver.put(  # only "a" is new: "b" stays in the first checkpoint's record
        first,
        generate_checkpoint(channel_values={"a": 3, "b": 2}, channel_versions={"a": 2, "b": 1}),
        {"step": 1},
        {"a": 2},
    )
    saver.prune(["chat-1"])  # retracts the first checkpoint
    saver.copy_thread("chat-1", "chat-2")
    saver.delete_thread("chat-1")
    copied = saver.get_tuple(generate_config("chat-2"))
    assert copied is not None and copied.checkpoint["channel_values"] == {"a": 3, "b": 2}
    assert copied.checkpoint["id"] == latest["configurable"]["checkpoint_id"]

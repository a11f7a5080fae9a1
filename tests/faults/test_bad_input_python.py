"""Bad input on every public entry point of the Python API, property-based: each failure is a
:class:`~membrane_es.errors.MembraneError` (a ``ValidationError`` naming the field for input
the engine cannot take), never a TypeError/KeyError/OverflowError/UnicodeEncodeError
traceback, and a call that fails writes nothing."""

from __future__ import annotations

import copy
import io
import math
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es import Membrane, MembraneError, Sensitivity, TrustContext, ValidationError
from membrane_es.queries.entries import EntryQuery
from membrane_es.schema.entries import EntryPatch, NewEntry
from tests.faults import input_classes as classes

FULL = TrustContext(max_sensitivity=Sensitivity.HYPER)
_WEST = timezone(-timedelta(hours=23, minutes=59))
_EAST = timezone(timedelta(hours=14))

# Values of the wrong type, out of range or unstorable: what a careless caller passes.
_SURROGATE_TEXT = st.text(
    alphabet=st.one_of(st.characters(categories=["Cs"]), st.characters(codec="utf-8")),
    min_size=1,
    max_size=8,
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**64, -(2**63) - 1, 2**70, -(2**70)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    _SURROGATE_TEXT,
    st.binary(max_size=8),
    st.sampled_from([object(), 1j, {1, 2}, datetime(2020, 1, 1), b"\xff"]),
)
BAD = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=3),
    ),
    max_leaves=6,
)


def _record(**overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": "semantic",
        "sensitivity": "low",
        "scope": "s",
        "tags": ["t"],
        "confidence": 0.9,
        "salience": 1.0,
        "payload": {"kind": "semantic", "subject": "a", "predicate": "b", "object": "c"},
        "provenance": {"sources": [{"kind": "observation", "ref": "r"}]},
        "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": 3600}},
    }
    record.update(overrides)
    return record


# Where a bad value goes inside a record: a dotted path into the dict above.
RECORD_PATHS = [
    "type",
    "sensitivity",
    "scope",
    "tags",
    "confidence",
    "salience",
    "id",
    "payload",
    "payload.subject",
    "payload.predicate",
    "payload.object",
    "payload.validity",
    "provenance",
    "provenance.sources",
    "lifecycle",
    "lifecycle.decay.half_life_seconds",
    "lifecycle.decay.reinforcement_gain",
    "relations",
]


def _entry(**overrides: Any) -> NewEntry:
    fields: dict[str, Any] = {"type": "user", "title": "t", "content": "c", "tags": ["x"]}
    fields.update(overrides)
    return NewEntry(**fields)


def _with(record: dict[str, Any], path: str, bad: Any) -> dict[str, Any]:
    record = copy.deepcopy(record)
    *parents, leaf = path.split(".")
    holder = record
    for name in parents:
        holder = holder[name]
    holder[leaf] = bad
    return record


class Store:
    """One store per module, with records each operation can name."""

    def __init__(self) -> None:
        self.memory = Membrane.in_memory()
        self._files = tempfile.TemporaryDirectory()
        # An export of a one-record store: importing it into this (non-empty) one fails.
        self.export = f"{self._files.name}/log.jsonl"
        with Membrane.in_memory() as other, open(self.export, "wb") as out:
            other.create_record(_record())
            other.export_log(out)
        self.refresh()
        self.refresh_entries()

    def refresh(self) -> None:
        m = self.memory
        self.a = m.create_record(_record(), actor="t", rationale="r").id
        self.b = m.create_record(_record(), actor="t", rationale="r").id
        self.episode = m.ingest_event("deploy", "ref-1").id

    def refresh_entries(self) -> None:
        """Two active, unrelated entries (each written record embeds its text: done only
        when a call may have used them up)."""
        self.entry = self.memory.create_entry(_entry()).id
        self.other_entry = self.memory.create_entry(_entry()).id

    def close(self) -> None:
        self.memory.close()
        self._files.cleanup()

    def events(self) -> int:
        return self.memory.application.recorder.max_notification_id() or 0


@pytest.fixture(scope="module")
def store() -> Iterator[Store]:
    s = Store()
    yield s
    s.close()


Call = Callable[[Store, dict[str, Any]], Any]

# Every public entry point, with arguments that work; one argument at a time is made bad.
ENTRY_POINTS: dict[str, tuple[Call, Callable[[Store], dict[str, Any]]]] = {
    "create_record": (
        lambda s, a: s.memory.create_record(
            a["record"], actor=a["actor"], rationale=a["rationale"], embedding=a["embedding"]
        ),
        lambda s: {"record": _record(), "actor": "t", "rationale": "r", "embedding": None},
    ),
    "supersede": (
        lambda s, a: s.memory.supersede(a["old_id"], a["new_record"], a["actor"], a["rationale"]),
        lambda s: {"old_id": s.a, "new_record": _record(), "actor": "t", "rationale": "r"},
    ),
    "fork": (
        lambda s, a: s.memory.fork(a["source_id"], a["forked_record"], a["actor"], a["rationale"]),
        lambda s: {"source_id": s.a, "forked_record": _record(), "actor": "t", "rationale": "r"},
    ),
    "merge": (
        lambda s, a: s.memory.merge(
            a["record_ids"], a["merged_record"], a["actor"], a["rationale"]
        ),
        lambda s: {
            "record_ids": [s.a, s.b],
            "merged_record": _record(),
            "actor": "t",
            "rationale": "r",
        },
    ),
    "retract": (
        lambda s, a: s.memory.retract(a["record_id"], a["actor"], a["rationale"]),
        lambda s: {"record_id": s.a, "actor": "t", "rationale": "r"},
    ),
    "contest": (
        lambda s, a: s.memory.contest(
            a["record_id"], a["contesting_ref"], a["actor"], a["rationale"]
        ),
        lambda s: {"record_id": s.a, "contesting_ref": s.b, "actor": "t", "rationale": "r"},
    ),
    "reinforce": (
        lambda s, a: s.memory.reinforce(a["record_id"], a["actor"], a["rationale"]),
        lambda s: {"record_id": s.a, "actor": "t", "rationale": "r"},
    ),
    "penalize": (
        lambda s, a: s.memory.penalize(a["record_id"], a["amount"], a["actor"], a["rationale"]),
        lambda s: {"record_id": s.a, "amount": 0.1, "actor": "t", "rationale": "r"},
    ),
    "add_relation": (
        lambda s, a: s.memory.add_relation(
            a["source_id"],
            a["predicate"],
            a["target_id"],
            weight=a["weight"],
            inverse=a["inverse"],
            actor=a["actor"],
            rationale=a["rationale"],
        ),
        lambda s: {
            "source_id": s.a,
            "predicate": "p",
            "target_id": s.b,
            "weight": 0.5,
            "inverse": "",
            "actor": "t",
            "rationale": "r",
        },
    ),
    "record_outcome": (
        lambda s, a: s.memory.record_outcome(
            a["record_id"], a["status"], actor=a["actor"], rationale=a["rationale"]
        ),
        lambda s: {"record_id": s.episode, "status": "success", "actor": "t", "rationale": "r"},
    ),
    "pin": (
        lambda s, a: s.memory.pin(a["record_id"], actor=a["actor"], rationale=a["rationale"]),
        lambda s: {"record_id": s.a, "actor": "t", "rationale": "r"},
    ),
    "unpin": (
        lambda s, a: s.memory.unpin(a["record_id"], actor=a["actor"], rationale=a["rationale"]),
        lambda s: {"record_id": s.a, "actor": "t", "rationale": "r"},
    ),
    "capture_memory": (
        lambda s, a: s.memory.capture_memory(
            a["content"],
            source_kind=a["source_kind"],
            context=a["context"],
            reason_to_remember=a["reason_to_remember"],
            proposed_type=a["proposed_type"],
            summary=a["summary"],
            sensitivity=a["sensitivity"],
            source=a["source"],
            tags=a["tags"],
            scope=a["scope"],
            timestamp=a["timestamp"],
            decay=a["decay"],
            pinned=a["pinned"],
        ),
        lambda s: {
            "decay": {"curve": "exponential", "half_life_seconds": 60},
            "pinned": False,
            "content": {"subject": "x", "predicate": "y", "object": "z"},
            "source_kind": "observation",
            "context": None,
            "reason_to_remember": "",
            "proposed_type": None,
            "summary": "",
            "sensitivity": "low",
            "source": "c",
            "tags": None,
            "scope": "",
            "timestamp": None,
        },
    ),
    # A conversation turn: capture looks for the turns it was said after, in its sitting.
    "capture_turn": (
        lambda s, a: s.memory.capture_memory(
            a["content"], source=a["source"], scope=a["scope"], timestamp=a["timestamp"]
        ),
        lambda s: {
            "content": {"speaker": "Ann", "text": "hello"},
            "source": "c",
            "scope": "",
            "timestamp": None,
        },
    ),
    "ingest_event": (
        lambda s, a: s.memory.ingest_event(
            a["event_kind"],
            a["ref"],
            summary=a["summary"],
            sensitivity=a["sensitivity"],
            source=a["source"],
            tags=a["tags"],
            scope=a["scope"],
            timestamp=a["timestamp"],
        ),
        lambda s: {
            "event_kind": "k",
            "ref": "r",
            "summary": "",
            "sensitivity": None,
            "source": "c",
            "tags": None,
            "scope": "",
            "timestamp": None,
        },
    ),
    "ingest_tool_output": (
        lambda s, a: s.memory.ingest_tool_output(
            a["tool_name"],
            args=a["args"],
            result=a["result"],
            sensitivity=a["sensitivity"],
            source=a["source"],
            depends_on=a["depends_on"],
            tags=a["tags"],
            scope=a["scope"],
            timestamp=a["timestamp"],
        ),
        lambda s: {
            "tool_name": "t",
            "args": {"a": 1},
            "result": [1],
            "sensitivity": None,
            "source": "c",
            "depends_on": None,
            "tags": None,
            "scope": "",
            "timestamp": None,
        },
    ),
    "ingest_observation": (
        lambda s, a: s.memory.ingest_observation(
            a["subject"],
            a["predicate"],
            a["obj"],
            sensitivity=a["sensitivity"],
            source=a["source"],
            tags=a["tags"],
            scope=a["scope"],
            timestamp=a["timestamp"],
        ),
        lambda s: {
            "subject": "x",
            "predicate": "y",
            "obj": "z",
            "sensitivity": None,
            "source": "c",
            "tags": None,
            "scope": "",
            "timestamp": None,
        },
    ),
    "ingest_outcome": (
        lambda s, a: s.memory.ingest_outcome(
            a["target_record_id"], a["outcome_status"], source=a["source"], timestamp=a["timestamp"]
        ),
        lambda s: {
            "target_record_id": s.episode,
            "outcome_status": "success",
            "source": "c",
            "timestamp": None,
        },
    ),
    "ingest_working_state": (
        lambda s, a: s.memory.ingest_working_state(
            a["thread_id"],
            a["state"],
            next_actions=a["next_actions"],
            open_questions=a["open_questions"],
            context_summary=a["context_summary"],
            active_constraints=a["active_constraints"],
            sensitivity=a["sensitivity"],
            source=a["source"],
            tags=a["tags"],
            scope=a["scope"],
            timestamp=a["timestamp"],
        ),
        lambda s: {
            "thread_id": "th",
            "state": "planning",
            "next_actions": None,
            "open_questions": None,
            "context_summary": "",
            "active_constraints": None,
            "sensitivity": None,
            "source": "c",
            "tags": None,
            "scope": "",
            "timestamp": None,
        },
    ),
    "retrieve_by_id": (
        lambda s, a: s.memory.retrieve_by_id(a["record_id"], trust=a["trust"], as_of=a["as_of"]),
        lambda s: {"record_id": s.a, "trust": FULL, "as_of": None},
    ),
    "history": (
        lambda s, a: s.memory.history(a["record_id"], trust=a["trust"]),
        lambda s: {"record_id": s.a, "trust": FULL},
    ),
    "retrieve": (
        lambda s, a: s.memory.retrieve(
            a["task_descriptor"],
            trust=a["trust"],
            memory_types=a["memory_types"],
            min_salience=a["min_salience"],
            limit=a["limit"],
            as_of=a["as_of"],
            valid_at=a["valid_at"],
            include_retracted=a["include_retracted"],
            query_embedding=a["query_embedding"],
        ),
        lambda s: {
            "task_descriptor": "a b today",  # a period counted from the moment read for
            "trust": FULL,
            "memory_types": None,
            "min_salience": 0.0,
            "limit": 5,
            "as_of": None,
            "valid_at": None,
            "include_retracted": False,
            "query_embedding": None,
        },
    ),
    "retrieve_graph": (
        lambda s, a: s.memory.retrieve_graph(
            a["task_descriptor"],
            trust=a["trust"],
            memory_types=a["memory_types"],
            min_salience=a["min_salience"],
            root_limit=a["root_limit"],
            node_limit=a["node_limit"],
            edge_limit=a["edge_limit"],
            max_hops=a["max_hops"],
            as_of=a["as_of"],
            valid_at=a["valid_at"],
            query_embedding=a["query_embedding"],
        ),
        lambda s: {
            "task_descriptor": "a in the past few days",
            "trust": FULL,
            "memory_types": None,
            "min_salience": 0.0,
            "root_limit": 3,
            "node_limit": 5,
            "edge_limit": 5,
            "max_hops": 1,
            "as_of": None,
            "valid_at": None,
            "query_embedding": None,
        },
    ),
    "get_metrics": (
        lambda s, a: s.memory.get_metrics(as_of=a["as_of"]),
        lambda s: {"as_of": None},
    ),
    "consolidate": (
        lambda s, a: s.memory.consolidate(now=a["now"], extractor=a["extractor"]),
        lambda s: {"now": None, "extractor": None},
    ),
    "forget": (
        lambda s, a: s.memory.forget(a["record_id"], a["actor"], a["rationale"]),
        lambda s: {"record_id": s.a, "actor": "t", "rationale": "r"},
    ),
    "export_log": (
        lambda s, a: s.memory.export_log(a["out"], a["progress"]),
        lambda s: {"out": io.BytesIO(), "progress": None},
    ),
    "import_log": (
        lambda s, a: s.memory.import_log(a["path"], a["progress"]),
        lambda s: {"path": s.export, "progress": None},
    ),
    # The entries API.
    "create_entry": (
        lambda s, a: s.memory.create_entry(
            a["entry"], actor=a["actor"], trust=a["trust"], tenant=a["tenant"]
        ),
        lambda s: {"entry": _entry(), "actor": "t", "trust": None, "tenant": 0},
    ),
    "get_entry": (
        lambda s, a: s.memory.get_entry(a["entry_id"], trust=a["trust"], tenant=a["tenant"]),
        lambda s: {"entry_id": s.entry, "trust": FULL, "tenant": 0},
    ),
    "list_entries": (
        lambda s, a: s.memory.list_entries(
            a["query"], trust=a["trust"], tenant=a["tenant"], advisor=a["advisor"]
        ),
        lambda s: {"query": EntryQuery(q="t"), "trust": FULL, "tenant": "acme", "advisor": None},
    ),
    "entry_relations": (
        lambda s, a: s.memory.entry_relations(
            trust=a["trust"],
            tenant=a["tenant"],
            source_id=a["source_id"],
            target_id=a["target_id"],
            relation=a["relation"],
            among=a["among"],
            limit=a["limit"],
        ),
        lambda s: {
            "trust": FULL,
            "tenant": 0,
            "source_id": s.entry,
            "target_id": None,
            "relation": "",
            "among": None,
            "limit": 10,
        },
    ),
    "revise_entry": (
        lambda s, a: s.memory.revise_entry(
            a["entry_id"], a["patch"], actor=a["actor"], trust=a["trust"], tenant=a["tenant"]
        ),
        lambda s: {
            "entry_id": s.entry,
            "patch": EntryPatch(content="revised"),
            "actor": "t",
            "trust": None,
            "tenant": 0,
        },
    ),
    "invalidate_entry": (
        lambda s, a: s.memory.invalidate_entry(
            a["entry_id"], when=a["when"], actor=a["actor"], trust=a["trust"]
        ),
        lambda s: {"entry_id": s.entry, "when": None, "actor": "t", "trust": None},
    ),
    "delete_entry": (
        lambda s, a: s.memory.delete_entry(
            a["entry_id"], erase=a["erase"], actor=a["actor"], trust=a["trust"]
        ),
        lambda s: {"entry_id": s.entry, "erase": False, "actor": "t", "trust": None},
    ),
    "relate_entries": (
        lambda s, a: s.memory.relate_entries(
            a["source_id"],
            a["target_id"],
            a["relation"],
            actor=a["actor"],
            trust=a["trust"],
            tenant=a["tenant"],
        ),
        lambda s: {
            "source_id": s.entry,
            "target_id": s.other_entry,
            "relation": "refines",
            "actor": "t",
            "trust": None,
            "tenant": 0,
        },
    ),
}

# The calls after which the store's two entries may be inactive or already related.
USING_UP_ENTRIES = {"invalidate_entry", "delete_entry", "relate_entries"}

FORBIDDEN = (
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    OverflowError,
    UnicodeError,
    AssertionError,
    RecursionError,
)


def _check(store: Store, name: str, args: dict[str, Any]) -> Any:
    """Call an entry point; return what it returned (None when it refused the input)."""
    call, _ = ENTRY_POINTS[name]
    before = store.events()
    try:
        return call(store, args)
    except MembraneError as error:
        assert store.events() == before, f"{name} failed ({error}) but wrote events"
        if isinstance(error, ValidationError):
            assert error.field, error
    except FORBIDDEN as error:  # pragma: no cover - the failure being tested for
        raise AssertionError(f"{name}({args!r}) raised {type(error).__name__}: {error}") from error
    return None


@settings(
    max_examples=800,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_one_bad_argument(store: Store, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(ENTRY_POINTS)), label="entry point")
    args = ENTRY_POINTS[name][1](store)
    param = data.draw(st.sampled_from(sorted(args)), label="parameter")
    args[param] = data.draw(BAD, label="value")
    _check(store, name, args)
    store.refresh()
    if name in USING_UP_ENTRIES:
        store.refresh_entries()


RECORD_TAKERS = {
    "create_record": "record",
    "supersede": "new_record",
    "fork": "forked_record",
    "merge": "merged_record",
}


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_one_bad_record_field(store: Store, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(RECORD_TAKERS)), label="entry point")
    args = ENTRY_POINTS[name][1](store)
    path = data.draw(st.sampled_from(RECORD_PATHS), label="field")
    args[RECORD_TAKERS[name]] = _with(_record(), path, data.draw(BAD, label="value"))
    _check(store, name, args)
    store.refresh()


# Each class of input that once escaped as the wrong error, generated on purpose on every
# argument it can reach (see tests/faults/input_classes.py).
MOMENT_PARAMS = {"as_of", "valid_at", "timestamp", "now", "when"}
LEVEL_PARAMS = {"sensitivity", "trust", "default_sensitivity"}


def _class_value(data: st.DataObject, kind: str, param: str) -> Any:
    if kind == "surrogate":
        return data.draw(classes.SURROGATE_VALUES, label="value")
    if kind == "moment":
        text = data.draw(st.booleans(), label="as text")
        return data.draw(classes.MOMENT_TEXT if text else classes.MOMENT_OBJECTS, label="value")
    level = data.draw(classes.LEVELS, label="level")
    # a level of any type, as a caller might pass one
    return TrustContext(max_sensitivity=level) if param == "trust" else level  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", classes.CLASSES)
@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_each_input_class_on_every_argument_it_reaches(
    store: Store, kind: str, data: st.DataObject
) -> None:
    wanted = {"moment": MOMENT_PARAMS, "ceiling": LEVEL_PARAMS}.get(kind)
    names = sorted(
        name
        for name, (_, arguments) in ENTRY_POINTS.items()
        if wanted is None or wanted & set(arguments(store))
    )
    name = data.draw(st.sampled_from(names), label="entry point")
    args = ENTRY_POINTS[name][1](store)
    if kind == "surrogate" and name in RECORD_TAKERS and data.draw(st.booleans(), label="field"):
        path = data.draw(st.sampled_from(RECORD_PATHS), label="record field")
        args[RECORD_TAKERS[name]] = _with(_record(), path, _class_value(data, kind, path))
    else:
        params = sorted(set(args) if wanted is None else wanted & set(args))
        param = data.draw(st.sampled_from(params), label="parameter")
        args[param] = _class_value(data, kind, param)
    _check(store, name, args)
    store.refresh()
    if name in USING_UP_ENTRIES:
        store.refresh_entries()


ENTRY_FIELDS = sorted(NewEntry.__struct_fields__)
PATCH_FIELDS = sorted(EntryPatch.__struct_fields__)
QUERY_FIELDS = sorted(EntryQuery.__struct_fields__)


def _as_stored(field: str, value: Any) -> Any:
    """What an entry field given as ``value`` reads back as (0 ids are "none"; tags are
    distinct, in order; a backfilled ``created_at`` may be in milliseconds)."""
    if field == "created_at":
        return value // 1000 if value > 10**12 else value
    if field in ("conversation_id", "artifact_id"):
        return value or None
    if field == "tags":
        return list(dict.fromkeys(value))
    return value


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_one_bad_entry_field(store: Store, data: st.DataObject) -> None:
    """A struct built in Python is not checked by its constructor: the engine checks it. A
    value it takes reads back as given, never silently altered."""
    shape = data.draw(st.sampled_from(["entry", "patch", "query"]), label="struct")
    bad = data.draw(BAD, label="value")
    if shape == "query":
        field = data.draw(st.sampled_from(QUERY_FIELDS), label="field")
        args = ENTRY_POINTS["list_entries"][1](store)
        args["query"] = msgspec.structs.replace(args["query"], **{field: bad})
        _check(store, "list_entries", args)
        return
    name, fields = (
        ("create_entry", ENTRY_FIELDS) if shape == "entry" else ("revise_entry", PATCH_FIELDS)
    )
    field = data.draw(st.sampled_from(fields), label="field")
    args = ENTRY_POINTS[name][1](store)
    given = args["entry" if shape == "entry" else "patch"]
    given = msgspec.structs.replace(given, **{field: bad})
    args["entry" if shape == "entry" else "patch"] = given
    written = _check(store, name, args)
    if field == "created_at" and bad is None:
        return  # absent: the time of writing (an entry) or unchanged (a patch)
    if written is not None and field in msgspec.structs.asdict(written):
        assert getattr(written, field) == _as_stored(field, bad), (field, bad)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m, a: m.retrieve_by_id("\ud800", trust=FULL), "id"),
        (lambda m, a: m.create_record(_record(), actor="\ud800", rationale="r"), "actor"),
        (lambda m, a: m.reinforce(a, "t", "\udc00"), "rationale"),
        (
            lambda m, a: m.create_record(
                _record(
                    payload={
                        "kind": "semantic",
                        "subject": "\ud800",
                        "predicate": "b",
                        "object": "c",
                    }
                )
            ),
            "record.payload.subject",
        ),
        (
            lambda m, a: m.create_record(
                _record(
                    payload={"kind": "semantic", "subject": "a", "predicate": "b", "object": 2**70}
                )
            ),
            "record.payload.object",
        ),
        (
            lambda m, a: m.create_record(
                _record(lifecycle={"decay": {"curve": "exponential", "half_life_seconds": 2**70}})
            ),
            "record.lifecycle.decay.half_life_seconds",
        ),
        (lambda m, a: m.capture_memory({"n": 2**70}), "content.n"),
        # A lone surrogate where another type belongs, on every call that takes a record.
        (lambda m, a: m.create_record(_record(confidence="\ud800")), "record.confidence"),
        (lambda m, a: m.create_record(_record(salience="\ud800")), "record.salience"),
        (
            lambda m, a: m.create_record(_record(provenance={"sources": "\ud800"})),
            "record.provenance.sources",
        ),
        (
            lambda m, a: m.supersede(a, _record(confidence="\udc00"), "t", "r"),
            "new_record.confidence",
        ),
        (lambda m, a: m.fork(a, _record(salience=["\ud800"]), "t", "r"), "forked_record.salience"),
        (
            lambda m, a: m.merge([a], _record(provenance={"sources": ["\ud800"]}), "t", "r"),
            "merged_record.provenance.sources[0]",
        ),
        # Moments that leave the calendar once in UTC.
        (
            lambda m, a: m.retrieve_by_id(
                a, trust=FULL, as_of=datetime(9999, 12, 31, 23, 59, tzinfo=_WEST)
            ),
            "as_of",
        ),
        (
            lambda m, a: m.retrieve("x", trust=FULL, as_of=datetime(1, 1, 1, tzinfo=_EAST)),
            "as_of",
        ),
        (lambda m, a: m.capture_memory("x", timestamp="0001-01-01T00:00:00+14:00"), "timestamp"),
        (lambda m, a: m.capture_memory("x", decay="\ud800"), "decay"),
        (lambda m, a: m.capture_memory("x", decay={"curve": "\udc00"}), "decay.curve"),
        (lambda m, a: m.create_record(_record(tags=5)), "record.tags"),
        (lambda m, a: m.merge(5, _record(), "t", "r"), "ids"),
        (
            lambda m, a: m.create_record(
                {
                    "type": "entity",
                    "payload": {"kind": "entity", "canonical_name": "x", "aliases": 5},
                }
            ),
            "record.payload.aliases",
        ),
        (
            lambda m, a: m.create_record(
                _record(
                    payload={
                        "kind": "semantic",
                        "subject": "a",
                        "predicate": "b",
                        "object": object(),
                    }
                )
            ),
            "record.payload.object",
        ),
        (
            lambda m, a: m.create_record(
                _record(
                    payload={
                        "kind": "semantic",
                        "subject": "a",
                        "predicate": "b",
                        "object": math.nan,
                    }
                )
            ),
            "record.payload.object",
        ),
        (lambda m, a: m.capture_memory({"n": math.nan}), "content.n"),
        (lambda m, a: m.capture_memory({"n": [1, math.inf]}), "content.n[1]"),
        # The entries API, and export and import.
        (lambda m, a: m.get_entry(2**70), "entry_id"),
        (lambda m, a: m.revise_entry(2**70, EntryPatch(content="x")), "entry_id"),
        (lambda m, a: m.delete_entry(2**70), "entry_id"),
        (lambda m, a: m.relate_entries(1, 2**70, "refines"), "target_id"),
        (lambda m, a: m.entry_relations(limit=2**70), "limit"),
        (lambda m, a: m.list_entries(EntryQuery(limit=2**70)), "query.limit"),
        (lambda m, a: m.list_entries(5), "query"),
        (lambda m, a: m.create_entry(_entry(tags=5)), "entry.tags"),
        (lambda m, a: m.create_entry({"type": "user", "title": "t"}), "entry"),
        (lambda m, a: m.create_entry(_entry(type="bogus")), "entry.type"),
        (lambda m, a: m.create_entry(_entry(content=5)), "entry.content"),
        (lambda m, a: m.create_entry(_entry(conversation_id=2**70)), "entry.conversation_id"),
        (lambda m, a: m.create_entry(_entry(title="\ud800")), "entry.title"),
        (lambda m, a: m.revise_entry(1, EntryPatch(tags=[3])), "patch.tags[0]"),  # type: ignore[list-item]
        (lambda m, a: m.delete_entry(1, erase="maybe"), "erase"),
        (lambda m, a: m.relate_entries(1, 2, "bogus"), "relation"),
        (lambda m, a: m.export_log(5), "out"),
        (lambda m, a: m.import_log(5), "path"),
        (lambda m, a: m.create_entry(_entry(), writer=5), "writer"),
        (lambda m, a: m.revise_entry(1, EntryPatch(content="x"), writer="key"), "writer"),
    ],
)
def test_reported_bad_inputs_name_their_field(
    call: Callable[[Membrane, str], Any], field: str
) -> None:
    with Membrane.in_memory() as memory:
        record_id = memory.create_record(_record()).id
        before = memory.application.recorder.max_notification_id()
        with pytest.raises(ValidationError) as raised:
            call(memory, record_id)
        assert raised.value.field == field
        assert memory.application.recorder.max_notification_id() == before


# Opening a store: every argument of open / in_memory / verify_store made bad in turn.
OPENERS: dict[str, tuple[Callable[[Path, dict[str, Any]], Any], dict[str, Any]]] = {
    "open": (
        lambda d, a: Membrane.open(
            a["path"] if a["path"] != "<dir>" else d / "store",
            sync=a["sync"],
            env=a["env"],
            selection_threshold=a["selection_threshold"],
            default_sensitivity=a["default_sensitivity"],
            chain_key=a["chain_key"],
            read_only=a["read_only"],
            verify_on_open=a["verify_on_open"],
        ),
        {
            "path": "<dir>",
            "sync": True,
            "env": None,
            "selection_threshold": 0.7,
            "default_sensitivity": "low",
            "chain_key": None,
            "read_only": False,
            "verify_on_open": False,
        },
    ),
    "in_memory": (
        lambda d, a: Membrane.in_memory(
            env=a["env"],
            selection_threshold=a["selection_threshold"],
            default_sensitivity=a["default_sensitivity"],
        ),
        {"env": None, "selection_threshold": 0.7, "default_sensitivity": "low"},
    ),
    "verify_store": (
        lambda d, a: Membrane.verify_store(
            a["path"] if a["path"] != "<dir>" else d / "store", chain_key=a["chain_key"]
        ),
        {"path": "<dir>", "chain_key": None},
    ),
}


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_one_bad_argument_when_opening(tmp_path: Path, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(OPENERS)), label="opener")
    call, valid = OPENERS[name]
    args = dict(valid)
    param = data.draw(st.sampled_from(sorted(args)), label="parameter")
    args[param] = data.draw(BAD.filter(lambda v: not isinstance(v, str)), label="value")
    try:
        opened = call(tmp_path, args)
    except MembraneError as error:
        if isinstance(error, ValidationError):
            assert error.field, error
        return
    except FORBIDDEN as error:  # pragma: no cover - the failure being tested for
        raise AssertionError(f"{name}({args!r}) raised {type(error).__name__}: {error}") from error
    if isinstance(opened, Membrane):
        opened.close()


def test_a_bad_writer_is_refused_before_the_entry_is_looked_up() -> None:
    with Membrane.in_memory() as memory:
        memory.create_entry(_entry())
        count = memory.application.recorder.max_notification_id()
        calls: list[Callable[[], Any]] = [
            lambda: memory.revise_entry(10**6, EntryPatch(content="x"), writer=5),  # type: ignore[arg-type]
            lambda: memory.invalidate_entry(10**6, writer=5),  # type: ignore[arg-type]
            lambda: memory.delete_entry(10**6, writer=5),  # type: ignore[arg-type]
            lambda: memory.relate_entries(10**6, 10**6 + 1, "supports", writer=5),  # type: ignore[arg-type]
        ]
        for call in calls:
            with pytest.raises(ValidationError) as raised:
                call()
            assert raised.value.field == "writer"
        assert memory.application.recorder.max_notification_id() == count


@pytest.mark.parametrize("title", ["0\r", " spaced ", "line\n"])
def test_an_entry_title_reads_back_as_given(store: Store, title: str) -> None:
    revised = store.memory.revise_entry(
        store.entry, EntryPatch(content="c", title=title), actor="t"
    )
    assert revised.title == title


@pytest.mark.parametrize("shape", ["entry", "patch"])
def test_a_blank_title_is_refused_naming_it(store: Store, shape: str) -> None:
    with pytest.raises(ValidationError, match=rf"{shape}\.title"):
        if shape == "entry":
            store.memory.create_entry(NewEntry(type="project", title="\r", content="c"), actor="t")
        else:
            store.memory.revise_entry(store.entry, EntryPatch(title=" \t"), actor="t")

"""A creation's field changes, taken the short way, are the inspector's diff from nothing:
the same paths, kinds, texts and order, for any record (hypothesis) — keys that sort around
the path separators, ten or more items in a list, blank texts, shared scalar values."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from membrane_es import MemoryRecord
from membrane_es.engine import field_diff
from membrane_es.queries.created_fields import added_fields
from membrane_es.schema.changes import FieldChange

texts = st.sampled_from(["", " ", "a", "a.b", "a-b", "a[0]", "b", "A", "é", "x y", "-0.0"])
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from([0.0, -0.0, 1.0, 0.5, 1e-4]),
    texts,
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(texts, inner, max_size=5),
    max_leaves=30,
)


@st.composite
def records(draw: st.DrawFn) -> MemoryRecord:
    raw: dict[str, Any] = {
        "type": "semantic",
        "payload": {
            "kind": "semantic",
            "subject": draw(texts.filter(str.strip)),
            "predicate": "runs_on",
            "object": draw(values),
        },
        "scope": draw(st.sampled_from(["", "team-a", " "])),
        "tags": draw(st.lists(texts, max_size=12)),
        "confidence": draw(st.sampled_from([0.0, 0.25, 1.0])),
        "salience": draw(st.sampled_from([0.0, 0.3333, 1.0])),
        "lifecycle": {"pinned": draw(st.booleans())},
        "provenance": {
            "sources": draw(
                st.lists(
                    st.fixed_dictionaries({"kind": st.just("observation"), "ref": texts}),
                    max_size=11,
                )
            )
        },
    }
    if draw(st.booleans()):
        raw["lifecycle"]["last_reinforced_at"] = "2026-01-02T03:04:05.123456Z"
    if draw(st.booleans()):
        del raw["payload"]
        raw["type"] = "working"
    return msgspec.convert(raw, MemoryRecord)


def inspector(record: MemoryRecord) -> list[FieldChange]:
    return [
        FieldChange(path=c.path, kind=c.kind, before=c.before, after=c.after)
        for c in field_diff.changes({}, field_diff.record_fields(record))
    ]


@settings(max_examples=300, deadline=None)
@given(records())
def test_a_creations_fields_are_the_inspectors_diff_from_nothing(record: MemoryRecord) -> None:
    expected = inspector(record)
    assert added_fields(record) == expected
    assert added_fields(record) == expected  # again: shared scalar changes handed out


def test_shared_changes_are_the_changes_they_stand_for() -> None:
    record = msgspec.convert(
        {"type": "working", "scope": "team-a", "confidence": 1.0, "lifecycle": {"pinned": True}},
        MemoryRecord,
    )
    first, second = added_fields(record), added_fields(record)
    assert first == second == inspector(record)
    paths = [change.path for change in first]
    assert paths == sorted(paths)
    assert {"confidence", "pinned", "salience", "scope"} <= set(paths)

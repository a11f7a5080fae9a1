"""What changed between two versions of a record, field by field (the change feed's diff, and
the inspector's).

Both versions are flattened to ``path → value`` (``payload.revision.status``,
``tags[0]``); a path present in one only was added or removed, one present in both with
another value changed. Only what an event can change is compared (:data:`COMPARED`, and
whether it is pinned): the audit log and ``updated_at`` are the event itself. Floats are
compared to three decimals, so salience that merely decayed between two events is not
reported as a change of the record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from membrane_es.schema.records import MemoryRecord

# What a version holds that an event can change (the rest is shown once, above the timeline).
COMPARED = ("payload", "tags", "relations", "provenance", "scope", "confidence", "salience")
DIGITS = 3


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    before: str | None  # None: the field was added
    after: str | None  # None: the field was removed

    @property
    def kind(self) -> str:
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        return "changed"


def flatten(value: Any, path: str = "") -> dict[str, str]:
    """Every scalar under ``value`` by its path, as display text."""
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(value, list):
        out = {}
        for index, item in enumerate(value):
            out.update(flatten(item, f"{path}[{index}]"))
        return out
    if isinstance(value, float):
        return {path: f"{value:.{DIGITS}f}"}
    return {path: "null" if value is None else str(value)}


def record_fields(record: MemoryRecord) -> dict[str, str]:
    """The record's fields as the diff compares them."""
    raw = msgspec.to_builtins(record)
    fields = {name: raw[name] for name in COMPARED if name in raw}
    fields["pinned"] = record.lifecycle.pinned
    return flatten(fields)


def changes(before: dict[str, str], after: dict[str, str]) -> list[Change]:
    """The changes from one version's :func:`record_fields` to the next's (``before`` empty:
    all added)."""
    found = []
    for path in sorted(before.keys() | after.keys()):
        was, now = before.get(path), after.get(path)
        if was != now:
            found.append(Change(path, was, now))
    return found

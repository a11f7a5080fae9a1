"""What changed between two versions of a record, field by field.

Both versions are flattened to ``path → value`` (``payload.revision.status``,
``tags[0]``); a path present in one only was added or removed, one present in both with
another value changed. Only what an event can change is compared (:data:`COMPARED`,
whether it is pinned and when it was last reinforced): the audit log and ``updated_at`` are
the event itself. Floats are compared to three decimals, so salience that merely decayed
between two events is not reported as a change of the record; a reinforcement of a record
already at full salience still shows, as the moment it was reinforced.

Values are written as JSON writes them (``true``, ``null``, ``""``), never in Python's
spelling, so an empty text is seen as one.
"""

from __future__ import annotations

import json
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
    if isinstance(value, bool):
        return {path: "true" if value else "false"}
    if isinstance(value, float):
        return {path: f"{value:.{DIGITS}f}"}
    if value is None:
        return {path: "null"}
    if isinstance(value, str) and not value.strip():
        return {path: json.dumps(value)}  # "" (or blanks) seen as such, not as nothing
    return {path: str(value)}


def record_fields(record: MemoryRecord) -> dict[str, str]:
    """The record's fields as the diff compares them."""
    raw = msgspec.to_builtins(record)
    fields = {name: raw[name] for name in COMPARED if name in raw}
    fields["pinned"] = record.lifecycle.pinned
    fields["last_reinforced_at"] = raw["lifecycle"].get("last_reinforced_at")
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


# What a supersede replaces: the content. Relations, provenance and salience belong to each
# record's own story (its timeline shows them), and the revision links say which replaced which.
ACROSS = ("payload", "tags", "scope", "confidence", "sensitivity")


def across(old: MemoryRecord, new: MemoryRecord) -> list[Change]:
    """What a revision changed from one record to the one that replaced it: a supersede's
    old and new content in one diff (``staging`` → ``production``)."""

    def content(record: MemoryRecord) -> dict[str, str]:
        raw = msgspec.to_builtins(record)
        return flatten({name: raw[name] for name in ACROSS if name in raw})

    return [
        change
        for change in changes(content(old), content(new))
        if not change.path.startswith("payload.revision.")
    ]

"""What changed between two versions of a record, field by field (the change feed's diff, and
the inspector's).

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
_FLOAT = f"%.{DIGITS}f"
# Floats written so far, by value: a record's scores take few values (1.0 most of all), and
# writing one costs ten times a lookup. Zero is never kept (-0.0 equals 0.0 as a key but
# is written "-0.000"); the table is emptied when it fills.
_FLOAT_TEXTS: dict[float, str] = {}
_FLOAT_TEXTS_MAX = 4096


def _float_text(value: float) -> str:
    text = _FLOAT_TEXTS.get(value)
    if text is None:
        text = _FLOAT % value
        if value:
            if len(_FLOAT_TEXTS) >= _FLOAT_TEXTS_MAX:
                _FLOAT_TEXTS.clear()
            _FLOAT_TEXTS[value] = text
    return text


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
    out: dict[str, str] = {}
    flatten_into(value, path, out)
    return out


def flatten_into(value: Any, path: str, out: dict[str, str]) -> None:
    """:func:`flatten` into ``out`` (one dict for the whole walk: the feed flattens every
    record it creates)."""
    kind = type(value)
    if kind is dict and not path:
        for key, item in value.items():
            _put(item, str(key), out)
    else:
        _put(value, path, out)


def _put(value: Any, path: str, out: dict[str, str]) -> None:
    """One value of :func:`flatten_into`'s walk: a scalar written, a container walked."""
    kind = type(value)
    if kind is str:
        # "" (or blanks) seen as such, not as nothing
        out[path] = value if value.strip() else json.dumps(value)
    elif kind is dict:
        _dict_into(value, path, out)
    elif kind is list:
        _list_into(value, path, out)
    elif kind is float:
        out[path] = _float_text(value)
    elif kind is bool:
        out[path] = "true" if value else "false"
    elif value is None:
        out[path] = "null"
    elif isinstance(value, dict | list | float):  # a subclass: as its base
        _put(kind.__mro__[-2](value), path, out)
    else:
        out[path] = str(value)


# The items of a container, the common ones written in the loop itself and the rest by
# _put: a record is mostly texts, and one call fewer per value is a quarter of the walk.


def _dict_into(value: dict[Any, Any], path: str, out: dict[str, str]) -> None:
    for key, item in value.items():
        sub = f"{path}.{key}"
        kind = type(item)
        if kind is str:
            out[sub] = item if item.strip() else json.dumps(item)
        elif kind is dict:
            if item:  # an empty one has no paths: no call
                _dict_into(item, sub, out)
        elif kind is list:
            if item:
                _list_into(item, sub, out)
        elif kind is float:
            out[sub] = _float_text(item)
        else:
            _put(item, sub, out)


def _list_into(value: list[Any], path: str, out: dict[str, str]) -> None:
    for index, item in enumerate(value):
        sub = f"{path}[{index}]"
        kind = type(item)
        if kind is str:
            out[sub] = item if item.strip() else json.dumps(item)
        elif kind is dict:
            if item:  # an empty one has no paths: no call
                _dict_into(item, sub, out)
        elif kind is list:
            if item:
                _list_into(item, sub, out)
        elif kind is float:
            out[sub] = _float_text(item)
        else:
            _put(item, sub, out)


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


def record_values(record: MemoryRecord) -> dict[str, Any]:
    """The compared fields of a record as plain values, unflattened: what
    :func:`changes_between` compares (the change feed keeps one of these per record)."""
    found = dict(zip(REFERENCED, msgspec.to_builtins(record_refs(record)), strict=True))
    # As the record's own encoding omits them (its defaults), so do record_fields.
    if found["payload"] is None:
        del found["payload"]
    if not found["scope"]:
        del found["scope"]
    return found


# What :func:`record_refs` holds, in order: the compared fields, then the lifecycle's two.
REFERENCED = (*COMPARED, "pinned", "last_reinforced_at")
Refs = tuple[Any, ...]


def record_refs(record: MemoryRecord) -> Refs:
    """The compared fields of a record as they are, unconverted (:data:`REFERENCED`), in
    one tuple: what :func:`differences_from` compares field by field."""
    lifecycle = record.lifecycle
    return (
        record.payload,
        record.tags,
        record.relations,
        record.provenance,
        record.scope,
        record.confidence,
        record.salience,
        lifecycle.pinned,
        lifecycle.last_reinforced_at,
    )


def differences_from(before: MemoryRecord, record: MemoryRecord) -> list[Difference]:
    """:func:`differences` of two versions of a record (``before`` the earlier).

    Fields equal as structs are skipped without being converted (most events change one or
    two); the others are converted and flattened as :func:`record_values` does, and compared
    as text — so a salience that merely decayed is no change, as with :func:`differences`."""
    return refs_differences(record_refs(before), record_refs(record))


def refs_differences(before: Refs, after: Refs) -> list[Difference]:
    """:func:`differences_from` of two versions' :func:`record_refs` (the change feed takes
    the earlier version's without viewing it whole)."""
    found: list[Difference] = []
    for name, was, now in zip(REFERENCED, before, after, strict=True):
        if was is now or (type(was) is type(now) and was == now):
            continue
        old: dict[str, str] = {}
        new: dict[str, str] = {}
        _flatten_field(name, was, old)
        _flatten_field(name, now, new)
        if not old:
            found += [(path, None, text) for path, text in new.items()]
            continue
        for path in old.keys() | new.keys():
            was_text, now_text = old.get(path), new.get(path)
            if was_text != now_text:
                found.append((path, was_text, now_text))
    found.sort()
    return found


def _flatten_field(name: str, value: Any, out: dict[str, str]) -> None:
    """One field of :func:`record_refs` as :func:`record_values` gives it, flattened (an
    absent payload and an empty scope are no field at all, as in the record's encoding)."""
    if (name == "payload" and value is None) or (name == "scope" and not value):
        return
    flatten_into(msgspec.to_builtins(value), name, out)


def changes_between(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """:func:`changes` of two versions' :func:`record_values`: the same changes, with only the
    fields whose values differ flattened (most events change one or two)."""
    return [Change(path, was, now) for path, was, now in differences(before, after)]


Difference = tuple[str, str | None, str | None]  # path, before, after


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[Difference]:
    """:func:`changes_between` as plain tuples, in path order (what the change feed builds its
    own structs from, once per event)."""
    found: list[Difference] = []
    for name in before.keys() | after.keys():
        was, now = before.get(name, _ABSENT), after.get(name, _ABSENT)
        if was == now and type(was) is type(now):
            continue
        old: dict[str, str] = {}
        new: dict[str, str] = {}
        if was is not _ABSENT:
            flatten_into(was, name, old)
        if now is not _ABSENT:
            flatten_into(now, name, new)
        if not old:  # all of it added (a record's creation): nothing to compare
            found += [(path, None, text) for path, text in new.items()]
            continue
        for path in old.keys() | new.keys():
            was_text, now_text = old.get(path), new.get(path)
            if was_text != now_text:
                found.append((path, was_text, now_text))
    found.sort()
    return found


_ABSENT = object()

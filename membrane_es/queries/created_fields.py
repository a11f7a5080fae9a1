"""A created record's field changes — every compared field added — built straight into the
change feed's structs.

The same changes as the inspector's diff from nothing (:func:`~membrane_es.queries.field_diff.
changes` of ``{}`` and the record's fields: the same paths, texts and order), taken the
short way, since most of a log is creations:

* the compared fields are taken in path order, and no field's name begins another's, so
  every path under one field sorts before every path under the next: only the paths within
  one container (payload, provenance, relations, tags) are sorted, never the whole list;
* a scalar field is one change whose path is the field's name; the changes of the values
  most records share (a confidence or salience of 1.000, ``pinned: false``, a scope) are
  made once and handed out again — a field change is a frozen struct, so a shared one is
  indistinguishable from a new one;
* the containers are walked by :mod:`~membrane_es.queries.field_diff`'s own walk, so their
  texts are the diff's by construction.
"""

from __future__ import annotations

from json import dumps
from typing import Any

import msgspec

from membrane_es.queries.field_diff import (
    REFERENCED,
    _dict_into,
    _float_text,
    _list_into,
    _put,
    record_refs,
)
from membrane_es.schema.changes import FieldChange
from membrane_es.schema.records import MemoryRecord

# The compared fields in path order, and where each is in record_refs.
ORDER = tuple(sorted(REFERENCED))
PLACES = tuple(REFERENCED.index(name) for name in ORDER)
# Why the walk need not sort the whole list (see the module's note).
assert not any(a != b and b.startswith(a) for a in ORDER for b in ORDER), ORDER

# Shared changes of common scalar values, by field and value; each table is emptied when it
# fills. Zero is never kept (-0.0 equals 0.0 as a key but is written "-0.000").
_SHARED: dict[str, dict[Any, FieldChange]] = {name: {} for name in ORDER}
_SHARED_MAX = 1024
_PINNED = {
    value: FieldChange(path="pinned", kind="added", after=text)
    for value, text in ((True, "true"), (False, "false"))
}


def _scalar(name: str, value: Any) -> FieldChange:
    """The change adding scalar field ``name`` with (converted) ``value``."""
    kind = type(value)
    if kind is bool and name == "pinned":
        return _PINNED[value]
    # Floats (scores) and scopes repeat across records; a float never equals a text, so
    # one table per field holds both.
    keep = (kind is float and value) or (kind is str and name == "scope")
    shared = _SHARED[name]
    if keep:
        found = shared.get(value)
        if found is not None:
            return found
    text = _float_text(value) if kind is float else _text(name, value)
    change = FieldChange(path=name, kind="added", after=text)
    if keep:
        if len(shared) >= _SHARED_MAX:
            shared.clear()
        shared[value] = change
    return change


def _text(name: str, value: Any) -> str:
    out: dict[str, str] = {}
    _put(value, name, out)
    return out[name]


def added_fields(record: MemoryRecord) -> list[FieldChange]:
    """Every compared field of ``record`` as added, in path order."""
    refs = record_refs(record)
    values = msgspec.to_builtins([refs[at] for at in PLACES])
    found: list[FieldChange] = []
    for name, value in zip(ORDER, values, strict=True):
        kind = type(value)
        if kind is dict or kind is list:
            if not value:
                continue
            texts: dict[str, str] = {}
            if kind is dict:
                _dict_into(value, name, texts)
            else:
                _list_into(value, name, texts)
            for path in sorted(texts):  # a loop: a comprehension is a function made per call
                found.append(FieldChange(path=path, kind="added", after=texts[path]))
        elif (value is None and name == "payload") or (name == "scope" and not value):
            continue  # as the record's own encoding omits them (its defaults)
        elif kind is str and name != "scope":  # a timestamp's text: no two alike, none kept
            found.append(
                FieldChange(path=name, kind="added", after=value if value.strip() else dumps(value))
            )
        else:
            found.append(_scalar(name, value))
    return found

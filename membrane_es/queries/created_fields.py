"""A created record's field changes — every compared field added — built straight into the
change feed's structs.

The same changes as the inspector's diff from nothing (:func:`~membrane_es.queries.field_diff.
changes` of ``{}`` and the record's fields: the same paths, texts and order), taken the
short way, since most of a log is creations:

* the record's compared fields are converted in one ``to_builtins`` call and walked as the
  diff's own walk (:func:`~membrane_es.queries.field_diff.flatten_into`) walks them, the
  same texts for the same values, but each leaf's change is made where the walk meets it,
  by its path (the one dict of paths the inspector's flatten makes too); the paths are then
  sorted once, in C, and the list taken from the dict in C;
* a scalar field is one change whose path is the field's name; the changes of the values
  most records share (a confidence or salience of 1.000, ``pinned: false``, a scope) are
  made once and handed out again — a field change is a frozen struct, so a shared one is
  indistinguishable from a new one.
"""

from __future__ import annotations

from json import dumps
from typing import Any

import msgspec

from membrane_es.queries.field_diff import REFERENCED, _float_text, _put, record_refs
from membrane_es.schema.changes import FieldChange
from membrane_es.schema.records import MemoryRecord

# Shared changes of common scalar values, by field and value; each table is emptied when it
# fills. Zero is never kept (-0.0 equals 0.0 as a key but is written "-0.000").
_SHARED: dict[str, dict[Any, FieldChange]] = {name: {} for name in REFERENCED}
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
    # Each leaf's change made where the walk meets it, by its path: one sort of the paths
    # (in C) orders them all, and the list is taken from the dict in C.
    found: dict[str, FieldChange] = {}
    for name, value in zip(REFERENCED, msgspec.to_builtins(record_refs(record)), strict=True):
        kind = type(value)
        if kind is dict:
            if value:
                _dict_added(value, name, found)
        elif kind is list:
            if value:
                _list_added(value, name, found)
        elif (value is None and name == "payload") or (name == "scope" and not value):
            continue  # as the record's own encoding omits them (its defaults)
        elif kind is str and name != "scope":  # a timestamp's text: no two alike, none kept
            found[name] = FieldChange(
                path=name, kind="added", after=value if value.strip() else dumps(value)
            )
        else:
            found[name] = _scalar(name, value)
    return list(map(found.__getitem__, sorted(found)))


# The diff's walk (field_diff._dict_into, _list_into), making each leaf's change in place.


def _dict_added(value: dict[Any, Any], path: str, found: dict[str, FieldChange]) -> None:
    for key, item in value.items():
        sub = f"{path}.{key}"
        kind = type(item)
        if kind is str:
            found[sub] = FieldChange(
                path=sub, kind="added", after=item if item.strip() else dumps(item)
            )
        elif kind is dict:
            if item:  # an empty one has no paths
                _dict_added(item, sub, found)
        elif kind is list:
            if item:
                _list_added(item, sub, found)
        elif kind is float:
            found[sub] = FieldChange(path=sub, kind="added", after=_float_text(item))
        else:
            _leaf_added(item, sub, found)


def _list_added(value: list[Any], path: str, found: dict[str, FieldChange]) -> None:
    for index, item in enumerate(value):
        sub = f"{path}[{index}]"
        kind = type(item)
        if kind is str:
            found[sub] = FieldChange(
                path=sub, kind="added", after=item if item.strip() else dumps(item)
            )
        elif kind is dict:
            if item:
                _dict_added(item, sub, found)
        elif kind is list:
            if item:
                _list_added(item, sub, found)
        elif kind is float:
            found[sub] = FieldChange(path=sub, kind="added", after=_float_text(item))
        else:
            _leaf_added(item, sub, found)


def _leaf_added(value: Any, path: str, found: dict[str, FieldChange]) -> None:
    """Any other value, written by the diff's own :func:`~membrane_es.queries.field_diff._put`."""
    texts: dict[str, str] = {}
    _put(value, path, texts)
    for sub, text in texts.items():
        found[sub] = FieldChange(path=sub, kind="added", after=text)

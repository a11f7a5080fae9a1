"""How a LangGraph item is stored as a record, and the pure rules of the store's reads.

An item ``(namespace, key) → value`` is a semantic fact: subject the namespace, predicate
the key, object the value (a JSON object). Its scope is the namespace's labels joined by
periods (LangGraph forbids periods in labels, so the mapping is one to one), which is what
lets a trust context's ``scopes`` name the namespaces a reader may see. The tag
:data:`ITEM_TAG` tells the store's records from others in the same scope; items are pinned
(a stored item never fades) and the first provenance source carries the moment the item
was first put, which its later revisions keep as the item's ``created_at``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    MatchCondition,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from membrane_es import (
    Lifecycle,
    MemoryRecord,
    MemoryType,
    Provenance,
    ProvenanceSource,
    SemanticPayload,
    Sensitivity,
    ValidationError,
)

ITEM_TAG = "langgraph-store"
SOURCE_REF = "langgraph-store:put"
SEPARATOR = "."  # joins a namespace's labels into its scope (labels never hold one)
RESERVED_ROOT = "langgraph"  # LangGraph keeps namespaces under this root for itself
_MIN_INT, _MAX_INT = -(1 << 63), (1 << 64) - 1  # what the log's MessagePack can hold
_COMPARISONS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


@dataclass(frozen=True, slots=True)
class Revision:
    """One change of an item, oldest first in :meth:`MembraneStore.history`.

    ``value`` is what the item held from ``at`` on (None: it was deleted then); ``record_id``
    the record that holds that value (for a deletion, the record it retracted), so the
    engine's own ``history`` and ``retrieve_by_id`` reach the full audit trail.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    at: datetime
    actor: str
    rationale: str
    record_id: str


# --- names -------------------------------------------------------------------------------


def scope_of(namespace: tuple[str, ...]) -> str:
    return SEPARATOR.join(namespace)


def namespace_of(scope: str) -> tuple[str, ...]:
    return tuple(scope.split(SEPARATOR))


def check_namespace(namespace: object, *, writing: bool) -> tuple[str, ...]:
    """A namespace as LangGraph allows it (its own :class:`InvalidNamespaceError` if not);
    a written one must also be non-empty and outside the root LangGraph reserves."""
    if not isinstance(namespace, tuple | list):
        raise InvalidNamespaceError(
            f"Namespace must be a tuple of strings, got {type(namespace).__name__}."
        )
    namespace = tuple(namespace)
    validate_op_namespace(GetOp(namespace, ""))
    if writing and not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if writing and namespace[0] == RESERVED_ROOT:
        raise InvalidNamespaceError(
            f'Root label for namespace cannot be "{RESERVED_ROOT}". Got: {namespace}'
        )
    if writing and not all(label.strip() for label in namespace):
        # LangGraph refuses only empty labels; the engine keeps the namespace as a fact's
        # subject, which may not be blank.
        raise ValidationError("namespace", f"labels must not be blank, got {namespace!r}")
    return namespace


def check_key(key: object, *, writing: bool = False) -> str:
    """A key as LangGraph allows it; a written one must also not be blank."""
    if not isinstance(key, str):
        raise ValidationError("key", f"must be a string, got {type(key).__name__}")
    if "\x00" in key:
        raise ValidationError("key", "must not contain NUL characters")
    if writing and not key.strip():
        # The engine keeps the key as a fact's predicate, which may not be blank.
        raise ValidationError("key", f"must not be blank, got {key!r}")
    return key


def check_value(value: object) -> dict[str, Any]:
    """A JSON object the log can hold, as a plain dict (tuples become lists, as in JSON)."""
    if not isinstance(value, Mapping):
        raise ValidationError("value", f"must be a mapping, got {type(value).__name__}")
    checked = _plain(value, "value")
    assert isinstance(checked, dict)
    return checked


def _plain(value: object, where: str) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not _MIN_INT <= value <= _MAX_INT:
            raise ValidationError(where, f"integer {value} does not fit in 64 bits")
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, Mapping):
        plain = {}
        for name, inner in value.items():
            if not isinstance(name, str):
                raise ValidationError(where, f"keys must be strings, got {type(name).__name__}")
            plain[name] = _plain(inner, f"{where}.{name}")
        return plain
    if isinstance(value, list | tuple):
        return [_plain(inner, f"{where}[{i}]") for i, inner in enumerate(value)]
    raise ValidationError(where, f"not a JSON value: {type(value).__name__}")


def check_index(index: object) -> bool | list[str] | None:
    """A put's ``index``: None (the store's fields), False (not indexed) or field paths."""
    if index is None or index is False:
        return index
    if isinstance(index, list | tuple) and all(isinstance(path, str) for path in index):
        return list(index)
    raise ValidationError("index", "must be None, False or a list of field paths")


# --- records -----------------------------------------------------------------------------


def item_record(
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    *,
    sensitivity: Sensitivity,
    first_put: datetime | None,
) -> MemoryRecord:
    """The record a put writes (``first_put``: when the item was created, for a revision)."""
    scope = scope_of(namespace)
    return MemoryRecord(
        type=MemoryType.SEMANTIC,
        sensitivity=sensitivity,
        scope=scope,
        tags=[ITEM_TAG],
        lifecycle=Lifecycle(pinned=True),
        payload=SemanticPayload(subject=scope, predicate=key, object=value),
        provenance=Provenance(sources=[ProvenanceSource(ref=SOURCE_REF, timestamp=first_put)]),
    )


def is_item(record: MemoryRecord) -> bool:
    """Whether a record is a store item the reader may see in full (a redacted copy has
    no payload)."""
    payload = record.payload
    return (
        ITEM_TAG in record.tags
        and bool(record.scope)
        and isinstance(payload, SemanticPayload)
        and isinstance(payload.object, dict)
    )


def first_put(record: MemoryRecord) -> datetime:
    """When the item a record holds was first put."""
    sources = record.provenance.sources
    if sources and sources[0].ref == SOURCE_REF and sources[0].timestamp is not None:
        return sources[0].timestamp
    assert record.created_at is not None
    return record.created_at


def item_of(record: MemoryRecord) -> Item:
    payload = record.payload
    assert isinstance(payload, SemanticPayload) and record.updated_at is not None
    assert record.created_at is not None
    return Item(
        value=payload.object,
        key=payload.predicate,
        namespace=namespace_of(record.scope),
        created_at=first_put(record),
        updated_at=record.created_at,  # each value is a record of its own: made when put
    )


def item_key(record: MemoryRecord) -> tuple[tuple[str, ...], str]:
    payload = record.payload
    assert isinstance(payload, SemanticPayload)
    return namespace_of(record.scope), payload.predicate


# --- what a search indexes ---------------------------------------------------------------


def text_to_embed(value: dict[str, Any], paths: Sequence[str]) -> str | None:
    """The text an item's vector is made from: the texts at ``paths`` (``$``: the whole
    value as JSON), one per line; None when there is none. An item has one vector."""
    texts: list[str] = []
    for path in paths:
        texts.extend(get_text_at_path(value, path if path == "$" else tokenize_path(path)))
    texts = [text for text in texts if text]
    return "\n".join(texts) if texts else None


# --- filters and namespace conditions ----------------------------------------------------


def check_filter(condition: object, where: str = "filter") -> dict[str, Any] | None:
    """A search filter: field → value (equal, nested objects and lists alike) or an object
    of comparisons (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``)."""
    if condition is None:
        return None
    if not isinstance(condition, Mapping) or not all(isinstance(k, str) for k in condition):
        raise ValidationError(where, "must be a mapping of field names to values")
    for name, expected in condition.items():
        _check_expected(expected, f"{where}.{name}")
    return dict(condition)


def _check_expected(expected: object, where: str) -> None:
    if isinstance(expected, Mapping):
        if not all(isinstance(name, str) for name in expected):
            raise ValidationError(where, "field names must be strings")
        if any(name.startswith("$") for name in expected):
            for operator, operand in expected.items():
                if operator not in _COMPARISONS:
                    raise ValidationError(where, f"unsupported operator {operator!r}")
                if operator in ("$gt", "$gte", "$lt", "$lte") and not _is_number(operand):
                    raise ValidationError(where, f"{operator} needs a number, got {operand!r}")
            return
        for name, inner in expected.items():
            _check_expected(inner, f"{where}.{name}")
    elif isinstance(expected, list | tuple):
        for i, inner in enumerate(expected):
            _check_expected(inner, f"{where}[{i}]")


def matches(value: Mapping[str, Any], condition: Mapping[str, Any] | None) -> bool:
    if not condition:
        return True
    return all(_matches(value.get(name), expected) for name, expected in condition.items())


def _matches(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        if any(name.startswith("$") for name in expected):
            return all(_compare(actual, op, operand) for op, operand in expected.items())
        return isinstance(actual, Mapping) and all(
            _matches(actual.get(name), inner) for name, inner in expected.items()
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(_matches(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return bool(actual == expected)


def _compare(actual: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(actual == operand)
    if operator == "$ne":
        return bool(actual != operand)
    if not _is_number(actual):
        return False  # an ordering of a missing or non-numeric field holds for nothing
    left, right = float(actual), float(operand)
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right  # $lte


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """LangGraph's namespace conditions: a prefix or suffix of labels, ``*`` any one."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        window = namespace[: len(path)]
    elif condition.match_type == "suffix":
        window = namespace[len(namespace) - len(path) :]
    else:
        raise ValidationError("match_conditions", f"unknown match type {condition.match_type!r}")
    return all(want in ("*", label) for label, want in zip(window, path, strict=True))

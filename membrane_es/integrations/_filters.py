"""Metadata filters as vector stores write them (Chroma's operators): what a LangChain user
moving from another store passes as ``filter``.

A condition maps a metadata key to a value (equal) or to operators — ``$eq``, ``$ne``,
``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``, ``$nin`` — and ``$and`` / ``$or`` join a list
of conditions. Keys side by side must all hold. A key the metadata lacks matches no operator
but ``$ne`` and ``$nin`` (it is not the value), as in Chroma.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from membrane_es import ValidationError

_COMPARE = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"})
_JOIN = frozenset({"$and", "$or"})
_MISSING = object()


def check_condition(condition: object, where: str = "filter") -> None:
    """Refuse, naming the field, what no document could be matched by."""
    if not isinstance(condition, Mapping) or not all(isinstance(k, str) for k in condition):
        raise ValidationError(where, "must be a mapping of metadata keys to conditions")
    for key, expected in condition.items():
        if key in _JOIN:
            if not isinstance(expected, list | tuple) or not expected:
                raise ValidationError(f"{where}.{key}", "must be a non-empty list of conditions")
            for i, inner in enumerate(expected):
                check_condition(inner, f"{where}.{key}[{i}]")
        elif key.startswith("$"):
            raise ValidationError(where, f"unsupported operator {key!r}")
        elif isinstance(expected, Mapping) and any(str(op).startswith("$") for op in expected):
            _check_operators(expected, f"{where}.{key}")


def _check_operators(operators: Mapping[Any, Any], where: str) -> None:
    for operator, operand in operators.items():
        if operator not in _COMPARE:
            raise ValidationError(where, f"unsupported operator {operator!r}")
        if operator in ("$gt", "$gte", "$lt", "$lte") and not _is_number(operand):
            raise ValidationError(where, f"{operator} needs a number, not {operand!r}")
        if operator in ("$in", "$nin") and not isinstance(operand, list | tuple):
            raise ValidationError(where, f"{operator} needs a list, not {operand!r}")


def holds(metadata: Mapping[str, Any], condition: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` meets a (checked) condition."""
    for key, expected in condition.items():
        if key == "$and":
            if not all(holds(metadata, inner) for inner in expected):
                return False
        elif key == "$or":
            if not any(holds(metadata, inner) for inner in expected):
                return False
        elif not _meets(metadata.get(key, _MISSING), expected):
            return False
    return True


def _meets(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping) and any(str(op).startswith("$") for op in expected):
        return all(_compare(actual, op, operand) for op, operand in expected.items())
    return actual is not _MISSING and bool(actual == expected)


def _compare(actual: Any, operator: str, operand: Any) -> bool:
    if operator == "$ne":
        return actual is _MISSING or bool(actual != operand)
    if operator == "$nin":
        return actual is _MISSING or actual not in operand
    if actual is _MISSING:
        return False
    if operator == "$eq":
        return bool(actual == operand)
    if operator == "$in":
        return actual in operand
    if not _is_number(actual):
        return False  # an ordering holds for numbers only
    left, right = float(actual), float(operand)
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right  # $lte


def _is_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not (isinstance(value, float) and math.isnan(value))
    )

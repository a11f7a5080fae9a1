"""One name for each error: an earlier name still imports, with a warning naming the new one."""

from __future__ import annotations

import pytest

import membrane_es
from membrane_es import errors


def test_the_earlier_name_of_integrity_error_warns_and_is_the_same_class() -> None:
    with pytest.warns(DeprecationWarning, match="now called IntegrityError"):
        from membrane_es import IntegrityViolationError
    with pytest.warns(DeprecationWarning, match="now called IntegrityError"):
        from membrane_es.errors import IntegrityViolationError as from_errors
    assert IntegrityViolationError is from_errors is membrane_es.IntegrityError


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchError'"):
        _ = membrane_es.NoSuchError  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'NoSuchError'"):
        _ = errors.NoSuchError  # type: ignore[attr-defined]


def test_the_public_names_hold_no_alias() -> None:
    exported = [getattr(membrane_es, name) for name in membrane_es.__all__]
    assert len({id(value) for value in exported}) == len(exported)

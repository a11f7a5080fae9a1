"""A closed engine refuses every call with :class:`~membrane_es.errors.StoreClosedError`.

Without this, a call after :meth:`~membrane_es.engine.opening.Opening.close` fails deep in
whichever backend it reaches first (LMDB's, SQLite's, psycopg's), each with an error type of
its own; a caller catching :class:`~membrane_es.errors.MembraneError`, as the engine's
errors promise, would miss it. The check is one attribute read a call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from membrane_es.errors import StoreClosedError

T = TypeVar("T", bound=type)

# Callable after close: closing again does nothing, and leaving a ``with`` block closes.
ALWAYS_CALLABLE = frozenset({"close", "__exit__"})


def refuse_after_close(cls: T) -> T:
    """Wrap every public method of ``cls`` (static and class methods aside: they open stores,
    they do not use one) so that it raises :class:`StoreClosedError` once the instance is
    closed."""
    for name in dir(cls):
        if (name.startswith("_") and name != "__enter__") or name in ALWAYS_CALLABLE:
            continue
        attribute = inspect.getattr_static(cls, name)
        if isinstance(attribute, staticmethod | classmethod | property):
            continue
        if inspect.isfunction(attribute):
            setattr(cls, name, _guarded(attribute))
    return cls


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    name = method.__name__

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise StoreClosedError(name)
        return method(self, *args, **kwargs)

    return call

"""Every value of each class of bad input over every argument of the Python API it reaches,
exhaustively (the test suite draws 450 of these at random): lone surrogates on every argument
of the 35 entry points and in every record field the record-taking ones read, moments at and
past the calendar's ends on every argument that takes a moment, levels beyond a ceiling on
every argument that takes a level or a trust context.

Run it (a few minutes on 2 cores; longer when they are shared)::

    python -m bench.input_classes

It prints, per class, how many calls were taken, refused with a ``MembraneError``, and ended in
an error of any other type (which must be none), then exits 1 if there was one.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

from membrane_es import MembraneError, TrustContext
from tests.faults import input_classes as classes
from tests.faults import test_bad_input_python as api

SURROGATES: list[Any] = [
    "\ud800",
    "a\udc00b",
    ["\ud800"],
    {"kind": "\ud800", "ref": "\ud800"},
    {"\ud800": 1},
]
MOMENTS: list[Any] = [
    *classes.MOMENTS_PAST_THE_ENDS,
    *classes.MOMENTS_AT_THE_ENDS,
    *classes.MOMENT_VALUES,
]


def _calls(store: api.Store) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(class, entry point, arguments) for every value on every argument it reaches."""
    for name, (_, arguments) in sorted(api.ENTRY_POINTS.items()):
        for param in arguments(store):
            for value in SURROGATES:
                yield "surrogate", name, {**arguments(store), param: value}
            if param in api.MOMENT_PARAMS:
                for value in MOMENTS:
                    yield "moment", name, {**arguments(store), param: value}
            if param in api.LEVEL_PARAMS:
                level: Any  # not always a level: the point
                for level in classes.ABOVE_CEILING:
                    value = TrustContext(max_sensitivity=level) if param == "trust" else level
                    yield "ceiling", name, {**arguments(store), param: value}
        if name in api.RECORD_TAKERS:
            for path in api.RECORD_PATHS:
                for value in SURROGATES:
                    record = api._with(api._record(), path, value)
                    yield "surrogate", name, {**arguments(store), api.RECORD_TAKERS[name]: record}


def main() -> int:
    store = api.Store()
    tally: Counter[tuple[str, str]] = Counter()
    try:
        for kind, name, arguments in _calls(store):
            call, _ = api.ENTRY_POINTS[name]
            try:
                call(store, arguments)
            except MembraneError:
                tally[kind, "refused (MembraneError)"] += 1
                continue
            except Exception as error:  # noqa: BLE001 - what is being counted
                tally[kind, f"other: {type(error).__name__}"] += 1
                print(f"{name}: {type(error).__name__}: {error!r}", file=sys.stderr)
                continue
            tally[kind, "taken"] += 1
            store.refresh()  # what the call may have used up
            if name in api.USING_UP_ENTRIES:
                store.refresh_entries()
    finally:
        store.close()
    for kind in classes.CLASSES:
        outcomes = {o: n for (k, o), n in sorted(tally.items()) if k == kind}
        print(f"{kind:10} {sum(outcomes.values()):5} calls  {outcomes}")
    others = sum(n for (_, outcome), n in tally.items() if outcome.startswith("other"))
    print(f"errors of another type: {others}")
    return 1 if others else 0


if __name__ == "__main__":
    sys.exit(main())

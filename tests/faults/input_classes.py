"""The classes of bad input every surface's fuzzer generates on purpose, beside its random
values: lone surrogates (in a string position, and in values of the wrong type: a list, an
object, an object's key), moments at and past the calendar's ends (offsets that carry a
moment out of years 1-9999 once in UTC), and levels above a caller's ceiling (or no level
at all)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

LONE_SURROGATES = ["\ud800", "a\udc00b", "\udfff\udfff", "x\ud83d", "\udbff"]

SURROGATE_TEXT = st.sampled_from(LONE_SURROGATES)
# A surrogate where a number, a list or an object belongs, and in an object's key.
SURROGATE_VALUES: st.SearchStrategy[Any] = st.one_of(
    SURROGATE_TEXT,
    st.lists(SURROGATE_TEXT, min_size=1, max_size=2),
    st.builds(lambda s: {"kind": s, "ref": s}, SURROGATE_TEXT),
    st.builds(lambda s: {s: 1}, SURROGATE_TEXT),
    st.builds(lambda s: [{"value": s}], SURROGATE_TEXT),
)

# RFC 3339 text: within the calendar only before the offset is applied, or past its ends.
MOMENTS_PAST_THE_ENDS = [
    "9999-12-31T23:59:59-23:59",
    "9999-12-31T23:59:59.999999-00:01",
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00.000001+00:01",
]
# At the ends exactly: valid moments, which must be taken or refused cleanly.
MOMENTS_AT_THE_ENDS = [
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59+00:00",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00-00:00",
]
MOMENT_TEXT = st.sampled_from(MOMENTS_PAST_THE_ENDS + MOMENTS_AT_THE_ENDS)
MOMENT_VALUES = [
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(-timedelta(hours=23, minutes=59))),
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
    datetime.max.replace(tzinfo=UTC),
    datetime.min.replace(tzinfo=UTC),
    datetime.max,  # naive
]
MOMENT_OBJECTS = st.sampled_from(MOMENT_VALUES)
# Epoch seconds around the calendar's ends (the HTTP API's ``as_of``, ``created_at``).
EPOCH_ENDS = [253402300799, 253402300800, 2**53 - 1, 2**63 - 1, 0, -1]

# Levels above a ``low`` ceiling, and what is no level at all.
ABOVE_CEILING = ["medium", "high", "hyper", "ultra", "HYPER", "\ud800", " low"]
LEVELS = st.sampled_from(ABOVE_CEILING)

CLASSES = ("surrogate", "moment", "ceiling")

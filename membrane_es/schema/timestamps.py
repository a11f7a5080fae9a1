"""The timestamp type of the schema: timezone-aware datetimes only.

A naive datetime is ambiguous in an append-only log read "as of" a moment, so decoding
rejects it; everything the engine stamps is UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import msgspec

Timestamp = Annotated[datetime, msgspec.Meta(tz=True)]


def utc(moment: datetime) -> datetime:
    """The same instant in UTC; a naive value is rejected, and so is one that falls outside
    the calendar in UTC (``9999-12-31T23:59:59-23:59`` is after year 9999 there): a
    ValueError either way."""
    if moment.tzinfo is None:
        raise ValueError("timestamp must be timezone-aware")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"{moment.isoformat()} is outside the calendar in UTC (years 1 to 9999)"
        ) from None


def rfc3339(moment: datetime | None) -> str:
    """RFC 3339 in UTC with trailing zero fractions trimmed (the reference wire form)."""
    if moment is None:
        return ""
    # isoformat, not strftime: strftime's %Y leaves years below 1000 unpadded ("1-01-01").
    utc = moment.astimezone(UTC).replace(tzinfo=None)
    return utc.isoformat(timespec="microseconds").rstrip("0").rstrip(".") + "Z"

"""Times in the read model: int64 microseconds since the Unix epoch (exact, vectorisable)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def micros(moment: datetime) -> int:
    """Exact microseconds since the epoch (no float rounding)."""
    return (moment - EPOCH) // _MICROSECOND


def from_micros(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=int(value))

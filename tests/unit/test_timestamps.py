"""The wire form of a moment: RFC 3339 in UTC, read back as the same moment, at the calendar's
ends too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from membrane_es.schema.rfc3339 import parse_moment
from membrane_es.schema.timestamps import rfc3339


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00Z"),
        (datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC), "0999-12-31T23:59:59Z"),
        (datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC), "2026-03-01T12:00:00.25Z"),
        (datetime(2026, 3, 1, 13, tzinfo=timezone(timedelta(hours=1))), "2026-03-01T12:00:00Z"),
        (datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), "9999-12-31T23:59:59.999999Z"),
    ],
)
def test_a_moment_is_written_in_utc_and_reads_back_as_itself(moment: datetime, text: str) -> None:
    assert rfc3339(moment) == text
    assert parse_moment(text, "at") == moment


def test_no_moment_is_the_empty_string() -> None:
    assert rfc3339(None) == ""

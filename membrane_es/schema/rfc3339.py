"""RFC 3339 moments given as text (command-line options, tool arguments), parsed strictly."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from membrane_es.errors import ValidationError
from membrane_es.schema.timestamps import utc

_MOMENT = msgspec.json.Decoder(Annotated[datetime, msgspec.Meta(tz=True)])


def parse_moment(value: str | None, field: str = "as_of") -> datetime | None:
    """An RFC 3339 moment with its offset; None stays None.

    msgspec's decoder, not ``datetime.fromisoformat``: that also accepts ISO week dates,
    ordinal dates and moments without an offset, none of which RFC 3339 allows.
    """
    if value is None:
        return None
    try:
        moment: datetime = _MOMENT.decode(msgspec.json.encode(value))
    except (msgspec.ValidationError, UnicodeEncodeError):
        raise ValidationError(
            field, f"{value!r} is not an RFC 3339 moment with an offset (e.g. 2026-11-22T10:00:00Z)"
        ) from None
    try:
        utc(moment)  # in range once in UTC, as every later use needs
    except ValueError as exc:
        raise ValidationError(field, str(exc)) from None
    return moment

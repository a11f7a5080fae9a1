"""Input checks shared by the ingest operations (:mod:`.ingest`) and capture
(:mod:`.capture`): plain text, sensitivity, tags, JSON content, request timestamps."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import msgspec

from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import (
    Sensitivity,
)
from membrane_es.schema.timestamps import Timestamp, utc
from membrane_es.schema.validation import (
    MAX_DEPTH,
    MAX_PAYLOAD_BYTES,
    check_finite,
    check_storable,
    check_tags,
    check_text,
)

DEFAULT_SENSITIVITY = Sensitivity.LOW.value


def policy_error(field: str, reason: str) -> ValidationError:
    """The policy engine's rejection (the reference's ``ingestion policy: <reason>``)."""
    return ValidationError(field, f"ingestion policy: {reason}")


def plain_text(field: str, value: Any) -> str:
    """A string input (a ``str`` enum member becomes its plain value), at most 100,000 bytes."""
    if isinstance(value, str):
        value = str.__str__(value)
    return check_text(field, value)


def check_tag_list(field: str, tags: Iterable[str] | None) -> list[str]:
    return [str.__str__(t) if isinstance(t, str) else t for t in check_tags(field, tags or [])]


def json_value(field: str, value: Any) -> Any:
    """``value`` as plain JSON data (dicts keep their key order), at most 10 MiB encoded and
    nested at most :data:`~membrane_es.schema.validation.MAX_DEPTH` deep."""
    try:
        raw = msgspec.json.encode(value)
        decoded = msgspec.json.decode(raw)
        msgspec.msgpack.encode(decoded)  # what the log holds: 64-bit integers at most
    except RecursionError:
        raise ValidationError(field, f"nested deeper than {MAX_DEPTH} levels") from None
    except (TypeError, ValueError, OverflowError) as exc:
        check_storable(field, value)  # names the offending value's path
        raise ValidationError(field, f"{field} must be JSON-encodable: {exc}") from None
    if b"null" in raw:  # NaN and infinity encode as null: look for them only then
        check_finite(field, value)
    if isinstance(decoded, dict | list) and len(msgspec.json.encode(decoded)) != len(raw):
        # Only a key dropped in decoding changes the length: two keys of one object that
        # are the same once written as JSON text ({1: "a", "1": "b"}); the first was lost.
        raise ValidationError(
            field, f"{field} has two keys that read the same as JSON text (such as 1 and '1')"
        )
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise ValidationError(
            field, f"{field} exceeds maximum payload size of {MAX_PAYLOAD_BYTES} bytes"
        )
    # Brackets counted in C first: only content with that many can nest too deep for the
    # code that reads it back (its text, its summary), which recurses.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        check_storable(field, decoded)  # names the path that nests too deep
    return decoded


def request_time(value: datetime | str | None, uow: UnitOfWork) -> datetime:
    """The request's timestamp: a timezone-aware datetime or an RFC 3339 string; none: now."""
    given = check_timestamp(value)
    return uow.now() if given is None else given


def check_timestamp(value: datetime | str | None) -> datetime | None:
    """A request timestamp as a UTC datetime (None or "" stay None: "now")."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        try:
            return utc(value)
        except ValueError as exc:
            raise ValidationError("timestamp", f"invalid timestamp: {exc}") from None
    if isinstance(value, str):
        try:
            return utc(msgspec.convert(value, Timestamp))
        except UnicodeEncodeError:
            raise ValidationError("timestamp", "invalid timestamp: not valid Unicode") from None
        except (msgspec.ValidationError, ValueError) as exc:
            raise ValidationError("timestamp", f"invalid timestamp: {exc}") from None
    raise ValidationError(
        "timestamp", "invalid timestamp: must be a datetime or an RFC 3339 string"
    )


def resolve_sensitivity(given: str) -> str:
    return given or DEFAULT_SENSITIVITY

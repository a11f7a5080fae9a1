"""The change feed over HTTP: a page (``GET /v1/memory/changes``) and a Server-Sent Events
stream of the same changes (``GET /v1/memory/changes/stream``).

Parameters arrive as text and are checked here, so every bad one — negative, not a number,
beyond the log, a limit out of range — is a 400 naming it. The stream sends each change as
an event whose id is its position (a client's ``Last-Event-ID`` resumes after it, as the
EventSource standard has browsers do on their own) and a comment every
:data:`KEEPALIVE_SECONDS` while nothing happens: that is when a client that went away is
noticed, and the follow is closed.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
from litestar.response import ServerSentEventMessage

from membrane_es.engine import DEFAULT_CHANGE_PAGE, MAX_CHANGE_PAGE, Membrane
from membrane_es.errors import ValidationError
from membrane_es.schema.records import TrustContext

KEEPALIVE_SECONDS = 15.0
# The largest position a parameter may name (positions are 64-bit in every store).
MAX_POSITION = 2**63 - 1

_encode = msgspec.json.Encoder().encode


def position(name: str, value: str | None) -> int:
    """A log position parameter: a whole number from 0 (absent: 0)."""
    if value is None:
        return 0
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_POSITION:
        raise ValidationError(name, f"{value!r} is not a log position (a whole number >= 0)")
    return int(text)


def page_limit(value: str | None) -> int:
    """A page size parameter: 1 to :data:`MAX_CHANGE_PAGE` (absent: the default)."""
    if value is None:
        return DEFAULT_CHANGE_PAGE
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_CHANGE_PAGE:
        raise ValidationError("limit", f"{value!r} is not a page size (1 to {MAX_CHANGE_PAGE})")
    return int(text)


def stream(
    engine: Membrane, trust: TrustContext, after: int, keepalive: float = KEEPALIVE_SECONDS
) -> Iterator[ServerSentEventMessage]:
    """The changes after ``after`` as Server-Sent Events, followed until the client leaves
    (a sync iterator: the server runs each step on a worker thread)."""
    while True:
        with engine.changes(after=after, follow=True, timeout=keepalive, trust=trust) as feed:
            for change in feed:
                yield ServerSentEventMessage(
                    data=_encode(change).decode(), event="change", id=change.position
                )
            after = feed.position
        yield ServerSentEventMessage(comment=f"position {after}")

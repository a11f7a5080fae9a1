"""What every page is read under: who asks (the key's caller), the trust it declares within
its key's ceiling, and the moment it reads the store as of.

These three travel in every link and form as query parameters (``as_of``, ``level``,
``scopes``), so moving the time control, or narrowing the trust, holds on every page until
changed. ``as_of`` takes RFC 3339 with its offset, a moment without one (read as UTC), or
epoch seconds (as the entries API takes it). A moment after now is a projection: the store
as it stands, with salience decayed to then (the page says so).

The moment may be given as a log position instead (``as_of_position``, not with ``as_of``):
the store as it stood right after that event, read as of its log time (as the library's
reads other than by id read a position), and carried in links as the position.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlencode

from membrane_es.access.ceiling import Caller
from membrane_es.engine import moment_of
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext
from membrane_es.schema.rfc3339 import parse_moment
from membrane_es.schema.timestamps import rfc3339

_WITHOUT_OFFSET = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?")
CARRIED = ("as_of", "as_of_position", "level", "scopes")
MAX_POSITION = 2**63 - 1
# The log time of a position (what a reading as of it reads as of); None: not to be known.
Resolver = Callable[[int], datetime]
_RANK = {level: rank for rank, level in enumerate(Sensitivity)}


def parse_as_of(text: str | None) -> datetime | None:
    """The moment ``text`` names (None: now)."""
    text = (text or "").strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():  # epoch seconds, as the entries API takes them
        return moment_of("as_of", int(text))
    if _WITHOUT_OFFSET.fullmatch(text):
        return datetime.fromisoformat(text.replace(" ", "T")).replace(tzinfo=UTC)
    return parse_moment(text, "as_of")


def parse_position(text: str | None) -> int | None:
    """The log position ``text`` names (None: none given)."""
    text = (text or "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_POSITION:
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise ValidationError(
            "as_of_position", f"{shown!r} is not a log position (a whole number >= 0)"
        )
    return int(text)


def parse_moment_or_position(
    params: Mapping[str, str], resolve: Resolver
) -> tuple[datetime | None, int | None]:
    """The moment read as of and the position it was given as (if it was)."""
    position = parse_position(params.get("as_of_position"))
    if position is None:
        return parse_as_of(params.get("as_of")), None
    if (params.get("as_of") or "").strip():
        raise ValidationError("as_of_position", "give as_of or as_of_position, not both")
    return resolve(position), position


def parse_level(text: str | None, ceiling: Sensitivity) -> Sensitivity:
    text = (text or "").strip().lower()
    if not text:
        return ceiling
    try:
        return Sensitivity(text)
    except ValueError:
        levels = ", ".join(level.value for level in Sensitivity)
        raise ValidationError("level", f"{text!r} is not a sensitivity; one of {levels}") from None


def parse_scopes(text: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s.strip() for s in (text or "").split(",") if s.strip()))


@dataclass(frozen=True, slots=True)
class Reading:
    """One page's reader: its caller, declared trust, effective trust and moment."""

    caller: Caller
    level: Sensitivity
    scopes: tuple[str, ...]
    as_of: datetime | None
    position: int | None = None  # the log position the moment was given as, if it was

    @classmethod
    def from_params(cls, caller: Caller, params: Mapping[str, str], resolve: Resolver) -> Reading:
        as_of, position = parse_moment_or_position(params, resolve)
        return cls(
            caller=caller,
            level=parse_level(params.get("level"), caller.max_sensitivity),
            scopes=parse_scopes(params.get("scopes")),
            as_of=as_of,
            position=position,
        )

    @classmethod
    def forgiving(
        cls, caller: Caller, params: Mapping[str, str], resolve: Resolver | None
    ) -> Reading:
        """The reader of a page that failed: each parameter as given if it reads, else its
        default (the page that says what was wrong keeps everything that was right)."""
        level, scopes = caller.max_sensitivity, parse_scopes(params.get("scopes"))
        as_of: datetime | None = None
        position: int | None = None
        try:
            level = parse_level(params.get("level"), caller.max_sensitivity)
        except ValidationError:
            pass
        # The position when it reads (given with a moment too: the position, which the
        # page names), else the moment when it reads.
        if resolve is not None:
            try:
                position = parse_position(params.get("as_of_position"))
                as_of = None if position is None else resolve(position)
            except ValidationError:
                position = None
        if position is None:
            try:
                as_of = parse_as_of(params.get("as_of"))
            except ValidationError:
                pass
        return cls(caller=caller, level=level, scopes=scopes, as_of=as_of, position=position)

    @property
    def projected(self) -> bool:
        """Whether the moment is after now: a projection of decay, not a past state."""
        return self.as_of is not None and self.as_of > datetime.now(UTC)

    @property
    def trust(self) -> TrustContext:
        """The declared trust lowered to the key's ceiling: what every read here uses."""
        declared = TrustContext(
            max_sensitivity=self.level, authenticated=True, scopes=list(self.scopes)
        )
        return self.caller.clamp(declared)

    @property
    def levels(self) -> list[Sensitivity]:
        """The levels the caller may declare (up to its key's ceiling)."""
        top = _RANK[self.caller.max_sensitivity]
        return [level for level in Sensitivity if _RANK[level] <= top]

    @property
    def as_of_text(self) -> str:
        return "" if self.as_of is None else rfc3339(self.as_of)

    @property
    def as_of_field(self) -> str:
        """What the moment field shows: empty when the moment was given as a position (the
        position field shows it), so the form never sends both."""
        return "" if self.position is not None else self.as_of_text

    @property
    def position_text(self) -> str:
        return "" if self.position is None else str(self.position)

    def carried(self) -> dict[str, str]:
        """The parameters every link keeps (only those set)."""
        values = {
            "as_of": self.as_of_field,
            "as_of_position": self.position_text,
            "level": "" if self.level is self.caller.max_sensitivity else self.level.value,
            "scopes": ",".join(self.scopes),
        }
        return {k: v for k, v in values.items() if v}

    def link(self, path: str, **extra: object) -> str:
        """``path`` with the carried parameters and ``extra`` (None or "" left out)."""
        params = {**self.carried(), **{k: str(v) for k, v in extra.items() if v not in (None, "")}}
        return f"{path}?{urlencode(params)}" if params else path

    def at(self, moment: datetime | None) -> Reading:
        """The same reader at another moment (None: now)."""
        return Reading(self.caller, self.level, self.scopes, moment)

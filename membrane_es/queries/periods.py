"""The periods of time a task descriptor names: when a question says *when*.

"What did Gina find for her store on 1 February, 2023?", "what setback came in October
2023?", "what did we decide last week?" name a period; a memory whose event time
(``created_at``: when it happened) falls within it is evidence of an answer, a third kind
beside meaning and words (:mod:`membrane_es.queries.ranking`). English expressions, read in
UTC:

* a day: ``2023-10-13``, ``13 October 2023``, ``13th of Oct, 2023``, ``October 13, 2023``;
* a month: ``October 2023``, ``Oct. 2023``; a month named alone — ``in June``, ``June 13`` —
  is that month of any year (written with a capital, as English writes months, so that "may"
  and "march" stay verbs; ``May`` alone only after a word such as *in*, *since* or *last*,
  so that "May I …" is not a month);
* a year: ``2023`` (1900–2099);
* relative to the moment the read answers for (now, or its ``as_of``): ``today``,
  ``yesterday``, ``this``/``last`` ``week`` (weeks start on Monday), ``month`` or ``year``,
  and ``3 days ago``, ``two weeks ago``, ``a month ago``, ``a year ago`` (the day, week,
  month or year that many before) — unless the descriptor also names a day or a month of a
  year, which such a phrase then most likely counts from (left unread).

Nothing else is guessed: no seasons (the hemisphere is unknown), no bare weekdays, no
"recently" (an episode's fading salience already prefers the last day's). A descriptor that
names no period gives no time evidence at all.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.timecodes import micros

Array = npt.NDArray[Any]

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_ABBREVIATIONS = {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
_ABBREVIATIONS["sept"] = 9
_ANY_MONTH = "|".join(sorted({**_MONTHS, **_ABBREVIATIONS}, key=len, reverse=True))
_FULL_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_MONTH = rf"(?P<month>{_ANY_MONTH})\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"

# Longest forms first: a span matched by one is blanked before the shorter ones look.
_DAY_FORMS = (
    re.compile(r"\b(?P<year>\d{4})-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
)
_MONTH_FORM = re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)
_YEAR_FORM = re.compile(rf"(?<![\w.,$€£-]){_YEAR}(?!\w|[.,-]\d|%)")
_MONTH_ALONE = re.compile(rf"\b(?P<month>{_FULL_MONTH.title()})\b")
_MAY_CUES = frozenset(
    "in on of since until till by during through before after from last this next early late "
    "mid".split()
)

_UNITS = ("day", "week", "month", "year")
_NUMBERS = {
    word: number
    for number, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}
_NUMBERS.update({"a": 1, "an": 1})
_AGO = re.compile(
    rf"\b(?P<count>\d{{1,3}}|{'|'.join(_NUMBERS)})\s+(?P<unit>{'|'.join(_UNITS)})s?\s+ago\b",
    re.IGNORECASE,
)
_THIS_OR_LAST = re.compile(rf"\b(?P<which>this|last)\s+(?P<unit>{'|'.join(_UNITS[1:])})\b", re.I)
_DAY_WORD = re.compile(r"\b(?P<word>today|yesterday)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Periods:
    """Periods named by a descriptor: ``spans`` of ``[start, end)`` in microseconds since
    the epoch (UTC), and ``months`` of the year named without a year (1–12)."""

    spans: tuple[tuple[int, int], ...] = ()
    months: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.spans or self.months)

    def contain(self, moments: Array) -> Array:
        """Whether each moment (microseconds since the epoch, UTC) is in one of the periods."""
        moments = np.asarray(moments, dtype=np.int64)
        inside = np.zeros(len(moments), dtype=bool)
        for start, end in self.spans:
            inside |= (moments >= start) & (moments < end)
        if self.months:
            month = moments.astype("datetime64[us]").astype("datetime64[M]").astype(np.int64)
            inside |= np.isin(month % 12 + 1, sorted(self.months))
        return inside


def named_periods(text: str, now: datetime) -> Periods:
    """The periods ``text`` names; relative ones counted back from ``now`` (aware)."""
    spans: list[tuple[datetime, datetime]] = []
    remaining = text
    for form in _DAY_FORMS:
        remaining = _take(form, remaining, spans, _day_span)
    remaining = _take(_MONTH_FORM, remaining, spans, _month_span)
    relative: list[tuple[datetime, datetime]] = []
    remaining = _take(_AGO, remaining, relative, lambda m: _ago_span(m, now))
    remaining = _take(_THIS_OR_LAST, remaining, relative, lambda m: _this_or_last_span(m, now))
    remaining = _take(_DAY_WORD, remaining, relative, lambda m: _day_word_span(m, now))
    if not spans:
        # Beside a date ("last week, as mentioned on 6 November"), a relative phrase counts
        # from that date, not from now: it is left unread rather than read wrong.
        spans = relative
    remaining = _take(_YEAR_FORM, remaining, spans, _year_span)
    months = frozenset(
        _MONTHS[match["month"].lower()]
        for match in _MONTH_ALONE.finditer(remaining)
        if match["month"] != "May" or _follows_cue(remaining, match.start())
    )
    return Periods(tuple((micros(a), micros(b)) for a, b in spans), months)


def _take(
    form: re.Pattern[str],
    text: str,
    spans: list[tuple[datetime, datetime]],
    span_of: Any,
) -> str:
    """Note the span of every match of ``form`` that is a real date; the text with every
    match blanked (so a shorter form does not read a part of it again)."""
    for match in form.finditer(text):
        span = span_of(match)
        if span is not None:
            spans.append(span)
    return form.sub(lambda m: " " * len(m[0]), text)


def _month_number(word: str) -> int:
    if word.isdigit():
        return int(word)
    word = word.lower().rstrip(".")
    return _MONTHS.get(word) or _ABBREVIATIONS[word]


def _day_span(match: re.Match[str]) -> tuple[datetime, datetime] | None:
    try:
        day = datetime(
            int(match["year"]), _month_number(match["month"]), int(match["day"]), tzinfo=UTC
        )
    except ValueError:  # 31 February, month 13: not a date
        return None
    return day, day + timedelta(days=1)


def _month_span(match: re.Match[str]) -> tuple[datetime, datetime]:
    return _month_of(int(match["year"]), _month_number(match["month"]))


def _year_span(match: re.Match[str]) -> tuple[datetime, datetime]:
    year = int(match["year"])
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def _month_of(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _unit_containing(moment: datetime, unit: str) -> tuple[datetime, datetime]:
    """The calendar day, week (from Monday), month or year that contains ``moment``."""
    day = moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "day":
        return day, day + timedelta(days=1)
    if unit == "week":
        monday = day - timedelta(days=day.weekday())
        return monday, monday + timedelta(days=7)
    if unit == "month":
        return _month_of(day.year, day.month)
    return datetime(day.year, 1, 1, tzinfo=UTC), datetime(day.year + 1, 1, 1, tzinfo=UTC)


def _back(moment: datetime, count: int, unit: str) -> datetime | None:
    """``moment`` moved ``count`` units into the past; None before year 1."""
    moment = moment.astimezone(UTC)
    try:
        if unit == "day":
            return moment - timedelta(days=count)
        if unit == "week":
            return moment - timedelta(weeks=count)
        months = moment.year * 12 + moment.month - 1 - count * (12 if unit == "year" else 1)
        year, month = divmod(months, 12)
        day = min(moment.day, calendar.monthrange(year, month + 1)[1])
        return moment.replace(year=year, month=month + 1, day=day)
    except (OverflowError, ValueError):
        return None


def _ago_span(match: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    word = match["count"].lower()
    count = int(word) if word.isdigit() else _NUMBERS[word]
    unit = match["unit"].lower()
    then = _back(now, count, unit)
    return None if then is None else _unit_containing(then, unit)


def _this_or_last_span(match: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    unit = match["unit"].lower()
    then = _back(now, 1 if match["which"].lower() == "last" else 0, unit)
    return None if then is None else _unit_containing(then, unit)


def _day_word_span(match: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    then = _back(now, 1 if match["word"].lower() == "yesterday" else 0, "day")
    return None if then is None else _unit_containing(then, "day")


def _follows_cue(text: str, start: int) -> bool:
    words = text[:start].split()
    return bool(words) and words[-1].lower() in _MAY_CUES

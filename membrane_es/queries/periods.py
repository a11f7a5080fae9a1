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
* a range: ``between``/``from`` one of those ``and``/``to``/``until``/``through``/``-``
  another, from the first to the end of the second (a year given once serves both:
  ``between August 11 and August 15 2023``, ``from December to February 2024``); without any
  year, the months between, of any year;
* an open period: ``since`` one (from its start) or ``after`` one (from its end), up to the
  moment the read answers for;
* relative to the moment the read answers for (now, or its ``as_of``): ``today`` (and
  ``this morning``, ``this afternoon``, ``this evening``, ``tonight``), ``yesterday`` (and
  ``last night``), ``the day before yesterday``, ``last Friday`` (the latest Friday before
  today; ``this past Friday`` too), ``this``/``last`` ``weekend`` (Saturday and Sunday of
  this week or the week before), ``this``/``last`` ``week`` (weeks start on Monday),
  ``month`` or ``year``,
  and ``3 days ago``, ``two weeks ago``, ``a month ago``, ``a year ago`` (the day, week,
  month or year that many before); a vague count covers the numbers it is used for —
  ``a couple of days ago`` the days two and three back, ``a few`` two to five, ``several``
  three to seven (:data:`_VAGUE`); ``the past week``, ``in the last few months``, ``over
  the past two weeks`` (a stretch reaching up to now: from the day that many units back)
  — unless the descriptor also names a date, which such a phrase then most likely counts
  from (left unread).

Nothing else is guessed: no seasons (the hemisphere is unknown), no bare weekdays ("on
Monday": this week's, last week's or one long ago, as the story goes), no
"recently" (an episode's fading salience already prefers the last day's). A descriptor that
names no period gives no time evidence at all.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
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
_CAPITAL_MONTH = rf"(?P<month>{_FULL_MONTH.title()})"
_MONTH_ALONE = re.compile(rf"\b{_CAPITAL_MONTH}\b")
# A day of a month with no year names that day of any year; read as its month (of any year).
# Only capitalised month names: "may 5" could be a verb and a number.
_DAYS_OF_ANY_YEAR = (
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_CAPITAL_MONTH}\b"),
    re.compile(rf"\b{_CAPITAL_MONTH}\s+{_DAY}\b(?![:.]\d)"),
)
_RANGE_OPENS = re.compile(r"\b(?:between|from)\s+$", re.IGNORECASE)
_RANGE_JOINS = re.compile(r"\s*(?:and|to|until|till|through|-|–)\s*", re.IGNORECASE)
_OPEN_ENDED = re.compile(r"\b(?P<word>since|after)\s+$", re.IGNORECASE)
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
# The numbers a vague count is said for, fewest to most: "a couple" is two, loosely three;
# "a few" a small number more than one; "several" more than two but not many (dictionary
# senses, read generously so the count meant falls inside).
_VAGUE = {"couple": (2, 3), "few": (2, 5), "several": (3, 7)}
_COUNT = (
    r"(?P<count>\d{1,3}|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several|"
    rf"{'|'.join(_NUMBERS)})"
)
_AGO = re.compile(
    rf"\b{_COUNT}\s+(?P<unit>{'|'.join(_UNITS)})s?\s+ago\b",
    re.IGNORECASE,
)
# A stretch that reaches up to now: "the past two days", "the last few months", "the past
# week". "the last week" alone is left to _THIS_OR_LAST (the calendar week before this one).
_PAST = re.compile(
    rf"\bthe\s+(?:(?:past|last)\s+{_COUNT}|past)\s+(?P<unit>{'|'.join(_UNITS)})s?\b",
    re.IGNORECASE,
)
_THIS_OR_LAST = re.compile(rf"\b(?P<which>this|last)\s+(?P<unit>{'|'.join(_UNITS[1:])})\b", re.I)
_DAY_WORD = re.compile(
    r"\b(?P<word>today|tonight|this\s+(?:morning|afternoon|evening)|last\s+night|"
    r"(?:the\s+day\s+before\s+)?yesterday)\b",
    re.IGNORECASE,
)
_WEEKDAYS = tuple(name.lower() for name in calendar.day_name)  # Monday first, as weekday()
_LAST_WEEKDAY = re.compile(
    rf"\b(?:last|this\s+past)\s+(?P<day>{'|'.join(_WEEKDAYS)})\b", re.IGNORECASE
)
_WEEKEND = re.compile(r"\b(?P<which>this|last|this\s+past)\s+weekend\b", re.IGNORECASE)


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


@dataclass(frozen=True)
class _Mention:
    """A date the text names, at ``[start, end)`` in it: a year, a month, or a day of one;
    ``year`` None when it names none (``in June``, ``August 11``)."""

    start: int
    end: int
    year: int | None
    month: int | None = None
    day: int | None = None

    def span(self) -> tuple[datetime, datetime]:
        """The day, month or year it names (its year known)."""
        assert self.year is not None
        if self.month is None:
            return datetime(self.year, 1, 1, tzinfo=UTC), datetime(self.year + 1, 1, 1, tzinfo=UTC)
        if self.day is None:
            return _month_of(self.year, self.month)
        day = datetime(self.year, self.month, self.day, tzinfo=UTC)
        return day, day + timedelta(days=1)

    def key(self) -> tuple[int, int]:
        """Its place within a year, to tell which of two comes first."""
        return self.month or 1, self.day or 1


@lru_cache(maxsize=256)  # a read asks twice (shortlist, then ranking); agents repeat tasks
def named_periods(text: str, now: datetime) -> Periods:
    """The periods ``text`` names; relative ones counted back from ``now`` (aware)."""
    mentions: list[_Mention] = []
    remaining = text
    for form in (*_DAY_FORMS, _MONTH_FORM, *_DAYS_OF_ANY_YEAR):
        remaining = _note(form, remaining, mentions)
    relative: list[tuple[datetime, datetime]] = []
    remaining = _take(_AGO, remaining, relative, lambda m: _ago_span(m, now))
    remaining = _take(_PAST, remaining, relative, lambda m: _past_span(m, now))
    remaining = _take(_THIS_OR_LAST, remaining, relative, lambda m: _this_or_last_span(m, now))
    remaining = _take(_DAY_WORD, remaining, relative, lambda m: _day_word_span(m, now))
    remaining = _take(_LAST_WEEKDAY, remaining, relative, lambda m: _last_weekday_span(m, now))
    remaining = _take(_WEEKEND, remaining, relative, lambda m: _weekend_span(m, now))
    remaining = _note(_YEAR_FORM, remaining, mentions)
    for match in _MONTH_ALONE.finditer(remaining):
        if match["month"] != "May" or _follows_cue(remaining, match.start()):
            mentions.append(
                _Mention(match.start(), match.end(), None, _month_number(match["month"]))
            )
    spans, months = _combine(text, sorted(mentions, key=lambda m: m.start), now)
    if not mentions:
        # Beside a date ("last week, as mentioned on 6 November"), a relative phrase counts
        # from that date, not from now: it is left unread rather than read wrong.
        spans = relative
    return Periods(tuple((micros(a), micros(b)) for a, b in spans), frozenset(months))


def _note(form: re.Pattern[str], text: str, mentions: list[_Mention]) -> str:
    """Note every match of ``form`` that is a real date; the text with every match blanked
    (same length, so positions still point into the original)."""
    for match in form.finditer(text):
        fields = match.groupdict()
        year = int(fields["year"]) if fields.get("year") else None
        month = _month_number(fields["month"]) if fields.get("month") else None
        day = int(fields["day"]) if fields.get("day") else None
        if day is not None:
            try:  # a leap year, so 29 February of a year not given stands
                datetime(year or 2000, month or 1, day)
            except ValueError:  # 31 February, month 13: not a date
                continue
        mentions.append(_Mention(match.start(), match.end(), year, month, day))
    return form.sub(lambda m: " " * len(m[0]), text)


def _take(
    form: re.Pattern[str],
    text: str,
    spans: list[tuple[datetime, datetime]],
    span_of: Any,
) -> str:
    """Note the span of every match of ``form`` (relative phrases); the text with every match
    blanked."""
    for match in form.finditer(text):
        try:
            span = span_of(match)
        except (OverflowError, ValueError):  # it would end past the calendar's last day
            span = None
        if span is not None:
            spans.append(span)
    return form.sub(lambda m: " " * len(m[0]), text)


def _combine(
    text: str, mentions: list[_Mention], now: datetime
) -> tuple[list[tuple[datetime, datetime]], set[int]]:
    """The spans and months of the year the mentions name, in order: ``between``/``from`` one
    ``and``/``to`` another is the period from the first to the end of the second (a year
    given once serves both); ``since`` (from its start) or ``after`` (from its end) one is the
    period up to ``now``; any other stands alone."""
    spans: list[tuple[datetime, datetime]] = []
    months: set[int] = set()
    at = 0
    while at < len(mentions):
        first = mentions[at]
        before = text[: first.start]
        if at + 1 < len(mentions) and _RANGE_OPENS.search(before):
            second = mentions[at + 1]
            if _RANGE_JOINS.fullmatch(text[first.end : second.start]):
                spans_, months_ = _range(first, second)
                spans += spans_
                months |= months_
                at += 2
                continue
        opening = _OPEN_ENDED.search(before)
        if opening and first.year is not None:
            start = first.span()[0 if opening["word"].lower() == "since" else 1]
            if start < now:
                spans.append((start, now))
            at += 1
            continue
        if first.year is not None:
            spans.append(first.span())
        elif first.month is not None:
            months.add(first.month)
        at += 1
    return spans, months


def _range(first: _Mention, second: _Mention) -> tuple[list[tuple[datetime, datetime]], set[int]]:
    """From ``first`` to the end of ``second``; a year given once serves both (the earlier
    one's year is the one before when its month comes later: ``from December to February
    2024``). Without any year, the months from one to the other, of any year."""
    if first.year is None and second.year is not None:
        year = second.year - (first.key() > second.key())
        first = _Mention(first.start, first.end, year, first.month, first.day)
    elif second.year is None and first.year is not None:
        year = first.year + (second.key() < first.key())
        second = _Mention(second.start, second.end, year, second.month, second.day)
    if first.year is None or second.year is None:
        if first.month is None or second.month is None:
            return [], set()
        count = (second.month - first.month) % 12 + 1
        return [], {(first.month - 1 + step) % 12 + 1 for step in range(count)}
    start, end = first.span()[0], second.span()[1]
    if end <= start:
        return [first.span(), second.span()], set()
    return [(start, end)], set()


def _month_number(word: str) -> int:
    if word.isdigit():
        return int(word)
    word = word.lower().rstrip(".")
    return _MONTHS.get(word) or _ABBREVIATIONS[word]


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


def _counts(word: str | None) -> tuple[int, int]:
    """The fewest and the most a count says: one number, or a vague count's range; one
    unit when no count is said ("the past week")."""
    if word is None:
        return 1, 1
    words = word.lower().split()
    if len(words) == 1 and words[0].isdigit():
        return int(words[0]), int(words[0])
    if len(words) == 1 and words[0] in _NUMBERS:
        return _NUMBERS[words[0]], _NUMBERS[words[0]]
    vague = next(w for w in words if w in _VAGUE)
    return _VAGUE[vague]


def _ago_span(match: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    """The units that many back: from the furthest a vague count says to the nearest."""
    fewest, most = _counts(match["count"])
    unit = match["unit"].lower()
    furthest, nearest = _back(now, most, unit), _back(now, fewest, unit)
    if furthest is None or nearest is None:
        return None
    return _unit_containing(furthest, unit)[0], _unit_containing(nearest, unit)[1]


def _past_span(match: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    """From the day that many units back (the most a vague count says) up to now."""
    _, most = _counts(match["count"])
    then = _back(now, most, match["unit"].lower())
    if then is None:
        return None
    return _unit_containing(then, "day")[0], now + timedelta(microseconds=1)


def _this_or_last_span(match: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    unit = match["unit"].lower()
    then = _back(now, 1 if match["which"].lower() == "last" else 0, unit)
    return None if then is None else _unit_containing(then, unit)


def _day_word_span(match: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    word = " ".join(match["word"].lower().split())
    # Last night is yesterday's (a late hour past midnight is told as "last night" too, but
    # the evening is most of it); this morning, afternoon and evening are today's.
    days = 1 if word in ("yesterday", "last night") else 2 if word.endswith("yesterday") else 0
    then = _back(now, days, "day")
    return None if then is None else _unit_containing(then, "day")


def _last_weekday_span(match: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    """The latest such weekday before today ("last Friday" said on a Friday is a week ago)."""
    today = now.astimezone(UTC)
    days = (today.weekday() - _WEEKDAYS.index(match["day"].lower()) - 1) % 7 + 1
    then = _back(today, days, "day")
    return None if then is None else _unit_containing(then, "day")


def _weekend_span(match: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    """Saturday and Sunday of this week ("this weekend"), or of the week before ("last
    weekend", "this past weekend": on a Monday, the one just gone; weeks start on Monday)."""
    week = _back(now, 0 if match["which"].lower() == "this" else 1, "week")
    if week is None:
        return None
    monday, next_monday = _unit_containing(week, "week")
    return monday + timedelta(days=5), next_monday


def _follows_cue(text: str, start: int) -> bool:
    words = text[:start].split()
    return bool(words) and words[-1].lower() in _MAY_CUES

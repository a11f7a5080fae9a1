"""The periods a task descriptor names (:mod:`membrane_es.queries.periods`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from membrane_es.projections.timecodes import from_micros, micros
from membrane_es.queries.periods import Periods, named_periods

NOW = datetime(2024, 3, 14, 15, 30, tzinfo=UTC)  # a Thursday


def day(year: int, month: int, number: int) -> datetime:
    return datetime(year, month, number, tzinfo=UTC)


def spans(text: str, now: datetime = NOW) -> list[tuple[datetime, datetime]]:
    return [(from_micros(a), from_micros(b)) for a, b in named_periods(text, now).spans]


@pytest.mark.parametrize(
    "text",
    [
        "what did Gina find on 1 February, 2023?",
        "what did Gina find on 1st of February 2023?",
        "what did Gina find on February 1, 2023?",
        "what did Gina find on Feb. 1st 2023?",
        "what did Gina find on 2023-02-01?",
        "WHAT DID GINA FIND ON 1 FEBRUARY 2023",
    ],
)
def test_a_day(text: str) -> None:
    assert spans(text) == [(day(2023, 2, 1), day(2023, 2, 2))]


@pytest.mark.parametrize("text", ["a setback in October 2023", "in Oct, 2023", "october of 2023"])
def test_a_month_of_a_year(text: str) -> None:
    assert spans(text) == [(day(2023, 10, 1), day(2023, 11, 1))]


def test_december_ends_with_the_year() -> None:
    assert spans("donations in December 2023") == [(day(2023, 12, 1), day(2024, 1, 1))]


def test_a_year() -> None:
    assert spans("beaches visited in 2023?") == [(day(2023, 1, 1), day(2024, 1, 1))]


@pytest.mark.parametrize(
    "text", ["it cost $2023", "12023 rows", "2023.5 units", "grew 2023%", "order 2023-17", "v2023"]
)
def test_numbers_that_are_not_years(text: str) -> None:
    assert not named_periods(text, NOW)


def test_a_month_named_alone_is_that_month_of_any_year() -> None:
    periods = named_periods("When did Melanie go camping in June?", NOW)

    assert periods.spans == () and periods.months == {6}
    moments = [day(2019, 6, 30), day(2023, 6, 1), day(2023, 7, 1), day(2023, 5, 31)]
    inside = periods.contain(np.array([micros(m) for m in moments]))
    assert inside.tolist() == [True, True, False, False]


@pytest.mark.parametrize(
    "text", ["may I ask what we planned", "May I ask what we planned", "we march on", "a may tree"]
)
def test_verbs_that_spell_months_are_not_months(text: str) -> None:
    assert not named_periods(text, NOW)


@pytest.mark.parametrize("text", ["what happened in May", "since May we have", "last March"])
def test_months_after_a_cue_or_capitalised(text: str) -> None:
    assert named_periods(text, NOW).months


def test_a_day_that_does_not_exist_names_nothing() -> None:
    assert not named_periods("on 31 February 2023", NOW)


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("what did we decide today", day(2024, 3, 14), day(2024, 3, 15)),
        ("what did Joanna write yesterday", day(2024, 3, 13), day(2024, 3, 14)),
        ("the day before yesterday", day(2024, 3, 12), day(2024, 3, 13)),
        ("what did we decide this morning", day(2024, 3, 14), day(2024, 3, 15)),
        ("plans for tonight", day(2024, 3, 14), day(2024, 3, 15)),
        ("what did I eat last night", day(2024, 3, 13), day(2024, 3, 14)),
        ("what did I cook last Friday", day(2024, 3, 8), day(2024, 3, 9)),
        ("last Wednesday", day(2024, 3, 13), day(2024, 3, 14)),
        ("last Thursday", day(2024, 3, 7), day(2024, 3, 8)),  # said on a Thursday
        ("this past Monday", day(2024, 3, 11), day(2024, 3, 12)),
        ("What game did I finally beat last weekend?", day(2024, 3, 9), day(2024, 3, 11)),
        ("this past weekend", day(2024, 3, 9), day(2024, 3, 11)),
        ("plans for this weekend", day(2024, 3, 16), day(2024, 3, 18)),
        ("notes from this week", day(2024, 3, 11), day(2024, 3, 18)),  # from Monday
        ("what broke last week", day(2024, 3, 4), day(2024, 3, 11)),
        ("our plans this month", day(2024, 3, 1), day(2024, 4, 1)),
        ("the outage last month", day(2024, 2, 1), day(2024, 3, 1)),
        ("the trip last year", day(2023, 1, 1), day(2024, 1, 1)),
        ("3 days ago", day(2024, 3, 11), day(2024, 3, 12)),
        ("two weeks ago", day(2024, 2, 26), day(2024, 3, 4)),
        ("a month ago", day(2024, 2, 1), day(2024, 3, 1)),
        ("where did she move from 4 years ago", day(2020, 1, 1), day(2021, 1, 1)),
        # a vague count: every number it is said for (a couple: 2-3, a few: 2-5, several: 3-7)
        ("what did I cook a couple of days ago", day(2024, 3, 11), day(2024, 3, 13)),
        ("a couple days ago", day(2024, 3, 11), day(2024, 3, 13)),
        ("a few days ago", day(2024, 3, 9), day(2024, 3, 13)),
        ("several weeks ago", day(2024, 1, 22), day(2024, 2, 26)),
    ],
)
def test_relative_to_the_moment_answered_for(text: str, start: datetime, end: datetime) -> None:
    assert spans(text) == [(start, end)]


AFTER_NOW = NOW + timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("what did I buy in the past week", day(2024, 3, 7)),
        ("over the past two weeks", day(2024, 2, 29)),
        ("babies born in the last few months", day(2023, 10, 14)),  # a few: up to five
        ("the past couple of years", day(2021, 3, 14)),
        ("the last 10 days", day(2024, 3, 4)),
    ],
)
def test_a_stretch_up_to_now_starts_that_many_units_back(text: str, start: datetime) -> None:
    assert spans(text) == [(start, AFTER_NOW)]


def test_the_last_week_alone_is_the_calendar_week_before_this_one() -> None:
    assert spans("what broke the last week") == [(day(2024, 3, 4), day(2024, 3, 11))]


def test_last_weekend_said_on_a_monday_is_the_one_just_gone() -> None:
    assert spans("last weekend", day(2024, 3, 11)) == [(day(2024, 3, 9), day(2024, 3, 11))]


@pytest.mark.parametrize("text", ["what time did I reach the clinic on Monday?", "on Fridays"])
def test_a_bare_weekday_names_no_period(text: str) -> None:
    assert not named_periods(text, NOW)


def test_a_month_back_from_its_last_day_lands_in_the_month_before() -> None:
    assert spans("a month ago", day(2024, 3, 31)) == [(day(2024, 2, 1), day(2024, 3, 1))]


def test_beside_a_date_a_relative_phrase_is_left_unread() -> None:
    text = "What was Tim's writing issue last week, as mentioned on November 6, 2023?"

    assert spans(text) == [(day(2023, 11, 6), day(2023, 11, 7))]


def test_several_periods() -> None:
    periods = named_periods("in 2021 and on 2023-05-02, or in June", NOW)

    assert sorted(periods.spans) == [
        (micros(day(2021, 1, 1)), micros(day(2022, 1, 1))),
        (micros(day(2023, 5, 2)), micros(day(2023, 5, 3))),
    ]
    assert periods.months == {6}


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        (
            "where was John between August 11 and August 15 2023?",
            day(2023, 8, 11),
            day(2023, 8, 16),
        ),
        ("from 3 March to 10 March 2024", day(2024, 3, 3), day(2024, 3, 11)),
        ("from December to February 2024", day(2023, 12, 1), day(2024, 3, 1)),
        ("from October 2022 until January", day(2022, 10, 1), day(2023, 2, 1)),
        ("between 2019 and 2021", day(2019, 1, 1), day(2022, 1, 1)),
        ("from 2023-01-30 - 2023-02-02", day(2023, 1, 30), day(2023, 2, 3)),
        ("what changed since 1 March 2024?", day(2024, 3, 1), NOW),
        ("what changed after 1 March 2024?", day(2024, 3, 2), NOW),
        ("anything after February 2024", day(2024, 3, 1), NOW),
    ],
)
def test_ranges_and_open_periods(text: str, start: datetime, end: datetime) -> None:
    assert spans(text) == [(start, end)]


def test_a_range_without_years_is_months_of_any_year() -> None:
    periods = named_periods("what did we plan from November to February?", NOW)

    assert periods.spans == () and periods.months == {11, 12, 1, 2}


def test_a_range_backwards_is_its_two_ends() -> None:
    assert spans("between 2024 and 2021") == [
        (day(2024, 1, 1), day(2025, 1, 1)),
        (day(2021, 1, 1), day(2022, 1, 1)),
    ]


def test_since_a_moment_still_to_come_names_nothing() -> None:
    assert not named_periods("since 2030", NOW)


def test_a_day_of_any_year_is_read_as_its_month() -> None:
    assert named_periods("the party on August 11", NOW).months == {8}
    assert named_periods("on the 3rd of March", NOW).months == {3}
    assert not named_periods("at 11:30 on may 5", NOW)


@pytest.mark.parametrize("text", ["", "deploy the api", "the 90s", "in summer", "on Friday"])
def test_no_period(text: str) -> None:
    periods = named_periods(text, NOW)

    assert not periods and periods == Periods()
    assert not periods.contain(np.array([micros(NOW)])).any()


@pytest.mark.parametrize("text", ["today", "this month", "this year", "this weekend", "tonight"])
def test_a_period_ending_past_the_calendars_last_day_is_left_unread(text: str) -> None:
    assert named_periods(text, datetime(9999, 12, 31, 23, tzinfo=UTC)) == Periods()

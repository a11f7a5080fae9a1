"""A question that asks *when* is answered by a memory that says when.

"When did Caroline go to the support group?" is answered by the turn where she says she went
"yesterday", not by the ten turns that talk about the group: people place what they tell in
time as they tell it ("last week", "on Friday", "two years ago"), and a question about when
is a question about what was placed. So when a descriptor asks when (:func:`asks_when`), a
record whose own words place something in time (:data:`TIME_WORDS`) has one more kind of
evidence (:mod:`membrane_es.queries.ranking`) — evidence that it fits the question's form,
never enough alone to return a record that nothing else points to.

Both are English. The words are those that place an event relative to when it is told or on
the calendar; "day", "time", "just" and "since" are left out (said of everything).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.text_index import TextIndex
from membrane_es.projections.tokens import query_terms

Array = npt.NDArray[Any]

_ASKS_WHEN = re.compile(
    r"^\s*when\b"
    r"|\bwhen\s+(?:did|do|does|was|were|is|are|will|has|have|had)\b"
    r"|\b(?:what|which)\s+(?:date|day|year|month|week|time)\b"
    r"|\bhow\s+long\s+ago\b"
    r"|\bhow\s+(?:many|much)\s+(?:days|weeks|months|years|time)\b",
    re.IGNORECASE,
)

TIME_WORDS = (
    "yesterday today tonight tomorrow ago last next recently weekend week weeks month "
    "months year years monday tuesday wednesday thursday friday saturday sunday january "
    "february march april may june july august september october november december"
)


def asks_when(descriptor: str) -> bool:
    """Whether ``descriptor`` asks when something happened (or how long ago)."""
    return bool(_ASKS_WHEN.search(descriptor))


def says_when(text: TextIndex, rows: Array, size: int) -> Array:
    """1 for each of ``rows`` (ascending) whose own words place something in time, else 0."""
    out = np.zeros(len(rows), dtype=np.float64)
    if not len(rows):
        return out
    # A turn's own words only: what it borrows from the turn it was said after is that
    # turn's saying when, not its own.
    for _, _, own, _ in text.term_postings_with_own(query_terms(TIME_WORDS), size):
        out[np.isin(rows, own)] = 1.0
    return out

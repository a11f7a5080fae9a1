"""A task about how two things relate: the two things it names, to be searched on their own.

"Which trip did I take first, the solo trip to Europe or the family road trip across the
Southwest?" and "How many months passed between the completion of my degree and the
submission of my thesis?" ask how two memories relate — which came first, how long lay
between them — and are answered by both. Searched as one task, the memory that matches more
of the question's words and meaning takes every place near the top (its neighbours, the
replies that repeat it), and the other is pushed down the list. So retrieval also searches
each of the two on its own and takes the rankings in turn, place by place
(:func:`membrane_es.queries.retrieve.rank`, :func:`in_turn`): the whole task's best, then
each thing's best, then the second of each, and so on; each record keeps the score and
evidence of the search that found it.

Two forms are read, both at the end of the task, as English asks them:

* ``…, A or B?`` — a choice offered after a comma ("Which did I buy first, the necklace or
  the photo album?"); without the comma "or" joins words of one thing ("replace or fix",
  "publications or conferences"), which are not split;
* ``… between A and B?`` — unless either is a period (``between May and June 2023`` names
  one period: :mod:`membrane_es.queries.periods`).

Each thing must hold a word the engine searches by (not a stop word:
:mod:`membrane_es.projections.tokens`);
a leading article or possessive is dropped (``the``, ``a``, ``an``, ``my``, ``our``, ``your``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import fields, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.tokens import query_terms
from membrane_es.queries.candidates import Candidates
from membrane_es.queries.explain import Evidence
from membrane_es.queries.periods import named_periods

if TYPE_CHECKING:
    from membrane_es.queries.retrieve import Ranking

Array = npt.NDArray[Any]

_LEAD = re.compile(r"^(?:(?:the|a|an|my|our|your) )?", re.I)
_OR = re.compile(r" or ", re.I)
_AND = re.compile(r" and ", re.I)
_BETWEEN = re.compile(r"\bbetween ", re.I)
# Any moment serves to ask whether a phrase names a period at all.
_SOME_MOMENT = datetime(2000, 1, 1, tzinfo=UTC)


def named_things(descriptor: str) -> tuple[str, ...]:
    """The two things a task relates (see above), or none. Each form is read in one pass
    over the task's words (no backtracking: a task may be long)."""
    text = " ".join(descriptor.split())
    _, comma, choice = text.rpartition(",")
    candidates = [_two(choice, _OR)] if comma else []
    betweens = list(_BETWEEN.finditer(text))
    if betweens:
        candidates.append(_two(text[betweens[-1].end() :], _AND))
    for things in candidates:
        if things and _are_things(things):
            return things
    return ()


def _two(text: str, joint: re.Pattern[str]) -> tuple[str, ...]:
    """``text``, which ends the task, split by ``joint`` into exactly two phrases, each
    without a leading article or possessive; none if it is not two, or holds more than one
    clause."""
    body = text.strip().rstrip("?.! ")
    if "?" in body or ";" in body:
        return ()
    parts = joint.split(body)
    if len(parts) != 2:
        return ()
    return tuple(_LEAD.sub("", part.strip()) for part in parts)


def _are_things(things: tuple[str, ...]) -> bool:
    """Both hold a word searched by, and neither names a period."""
    return all(query_terms(thing) for thing in things) and not any(
        named_periods(thing, _SOME_MOMENT) for thing in things
    )


def in_turn(first: Ranking, others: list[Ranking], limit: int) -> Ranking:
    """The rankings taken place by place — ``first``'s best, then each other's best, then
    the second of each — each record once, at its first place, cut to ``limit`` (0: all).
    Each record keeps the score and evidence of the ranking it was taken from; the
    selection is ``first``'s."""
    rankings = [first, *others]
    picks: list[tuple[int, int]] = []  # (ranking, index in it)
    seen: set[int] = set()
    for place in range(max(len(r.ranked) for r in rankings)):
        for which, ranking in enumerate(rankings):
            if place < len(ranking.ranked):
                row = int(ranking.ranked.rows[place])
                if row not in seen:
                    seen.add(row)
                    picks.append((which, place))
    # A redacted record comes after every record read in full, as in each ranking taken.
    picks.sort(key=lambda pick: bool(rankings[pick[0]].ranked.redacted[pick[1]]))
    if limit > 0:
        picks = picks[:limit]

    def gathered(column: Callable[[Ranking], Array | None], missing: float) -> Array | None:
        columns = [column(r) for r in rankings]
        if all(values is None for values in columns):
            return None
        return np.array(
            [
                missing if (values := columns[which]) is None else values[place]
                for which, place in picks
            ]
        )

    def taken(column: Callable[[Candidates], Array]) -> Array:
        return np.array(
            [column(rankings[which].ranked)[place] for which, place in picks],
            dtype=column(first.ranked).dtype,
        )

    ranked = Candidates(
        taken(lambda c: c.rows), taken(lambda c: c.salience), taken(lambda c: c.redacted)
    )
    evidence = None
    if any(r.evidence is not None for r in rankings):
        # Every column as its ranking had it (none: NaN, or passage 0), but the score: what
        # the record was ordered by, its salience where its ranking had no evidence.
        columns = {
            column.name: gathered(
                partial(_evidence_of, column.name), 0 if column.name == "passage" else np.nan
            )
            for column in fields(Evidence)
            if column.name != "score"
        }
        evidence = Evidence(score=_scores_of(rankings, picks), **columns)
    scores = None if first.scores is None else _scores_of(rankings, picks)
    passages = gathered(lambda r: r.passages, 0)
    return replace(first, ranked=ranked, scores=scores, evidence=evidence, passages=passages)


def _evidence_of(name: str, ranking: Ranking) -> Array | None:
    return None if ranking.evidence is None else getattr(ranking.evidence, name)


def _scores_of(rankings: list[Ranking], picks: list[tuple[int, int]]) -> Array:
    """What each pick was ordered by in its own ranking (its salience when that one had no
    evidence to score by)."""
    taken = []
    for which, place in picks:
        ranking = rankings[which]
        scores = ranking.scores if ranking.scores is not None else ranking.ranked.salience
        taken.append(float(scores[place]))
    return np.array(taken, dtype=np.float64)

"""The multi-solution selector (spec §3.4): which competence or plan graph to use.

Every candidate scores the mean of three signals in [0, 1]:

* **applicability**: the record's confidence; or, when there is a query vector and the record
  has a stored vector, their cosine similarity mapped to [0, 1] as ``(cos + 1) / 2``;
* **success rate**: successes / (successes + failures) of a competence, 1 − failure rate of
  a plan graph that has run; 0.5 when unknown;
* **recency**: ``0.5 ^ (days since last reinforced / 30)``; 1 when that moment is in the
  future; 0.5 when it is unknown.

A redacted candidate (its payload is withheld from the caller) scores 0.5 outright. The
selection's confidence is the normalised gap between the two best scores,
``(best − second) / best`` (the best's own score, capped at 1, when there is one candidate;
0 when there are none), and ``needs_more`` says it fell below the engine's threshold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.timecodes import micros
from membrane_es.queries.ranking import order

Array = npt.NDArray[Any]

DEFAULT_THRESHOLD = 0.7
NEUTRAL = 0.5
RECENCY_HALF_LIFE_SECONDS = 30 * 86_400
_ZERO_TIME = micros(datetime(1, 1, 1, tzinfo=UTC))  # the reference's "never"


def applicability(confidence: Array, similarity: Array | None) -> Array:
    """Confidence, or the mapped similarity where a record has a vector (``similarity`` is
    NaN for records without one)."""
    if similarity is None:
        return np.asarray(confidence, dtype=np.float64)
    mapped = np.clip((np.nan_to_num(similarity, nan=0.0) + 1.0) / 2.0, 0.0, 1.0)
    return np.where(np.isnan(similarity), confidence, mapped)


def success_rate(signal: Array) -> Array:
    """The stored success signal, 0.5 where there is none (NaN)."""
    return np.where(np.isnan(signal), NEUTRAL, signal).astype(np.float64)


def recency(last_reinforced: Array, at: int) -> Array:
    """Exponential recency with a 30-day half-life, from microsecond timestamps."""
    last = np.asarray(last_reinforced, dtype=np.int64)
    elapsed = np.maximum(at - last, 0) / 1e6
    decayed = np.power(0.5, elapsed / RECENCY_HALF_LIFE_SECONDS)
    out = np.where(last > at, 1.0, decayed)
    return np.where(last <= _ZERO_TIME, NEUTRAL, out)


def scores(applicable: Array, success: Array, recent: Array, redacted: Array) -> Array:
    """The composite score of each candidate."""
    composite = (applicable + success + recent) / 3.0
    return np.where(redacted, NEUTRAL, composite)


@dataclass(frozen=True)
class Selection:
    """The selector's verdict over candidates given as arrays: ``ranked`` indexes them best
    first, ``scores`` is in candidate order."""

    ranked: Array
    scores: Array
    confidence: float
    needs_more: bool


def select(
    composite: Array,
    salience: Array,
    created_at: Array,
    id_of: Callable[[int], str],
    threshold: float = DEFAULT_THRESHOLD,
) -> Selection:
    """Rank candidates by score (ties as everywhere: salience, newer, id) and judge the gap."""
    if len(composite) == 0:
        return Selection(np.zeros(0, dtype=np.int64), composite, 0.0, True)
    ranked = order(composite, salience, created_at, id_of)
    best = float(composite[ranked[0]])
    if len(ranked) == 1:
        confidence = min(best, 1.0)
    else:
        second = float(composite[ranked[1]])
        confidence = (best - second) / best if best > 0 else 0.0
    return Selection(ranked, composite, confidence, confidence < threshold)

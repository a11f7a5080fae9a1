"""Salience over time: computed from a base value and a clock, never written back.

``s(t) = max(floor, base · 2^(−(t − anchor) / half_life))``, where ``anchor`` is the moment
``base`` was last set (creation, reinforcement, penalty). A base of 0 (retracted) stays 0,
and a record past its ``max_age_seconds`` reads 0 without the floor, as in the reference.
A faded record is still a memory: decay orders, it never removes (a salience that
underflows to 0 stays visible; only a penalty to nothing, ``max_age_seconds`` or retraction
take a record out of active reads).
Because nothing is rewritten, decay never compounds and reading at any past moment is exact.
Pinning freezes salience at its value when pinned; unpinning lets it decay again from there.
"""

from __future__ import annotations

import math
from datetime import datetime

from membrane_es.schema.enums import MemoryType
from membrane_es.schema.records import DecayProfile

MAX_SALIENCE_AFTER_REINFORCE = 1.0

DAY = 86_400
# Half-lives of the records the engine makes itself (capture, ingestion, entities, derived
# facts), chosen for agent memory that lives for months. An episode's salience says how much
# it belongs to what is going on now: it fades over a day (the reference: an hour), so the
# last day's turns and events come first among equally good matches, and older ones are
# ranked by their match alone — all alike faded, none gone. A half-life of a month made
# recency a prior spanning months instead: a turn from March lost 30 % of its match to any
# turn from last week, whatever was asked. The state of a task fades over a week; facts and
# the things they are about over a year. The reference deletes what falls below 0.001 (a
# captured turn is gone after about 45 days there); here decay only ranks (see
# :meth:`membrane_es.projections.record_table.RecordTable.hidden`), and reinforcing a
# faded record brings it back.
ENGINE_HALF_LIFE: dict[MemoryType, int] = {
    MemoryType.EPISODIC: DAY,
    MemoryType.WORKING: 7 * DAY,
    MemoryType.SEMANTIC: 365 * DAY,
    MemoryType.ENTITY: 365 * DAY,
    MemoryType.COMPETENCE: 365 * DAY,
    MemoryType.PLAN_GRAPH: 365 * DAY,
}


def engine_profile(memory_type: MemoryType) -> DecayProfile:
    """The decay profile the engine gives a record of this type that it makes itself."""
    return DecayProfile(half_life_seconds=ENGINE_HALF_LIFE[memory_type])


def salience_at(
    base: float,
    anchor: datetime,
    created_at: datetime,
    profile: DecayProfile,
    at: datetime,
    *,
    pinned: bool = False,
) -> float:
    """The salience a record with this base and profile has at moment ``at``.

    A pinned record does not decay: it keeps the base it had when it was pinned.
    """
    if base <= 0.0:
        return 0.0
    if pinned:
        return base
    if profile.max_age_seconds > 0 and (at - created_at).total_seconds() >= profile.max_age_seconds:
        return 0.0
    # At (or before) the moment the base was set nothing has decayed: the base as it is,
    # exactly what the formula gives for no time elapsed. The common case of a record
    # viewed at its own event (the change feed, history), without the arithmetic.
    if at <= anchor or profile.half_life_seconds <= 0:
        return max(base, profile.min_salience)
    elapsed = (at - anchor).total_seconds()
    decayed = base * math.exp(-elapsed * math.log(2) / profile.half_life_seconds)
    if not math.isfinite(decayed):
        return profile.min_salience
    return max(decayed, profile.min_salience)


def reinforced(current: float, profile: DecayProfile) -> float:
    """The new base after a reinforcement: current plus the record's gain, capped at 1."""
    return min(current + profile.reinforcement_gain, MAX_SALIENCE_AFTER_REINFORCE)


def penalized(current: float, amount: float, profile: DecayProfile) -> float:
    """The new base after a penalty: current minus amount, never below the floor."""
    return max(current - amount, profile.min_salience)

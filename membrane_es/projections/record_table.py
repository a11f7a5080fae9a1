"""The record table: one row per record, numpy columns, and the timeline of its state.

Content columns (type, sensitivity, scope, creation, decay profile, confidence, selector
signals) are written once, when the record's ``Created`` event arrives. State columns (the
salience base and the moment it was set, pinning, revision status) change with later events;
every change is also appended to a timeline, with periodic full checkpoints, so the state of
*every* record at any past moment is one checkpoint plus the changes after it (DESIGN §2).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
import numpy.typing as npt

from membrane_es.aggregates.identity import record_key
from membrane_es.projections.partitions import ScopePartitions
from membrane_es.projections.past_state import PastState
from membrane_es.projections.timecodes import micros
from membrane_es.schema.enums import DeletionPolicy, MemoryType, RevisionStatus, Sensitivity
from membrane_es.schema.payloads import CompetencePayload, PlanGraphPayload, SemanticPayload
from membrane_es.schema.records import MemoryRecord

TYPES: tuple[MemoryType, ...] = tuple(MemoryType)
TYPE_CODE = {t: i for i, t in enumerate(TYPES)}
LN2 = math.log(2)

STATUS_NONE, STATUS_ACTIVE, STATUS_CONTESTED, STATUS_RETRACTED = 0, 1, 2, 3
_SENSITIVITY_LEVEL = {s.value: s.level for s in Sensitivity}
_STATUS_CODE = {
    "": STATUS_NONE,
    RevisionStatus.ACTIVE.value: STATUS_ACTIVE,
    RevisionStatus.CONTESTED.value: STATUS_CONTESTED,
    RevisionStatus.RETRACTED.value: STATUS_RETRACTED,
}

# Columns fixed at creation, and columns that change; (name, dtype).
CONTENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("type", "i1"),
    ("sensitivity", "i1"),
    ("scope", "i4"),
    ("tx_time", "i8"),  # when the Created event was recorded (transaction time)
    ("created_at", "i8"),  # the record's own created_at
    ("confidence", "f4"),
    ("half_life", "f8"),
    ("floor", "f8"),
    ("max_age", "f8"),
    ("auto_prune", "?"),
    ("success", "f4"),  # competence success rate / plan 1 - failure rate; NaN if unknown
    ("valid_from", "i8"),  # a semantic fact's validity window [from, until); open bounds are
    ("valid_until", "i8"),  # OPEN_START / OPEN_END (every other type: always open)
)
STATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("base", "f8"),
    ("anchor", "i8"),
    ("last_reinforced", "i8"),
    ("updated", "i8"),
    ("pinned", "?"),
    ("retracted", "?"),
    ("status", "i1"),
)

STATE_NAMES: tuple[str, ...] = tuple(name for name, _ in STATE_COLUMNS)
CONTENT_NAMES: tuple[str, ...] = tuple(name for name, _ in CONTENT_COLUMNS)
# Up to this many rows are written value by value: cheaper than making an array per column
# (one write of the engine is usually one event).
FEW_ROWS = 4

Array = npt.NDArray[Any]

OPEN_START = int(np.iinfo(np.int64).min)
OPEN_END = int(np.iinfo(np.int64).max)


@dataclass
class State:
    """State columns of the first ``size`` rows at one moment: arrays, or columns computed on
    demand (:class:`~membrane_es.projections.past_state.PastState`); either way indexed by
    rows or by a slice."""

    size: int
    columns: Mapping[str, Any]


class RecordTable:
    """Rows in creation order; ``row_of`` maps record ids to rows."""

    def __init__(self, capacity: int = 1024) -> None:
        self.size = 0
        self.ids: list[str] = []
        self.row_of: dict[str, int] = {}
        self.row_of_key = KeyRows(self.row_of)  # by aggregate id, for events
        self.partitions = ScopePartitions()  # rows by scope, for scoped reads
        self.scope_names: list[str] = [""]
        self.scope_ids: dict[str, int] = {"": 0}
        self.content = {n: np.zeros(capacity, dtype=d) for n, d in CONTENT_COLUMNS}
        self.state = {n: np.zeros(capacity, dtype=d) for n, d in STATE_COLUMNS}
        self.timeline = Timeline()
        # Rows of some types, by the type codes asked for: (rows covered, those rows). A
        # row's type never changes, so each read adds only the rows written since.
        self._typed: dict[tuple[int, ...], tuple[int, Array]] = {}

    # --- writes (called by the read model, in log order) ---------------------------------

    def register(self, record_id: str, key: UUID | None = None) -> int:
        """A row for a new record (its columns still to be written); ``key`` is its aggregate
        id when the caller knows it."""
        if self.size == len(self.content["type"]):
            self._grow()
        row = self.size
        self.size += 1
        self.ids.append(record_id)
        self.row_of[record_id] = row
        self.row_of_key.note(record_id, row, key)
        return row

    def content_values(
        self, record: MemoryRecord, tx_time: int, tx_moment: datetime | None = None
    ) -> tuple[Any, ...]:
        """The record's content columns, in ``CONTENT_COLUMNS`` order (registers its scope).
        ``tx_moment``: ``tx_time`` as a datetime, if known (saves converting equal times)."""
        decay = record.lifecycle.decay
        valid_from, valid_until = _validity_window(record)
        created = record.created_at
        return (
            TYPE_CODE[record.type],
            _SENSITIVITY_LEVEL[record.sensitivity],
            self.scope_id(record.scope),
            tx_time,
            _micros_or(created, tx_time, tx_moment) if created else tx_time,
            record.confidence,
            decay.half_life_seconds,
            decay.min_salience,
            decay.max_age_seconds,
            record.lifecycle.deletion_policy is DeletionPolicy.AUTO_PRUNE,
            _success_signal(record),
            valid_from,
            valid_until,
        )

    def rows_of_types(self, codes: Array, below: int) -> Array:
        """The rows under ``below`` (ascending) whose type is one of ``codes``: kept between
        reads and extended by the rows written since, so a read of a large store does not
        pass over every row's type."""
        key = tuple(sorted(int(code) for code in codes))
        covered, rows = self._typed.get(key, (0, np.zeros(0, dtype=np.int64)))
        if below > covered:
            added = covered + np.flatnonzero(np.isin(self.content["type"][covered:below], key))
            covered, rows = below, np.concatenate([rows, added])
            self._typed[key] = (covered, rows)  # one assignment: a concurrent reader sees either
        if below >= covered:
            return rows
        return rows[: int(np.searchsorted(rows, below))]

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows in all (growing by doubling, as appends do)."""
        while rows > len(self.content["type"]):
            self._grow()

    def write_content(self, first: int, values: list[tuple[Any, ...]]) -> None:
        """Write the content columns of rows ``first, first + 1, …`` (one tuple per row, as
        :meth:`content_values` gives), column at a time."""
        if not values:
            return
        if len(values) <= FEW_ROWS:
            arrays = [self.content[name] for name in CONTENT_NAMES]
            for row, row_values in enumerate(values, first):
                for array, value in zip(arrays, row_values, strict=True):
                    array[row] = value
            return
        last = first + len(values)
        for (name, dtype), column in zip(CONTENT_COLUMNS, zip(*values, strict=True), strict=True):
            self.content[name][first:last] = np.array(column, dtype=dtype)

    def state_row(self, row: int) -> list[Any]:
        """One row's state columns as Python values, in ``STATE_COLUMNS`` order."""
        return [self.state[name].item(row) for name in STATE_NAMES]

    def write_state(self, rows: list[int], values: list[list[Any]]) -> None:
        """Set the state columns of ``rows`` (one list per row, in ``STATE_COLUMNS`` order)
        without recording a change (the caller records them on the timeline)."""
        if not rows:
            return
        if len(rows) <= FEW_ROWS:
            arrays = [self.state[name] for name in STATE_NAMES]
            for row, row_values in zip(rows, values, strict=True):
                for array, value in zip(arrays, row_values, strict=True):
                    array[row] = value
            return
        index = np.array(rows, dtype=np.int64)
        for (name, dtype), column in zip(STATE_COLUMNS, zip(*values, strict=True), strict=True):
            self.state[name][index] = np.array(column, dtype=dtype)

    def set_ids(self, ids: list[str]) -> None:
        """Every row's record id at once (a checkpoint being loaded)."""
        self.ids = ids
        self.row_of = dict(zip(ids, range(len(ids)), strict=True))
        self.row_of_key = KeyRows(self.row_of)
        if _all_canonical_uuids(ids):
            return  # the usual case, checked in one pass: no id needs an entry of its own
        for row, record_id in enumerate(ids):
            self.row_of_key.note(record_id, row)

    def scope_id(self, scope: str) -> int:
        known = self.scope_ids.get(scope)
        if known is None:
            known = self.scope_ids[scope] = len(self.scope_names)
            self.scope_names.append(scope)
        return known

    def _grow(self) -> None:
        for columns in (self.content, self.state):
            for name, column in columns.items():
                grown = np.zeros(len(column) * 2, dtype=column.dtype)
                grown[: len(column)] = column
                columns[name] = grown

    # --- reads ------------------------------------------------------------------------------

    def salience_of(self, row: int, at: int) -> float:
        """One row's salience at ``at`` (for events that freeze it, e.g. pinning)."""
        rows = np.array([row])
        return float(self.salience(rows, at, self.state_now())[0])

    def state_now(self) -> State:
        return State(self.size, {n: c[: self.size] for n, c in self.state.items()})

    def state_at(self, at: int) -> State:
        """The state columns as they stood at ``at`` (rows created later are excluded)."""
        return self.timeline.state_at(at, self.size_at(at), self.state)

    def past_state(self, at: int) -> State:
        """:meth:`state_at`, computed only for the rows a read asks about."""
        size = self.size_at(at)
        return State(size, PastState(self.timeline, self.state, at, size))

    def size_at(self, at: int) -> int:
        """How many rows existed at ``at``."""
        return int(np.searchsorted(self.content["tx_time"][: self.size], at, side="right"))

    def salience(self, rows: Array | slice, at: int, state: State) -> Array:
        """Vectorised salience of ``rows`` at moment ``at`` (the same rule as
        :func:`membrane_es.timekeeping.decay.salience_at`)."""
        cols = state.columns
        base = cols["base"][rows]
        pinned = cols["pinned"][rows]
        half_life = self.content["half_life"][rows]
        floor = self.content["floor"][rows]
        max_age = self.content["max_age"][rows]
        elapsed = np.maximum(0, at - cols["anchor"][rows]) / 1e6
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            decayed = base * np.exp(-elapsed * LN2 / np.where(half_life > 0, half_life, 1.0))
        decayed = np.where(half_life > 0, decayed, base)
        decayed = np.where(np.isfinite(decayed), np.maximum(decayed, floor), floor)
        aged = (max_age > 0) & ((at - self.content["created_at"][rows]) / 1e6 >= max_age)
        out = np.where(aged, 0.0, decayed)
        out = np.where(pinned, base, out)
        return np.where(base <= 0, 0.0, out)

    def out_of_use(self, row: int, at: int) -> bool:
        """Whether an active read leaves one row out now: retracted, or :meth:`hidden` (the
        same rule, on plain values: for the few rows a follower of the log looks at)."""
        content, state = self.content, self.state
        if state["retracted"][row]:
            return True
        if not content["auto_prune"][row] or state["pinned"][row]:
            return False
        max_age = float(content["max_age"][row])
        expired = max_age > 0 and (at - int(content["created_at"][row])) / 1e6 >= max_age
        return bool(state["base"][row] <= 0) or expired

    def hidden(self, rows: Array | slice, at: int, state: State) -> Array:
        """Rows active retrieval leaves out although they are not retracted: those an
        explicit act or policy took out of use, never those that merely faded.

        A record with deletion policy ``auto_prune`` that is not pinned is hidden when it
        was penalised to nothing (its base is 0) or is past its own ``max_age_seconds``.
        Decay alone never hides a record, however long ago it was written: salience only
        ranks (the reference deletes records whose salience fell below 0.001 at its next
        sweep, so a memory there is lost by arithmetic underflow after a few weeks)."""
        content = self.content
        max_age = content["max_age"][rows]
        expired = (max_age > 0) & ((at - content["created_at"][rows]) / 1e6 >= max_age)
        spent = state.columns["base"][rows] <= 0
        return content["auto_prune"][rows] & ~state.columns["pinned"][rows] & (spent | expired)


class KeyRows:
    """Rows by aggregate id, sharing the table's one id map: a record id that is a canonical
    UUID string *is* its aggregate id (:func:`~membrane_es.aggregates.identity.record_key`),
    so no second dict of UUID keys (~150 B a record) is held; only other ids, mapped to
    name-based UUIDs, get an entry of their own."""

    def __init__(self, row_of: dict[str, int]) -> None:
        self._row_of = row_of
        self._other: dict[UUID, int] = {}

    def note(self, record_id: str, row: int, key: UUID | None = None) -> None:
        """Remember a newly added record whose id is not a canonical UUID string (``key``:
        its aggregate id, when the caller already has it)."""
        if not _canonical_uuid(record_id):
            self._other[record_key(record_id) if key is None else key] = row

    def get(self, key: UUID, default: int | None = None) -> int | None:
        row = self._other.get(key)
        return row if row is not None else self._row_of.get(str(key), default)

    def __getitem__(self, key: UUID) -> int:
        row = self.get(key)
        if row is None:
            raise KeyError(key)
        return row

    def __contains__(self, key: object) -> bool:
        return isinstance(key, UUID) and self.get(key) is not None


# A UUID in canonical form: what ``str(UUID(...))`` writes (lower-case hex, 8-4-4-4-12).
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


_DASHES = [8, 13, 18, 23]  # where a canonical UUID has its dashes


def _all_canonical_uuids(record_ids: list[str]) -> bool:
    """Whether every id is a UUID in canonical form, the characters of all of them checked
    at once (a checkpoint of a million records loads its ids in a fraction of the time one
    match an id takes): 36 characters each, only lower-case hex digits and dashes, a dash at
    each of the four places in every id and nowhere else."""
    if record_ids and set(map(len, record_ids)) != {36}:
        return False
    try:
        data = "".join(record_ids).encode("ascii")
    except UnicodeEncodeError:
        return False
    if data.translate(None, b"0123456789abcdef-"):
        return False
    chars = np.frombuffer(data, dtype=np.uint8).reshape(-1, 36)
    dashes = chars[:, _DASHES] == ord("-")
    return bool(dashes.all()) and data.count(b"-") == len(_DASHES) * len(record_ids)


def _canonical_uuid(record_id: str) -> bool:
    """Whether the id is a UUID in canonical form (then it is its own aggregate id): the same
    answer as ``str(UUID(record_id)) == record_id``, without making a UUID (a rebuild asks it
    of every record)."""
    return _CANONICAL_UUID.fullmatch(record_id) is not None


class Timeline:
    """Every state change in time order, with a full copy of the state every so often."""

    def __init__(self) -> None:
        self.times = np.zeros(1024, dtype="i8")
        self.rows = np.zeros(1024, dtype="i4")
        self.values = {n: np.zeros(1024, dtype=d) for n, d in STATE_COLUMNS}
        self.size = 0
        # (change count, table size, state copies) taken at change counts 0, K, 2K, ...
        self.checkpoints: list[tuple[int, int, dict[str, Array]]] = []
        self.min_interval = 4096
        self.interval = self.min_interval

    def extend(self, changes: list[tuple[Any, ...]]) -> None:
        """Append changes ``(at, row, *state values in STATE_COLUMNS order)``, in order,
        column at a time (the caller takes checkpoints, see :meth:`next_checkpoint`)."""
        if not changes:
            return
        first, last = self.size, self.size + len(changes)
        while last > len(self.times):
            self._grow()
        if len(changes) <= FEW_ROWS:
            arrays = [self.times, self.rows, *(self.values[name] for name in STATE_NAMES)]
            for i, change in enumerate(changes, first):
                for array, value in zip(arrays, change, strict=True):
                    array[i] = value
            self.size = last
            return
        columns = list(zip(*changes, strict=True))
        self.times[first:last] = np.array(columns[0], dtype="i8")
        self.rows[first:last] = np.array(columns[1], dtype="i4")
        for (name, dtype), column in zip(STATE_COLUMNS, columns[2:], strict=True):
            self.values[name][first:last] = np.array(column, dtype=dtype)
        self.size = last

    def next_checkpoint(self) -> int:
        """The change count at which :meth:`maybe_checkpoint` takes the next full copy."""
        return (self.checkpoints[-1][0] if self.checkpoints else 0) + self.interval

    def maybe_checkpoint(self, table_size: int, state: dict[str, Array]) -> None:
        """After a change: keep a full copy every ``interval`` changes (amortised O(1))."""
        if self.size - (self.checkpoints[-1][0] if self.checkpoints else 0) >= self.interval:
            copies = {n: c[:table_size].copy() for n, c in state.items()}
            self.checkpoints.append((self.size, table_size, copies))
            # Keep checkpoint memory proportional to the changes they stand for.
            self.interval = max(self.min_interval, table_size)

    def state_at(self, at: int, size: int, current: dict[str, Array]) -> State:
        upto = int(np.searchsorted(self.times[: self.size], at, side="right"))
        start, columns = 0, {n: np.zeros(size, dtype=c.dtype) for n, c in current.items()}
        for count, table_size, copies in reversed(self.checkpoints):
            if count <= upto:
                start = count
                n = min(size, table_size)
                for name in columns:
                    columns[name][:n] = copies[name][:n]
                break
        rows = self.rows[start:upto]
        keep = rows < size
        rows = rows[keep]
        if len(rows):
            # Later changes win: take the last change of each row.
            order = np.arange(len(rows))
            last = np.zeros(size, dtype=np.int64) - 1
            np.maximum.at(last, rows, order)
            changed = np.nonzero(last >= 0)[0]
            picks = np.nonzero(keep)[0][last[changed]] + start
            for name in columns:
                columns[name][changed] = self.values[name][picks]
        return State(size, columns)

    def _grow(self) -> None:
        def double(column: Array) -> Array:
            grown = np.zeros(len(column) * 2, dtype=column.dtype)
            grown[: len(column)] = column
            return grown

        self.times = double(self.times)
        self.rows = double(self.rows)
        self.values = {n: double(c) for n, c in self.values.items()}


def initial_state(
    record: MemoryRecord, tx_time: int, tx_moment: datetime | None = None
) -> list[Any]:
    """A new record's state columns, in ``STATE_COLUMNS`` order (``tx_moment`` as for
    :meth:`RecordTable.content_values`)."""
    anchor = record.lifecycle.last_reinforced_at
    anchor_us = _micros_or(anchor, tx_time, tx_moment) if anchor else tx_time
    updated = record.updated_at
    status = ""
    if isinstance(record.payload, SemanticPayload) and record.payload.revision is not None:
        status = record.payload.revision.status
    return [
        record.salience,
        anchor_us,
        anchor_us,
        _micros_or(updated, tx_time, tx_moment) if updated else tx_time,
        record.lifecycle.pinned,
        False,
        _STATUS_CODE.get(status, STATUS_NONE),
    ]


def _micros_or(moment: datetime, known_us: int, known: datetime | None) -> int:
    """``micros(moment)``, or ``known_us`` when ``moment`` is the moment ``known`` (equal
    instants: a record created by the engine carries the event's time in several fields)."""
    return known_us if known is not None and moment == known else micros(moment)


def _validity_window(record: MemoryRecord) -> tuple[int, int]:
    """A semantic fact's validity window in microseconds; missing bounds are open."""
    payload = record.payload
    if not isinstance(payload, SemanticPayload):
        return OPEN_START, OPEN_END
    start, end = payload.validity.start, payload.validity.end
    return (
        OPEN_START if start is None else micros(start),
        OPEN_END if end is None else micros(end),
    )


def _success_signal(record: MemoryRecord) -> float:
    payload = record.payload
    if isinstance(payload, CompetencePayload) and payload.performance is not None:
        stats = payload.performance
        total = stats.success_count + stats.failure_count
        if total > 0:
            return stats.success_count / total
    if isinstance(payload, PlanGraphPayload) and payload.metrics is not None:
        if payload.metrics.execution_count > 0:
            return 1.0 - payload.metrics.failure_rate
    return math.nan

"""What each inspector page shows, read through the engine under the page's reader.

Every read goes through the engine with the reader's trust and moment, and what a page
shows of a record is what a list read would return for it (:func:`visible`): the record,
its redacted copy (one level above the trust: metadata only), or nothing (then the page
answers as for a record that does not exist, so nothing beyond the ceiling can be learned).
A record is loaded at full trust only to decide that, as the engine's own list reads do.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from membrane_es.embedding.record_text import search_text
from membrane_es.engine import (
    EVIDENCE_WEIGHT,
    FORGOTTEN_EVENT,
    SALIENCE_WEIGHT,
    HistoryEntry,
    Membrane,
    allows,
    visible,
)
from membrane_es.errors import MembraneError, NotFoundError
from membrane_es.http_api.ui.context import Reading
from membrane_es.http_api.ui.diff import Change, across, changes, record_fields
from membrane_es.schema.conversation import speaker_of_record
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import MemoryRecord, TrustContext
from membrane_es.schema.results import Explanation
from membrane_es.schema.rfc3339 import parse_moment

SEARCH_PAGE = 20
MAX_RESULTS = 10_000  # the most one ranked read returns (its ``limit``'s bound)
COUNTED_UPTO = 100  # results are counted up to this many (a page beyond reads further)
MAX_SEARCH_PAGE = (MAX_RESULTS - 1) // SEARCH_PAGE
TIMELINE_PAGE = 50
MAX_HOPS = 3
GRAPH_NODES = 40
DAYS = 30
LABEL_CHARS = 160
FULL_TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)
_RECORD_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


def label(record: MemoryRecord) -> str:
    """One line saying what a record holds (empty for a redacted or erased one)."""
    text = " ".join(search_text(record).split()) if record.payload is not None else ""
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _page_of(items: list[Any], page: int, size: int) -> tuple[list[Any], bool]:
    """Page ``page`` (from 1) of ``items``, and whether another follows."""
    start = (page - 1) * size
    return items[start : start + size], len(items) > start + size


# --- search ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Share:
    """One part of a score: its name, the evidence it is (0..1) and what it added."""

    name: str
    value: float | None
    part: float


@dataclass(frozen=True, slots=True)
class Hit:
    record: MemoryRecord
    explanation: Explanation
    label: str
    shares: list[Share]

    @property
    def redacted(self) -> bool:
        return self.explanation.trust != "full"


@dataclass(frozen=True, slots=True)
class SearchPage:
    hits: list[Hit]
    page: int
    has_next: bool
    moment: datetime | None
    total: int  # the results (after the cut-off), counted up to ``counted_upto``
    more: bool  # more than ``total`` exist (counting stopped)
    pages: int  # pages of ``total``
    cutoff: float | None
    left_out: int = 0  # results below the cut-off (or redacted, whose relevance is withheld)

    @property
    def beyond(self) -> bool:
        """Whether the page asked for is past the last one."""
        return not self.hits and self.page > 1


def shares(explanation: Explanation) -> list[Share]:
    """The score split into what each kind of evidence and salience added (none for a hit
    returned redacted: its score and its parts are withheld).

    Relevance is the mean of the evidence present (equal shares), and the score is relevance
    × (0.7 + 0.3 × salience) (:mod:`membrane_es.queries.ranking`): so each signal adds
    relevance × 0.7 in proportion to its value, salience adds relevance × 0.3 × salience, and
    the parts sum to the score (a graph root's boost aside). Without evidence (no task, or
    one nothing matched) the order is by salience alone."""
    if explanation.score is None:
        return []
    signals = [
        ("meaning", explanation.vector_score),
        ("words", explanation.lexical_score),
        ("time", explanation.time_score),
    ]
    relevance = explanation.relevance
    salience = min(max(explanation.salience, 0.0), 1.0)
    if relevance is None:
        return [
            *(Share(name, value, 0.0) for name, value in signals),
            Share("salience", explanation.salience, explanation.score),
        ]
    total = sum(value or 0.0 for _, value in signals)
    evidence = relevance * EVIDENCE_WEIGHT
    parts = [
        Share(name, value, evidence * (value or 0.0) / total if total > 0 else 0.0)
        for name, value in signals
    ]
    return [*parts, Share("salience", explanation.salience, relevance * SALIENCE_WEIGHT * salience)]


def search(
    memory: Membrane,
    reading: Reading,
    task: str,
    types: list[str],
    page: int,
    cutoff: float | None = None,
) -> SearchPage:
    """One page of a ranked read, as :meth:`Membrane.retrieve` answers it, explained; the
    results counted up to :data:`COUNTED_UPTO`. ``cutoff``: only results whose relevance
    (the evidence combined, 0..1) reaches it; a redacted result has none to show, so a
    cut-off leaves it out (whatever its relevance: keeping some would tell it)."""
    wanted = min(max(page * SEARCH_PAGE, COUNTED_UPTO) + 1, MAX_RESULTS)
    result = memory.retrieve(
        task,
        trust=reading.trust,
        memory_types=types or None,
        limit=wanted,
        as_of=reading.as_of,
        explain=True,
    )
    explanations: list[Explanation] = getattr(result, "explanations", [])
    pairs = list(zip(result.records, explanations, strict=True))
    more = len(pairs) >= wanted
    if more:
        pairs = pairs[: wanted - 1]
    left_out = 0
    if cutoff is not None and task.strip():
        kept = [
            (record, why)
            for record, why in pairs
            if why.relevance is not None and why.relevance >= cutoff
        ]
        left_out, pairs = len(pairs) - len(kept), kept
    total = len(pairs)
    shown, has_next = _page_of(pairs, page, SEARCH_PAGE)
    hits = [Hit(record, why, label(record), shares(why)) for record, why in shown]
    pages = max(1, -(-total // SEARCH_PAGE))
    return SearchPage(
        hits,
        page,
        has_next or (more and bool(shown)),
        reading.as_of,
        total,
        more,
        pages,
        cutoff,
        left_out,
    )


# --- a record and its timeline -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Link:
    """A record this one is tied to, and how; ``record`` False: the reference names no
    record the reader may open at its moment (a capture's reference to what it was made
    from, or a record not there then or not the reader's to see), so it is not linked."""

    how: str
    record_id: str
    record: bool = True


@dataclass(frozen=True, slots=True)
class Revision:
    """One revision across two records: the one replaced, the one replacing it, and what
    changed from one to the other."""

    how: str  # "superseded by" / "supersedes"
    old: str
    new: str
    changes: list[Change]


@dataclass(frozen=True, slots=True)
class Step:
    """One event of the record, with what it changed."""

    entry: HistoryEntry
    event_time: datetime | None
    changes: list[Change]
    links: list[str]


@dataclass(frozen=True, slots=True)
class RecordPage:
    record: MemoryRecord
    label: str
    redacted: bool
    steps: list[Step] = field(default_factory=list)
    events: int = 0
    page: int = 1
    has_next: bool = False
    erased: HistoryEntry | None = None
    links: list[Link] = field(default_factory=list)
    revisions: list[Revision] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The record's state, plainly: erased, superseded, retracted, contested, or active."""
        return state_of(self.record, erased=self.erased is not None)

    @property
    def speaker(self) -> str:
        """Who said it, when it is a conversation turn ("" otherwise)."""
        return speaker_of_record(self.record)

    @property
    def raw(self) -> str:
        """The record as the reader may see it, as JSON (what the API returns for it)."""
        return raw_json(self.record)


def raw_json(record: MemoryRecord) -> str:
    return json.dumps(msgspec.to_builtins(record), indent=2, ensure_ascii=False)


def state_of(record: MemoryRecord, *, erased: bool) -> str:
    """A record's state in one word: erased, superseded, retracted, contested or active."""
    if erased:
        return "erased"
    revision = getattr(record.payload, "revision", None)
    if revision is None:
        return "active"
    if revision.superseded_by:
        return "superseded"
    return getattr(revision, "status", "") or "active"


def shown(memory: Membrane, reading: Reading, record_id: str) -> MemoryRecord:
    """The record as the reader may see it at its moment (redacted or whole); a record it
    may not see at all is not found, as one that does not exist."""
    whole = memory.retrieve_by_id(record_id, trust=FULL_TRUST, as_of=reading.as_of)
    seen = visible(reading.trust, whole)
    if seen is None:
        raise NotFoundError(record_id)
    return seen


def links_of(memory: Membrane, reading: Reading, record: MemoryRecord) -> list[Link]:
    """The records this one names: its relations, its revision and provenance; a name the
    reader cannot open is kept, unlinked."""
    found: dict[tuple[str, str], None] = {}
    revision = getattr(record.payload, "revision", None)
    if revision is not None:
        if revision.supersedes:
            found[("supersedes", revision.supersedes)] = None
        if revision.superseded_by:
            found[("superseded by", revision.superseded_by)] = None
    for relation in record.relations:
        found[(relation.predicate.replace("_", " "), relation.target_id)] = None
    for source in record.provenance.sources:
        if source.ref:
            found[("provenance", source.ref)] = None
    return [Link(how, ref, _opens(memory, reading, ref)) for how, ref in found]


def _opens(memory: Membrane, reading: Reading, ref: str) -> bool:
    """Whether ``ref`` is a record the reader may open at its moment."""
    if not _RECORD_ID.fullmatch(ref):
        return False
    try:
        shown(memory, reading, ref)
    except NotFoundError:
        return False
    return True


def revisions_of(memory: Membrane, reading: Reading, record: MemoryRecord) -> list[Revision]:
    """The supersedes around a record, each as one diff from the old record to the new (both
    as the reader sees them at its moment; none where either is redacted, erased or not the
    reader's to see)."""
    revision = getattr(record.payload, "revision", None)
    if revision is None:
        return []
    found = []
    for how, other_id in (
        ("superseded by", revision.superseded_by),
        ("supersedes", revision.supersedes),
    ):
        if not other_id:
            continue
        try:
            other = shown(memory, reading, other_id)
        except NotFoundError:
            continue
        if other.payload is None or not allows(reading.trust, other):
            continue
        old, new = (record, other) if how == "superseded by" else (other, record)
        found.append(Revision(how, old.id, new.id, across(old, new)))
    return found


def record_page(memory: Membrane, reading: Reading, record_id: str, page: int) -> RecordPage:
    """The record at the reader's moment and its events up to then, a page at a time, each
    with what it changed; a redacted record shows its metadata only (its history, like the
    API's, needs the record in full)."""
    record = shown(memory, reading, record_id)
    if not allows(reading.trust, record):
        return RecordPage(record, "", redacted=True)
    history = memory.history(record_id, trust=reading.trust)
    # Erasure reaches back: the content is unreadable at every moment, so it is told even
    # when reading as of a moment before it.
    erased = next((e for e in history if e.event == FORGOTTEN_EVENT), None)
    if reading.as_of is not None:
        history = [entry for entry in history if entry.timestamp <= reading.as_of]
    entries, has_next = _page_of(history, page, TIMELINE_PAGE)
    first = (page - 1) * TIMELINE_PAGE
    steps = []
    before: dict[str, str] = {}
    if erased is None and 0 < first <= len(history):
        before = record_fields(
            memory.retrieve_by_id(
                record_id, trust=reading.trust, as_of=history[first - 1].timestamp
            )
        )
    for entry in entries:
        # An erased record reads redacted at every moment: there is nothing to compare.
        changed: list[Change] = []
        if erased is None:
            after = record_fields(
                memory.retrieve_by_id(record_id, trust=reading.trust, as_of=entry.timestamp)
            )
            changed, before = changes(before, after), after
        event_time = record.created_at if entry.event == "Created" else None
        steps.append(Step(entry, event_time, changed, _RECORD_ID.findall(entry.rationale)))
    return RecordPage(
        record,
        label(record),
        redacted=False,
        steps=steps,
        events=len(history),
        page=page,
        has_next=has_next,
        erased=erased,
        links=links_of(memory, reading, record),
        revisions=[] if erased is not None else revisions_of(memory, reading, record),
    )


# --- relations and provenance ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Node:
    record: MemoryRecord
    hop: int
    label: str
    redacted: bool


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    predicate: str
    target: str


@dataclass(frozen=True, slots=True)
class Neighbourhood:
    root: str
    nodes: dict[str, Node]
    edges: list[Edge]
    hops: int
    truncated: bool


def neighbourhood(memory: Membrane, reading: Reading, root_id: str, hops: int) -> Neighbourhood:
    """The records within ``hops`` relations of the root (either direction) and provenance
    links, as the reader sees them at its moment; at most :data:`GRAPH_NODES`. A redacted
    record is shown but not followed: its relations are not the reader's to see."""
    hops = min(max(hops, 0), MAX_HOPS)
    root = shown(memory, reading, root_id)
    nodes = {root_id: _node(reading, root, 0)}
    edges: dict[Edge, None] = {}
    queue = deque([root_id])
    truncated = False
    while queue:
        current = nodes[queue.popleft()]
        if current.hop >= hops or current.redacted:
            continue
        for edge in _edges(memory, reading, current.record):
            other = edge.target if edge.source == current.record.id else edge.source
            if other not in nodes:
                if len(nodes) >= GRAPH_NODES:
                    truncated = True
                    continue
                try:
                    record = shown(memory, reading, other)
                except NotFoundError:
                    continue  # not there at this moment, or not the reader's to see
                nodes[other] = _node(reading, record, current.hop + 1)
                queue.append(other)
            edges[edge] = None
    return Neighbourhood(root_id, nodes, list(edges), hops, truncated)


def _node(reading: Reading, record: MemoryRecord, hop: int) -> Node:
    return Node(record, hop, label(record), redacted=not allows(reading.trust, record))


def _edges(memory: Membrane, reading: Reading, record: MemoryRecord) -> list[Edge]:
    """The record's relations out and in, and its provenance, at the reader's moment."""
    found = [Edge(record.id, r.predicate, r.target_id) for r in record.relations]
    found += [
        Edge(record.id, "provenance", s.ref)
        for s in record.provenance.sources
        if _RECORD_ID.fullmatch(s.ref) and s.ref != record.id
    ]
    for source_id, predicate in memory.relations_to(record.id):
        try:
            source = memory.retrieve_by_id(source_id, trust=FULL_TRUST, as_of=reading.as_of)
        except NotFoundError:
            continue  # created after the moment
        # a source the reader may not read in full keeps its relations to itself (a redacted
        # record has none), and the index is the latest one: keep the edges held at the moment
        if not allows(reading.trust, source):
            continue
        if any(r.predicate == predicate and r.target_id == record.id for r in source.relations):
            found.append(Edge(source_id, predicate, record.id))
    return found


# --- metrics ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Metrics:
    snapshot: dict[str, Any]
    moment: datetime
    by_state: dict[str, int]
    per_day: list[tuple[datetime, int]]


def metrics(memory: Membrane, reading: Reading) -> Metrics:
    """The store's metrics snapshot at the reader's moment (as ``GetMetrics`` answers it:
    every record of the tenant counted), records by state, and records written per day over
    the :data:`DAYS` days up to the moment, from the read views' columns."""
    snapshot = memory.get_metrics(as_of=reading.as_of)
    moment = parse_moment(snapshot["collected_at"], "collected_at")
    assert moment is not None
    at = None if reading.as_of is None else moment
    census = memory.census(as_of=at, days=DAYS)
    return Metrics(snapshot, moment, _split_retracted(memory, at, census.by_state), census.per_day)


def _split_retracted(
    memory: Membrane, at: datetime | None, by_state: dict[str, int]
) -> dict[str, int]:
    """The census's retracted records told apart: superseded (replaced by another record),
    erased (forgotten: their content is gone) and retracted (withdrawn). The census counts
    all three as retracted, as the views keep them; the records out of the active listing
    are read to tell which (an erased record is erased at every moment: erasure reaches
    back)."""
    active = set(memory.record_ids(trust=FULL_TRUST, as_of=at))
    superseded = erased = 0
    for record_id in memory.record_ids(trust=FULL_TRUST, as_of=at, include_retracted=True):
        if record_id in active:
            continue
        record = memory.retrieve_by_id(record_id, trust=FULL_TRUST, as_of=at)
        state = state_of(record, erased=record.payload is None)
        erased += state == "erased"
        superseded += state == "superseded"
    split = {k: v for k, v in by_state.items() if k != "retracted"}
    retracted = by_state.get("retracted", 0)
    split["superseded"] = superseded
    split["retracted"] = max(retracted - superseded - erased, 0)
    split["erased"] = erased
    return split


# --- integrity -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Integrity:
    ok: bool
    summary: str
    checked: int = 0
    head: str = ""
    keyed: bool = False
    seconds: float = 0.0


def integrity(memory: Membrane) -> Integrity:
    """Walk the log's hash chain (:meth:`Membrane.verify`): the outcome and the chain head."""
    started = time.perf_counter()
    try:
        report = memory.verify()
    except MembraneError as error:  # a store that keeps no chain
        return Integrity(False, str(error))
    seconds = time.perf_counter() - started
    return Integrity(
        bool(report.ok), str(report), report.checked, report.head, report.keyed, seconds
    )

"""How each event changes the views: one table of handlers, one batch of writes.

Every event reaches the views through :class:`ViewWrites`: one write of the engine (often a
single event), a page of the log during a catch-up, or the whole log in a rebuild. A
handler, picked by the event's exact class from :data:`HANDLERS`, notes what its event
changes; what depends on order (row numbers, the graph, audit entries, each touched row's
state after every change) is kept in Python lists, and :meth:`ViewWrites.flush` writes the
numpy columns, the state timeline, the embedding blocks and the text index in bulk.

State is written early only where a reader needs it mid-batch: a pin (whose salience is
computed from the row's columns then) and a timeline checkpoint (a copy of every row).

Record events of classes without a handler still file their audit entry (every event of
the seven audit actions adds one, ``Created`` included); events of other aggregates are
skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.embedding.record_text import search_text
from membrane_es.embedding.vectors import vector_bytes
from membrane_es.projections.metrics import ACTION_CODE, figure_of
from membrane_es.projections.record_table import (
    CONTENT_COLUMNS,
    STATE_NAMES,
    STATUS_CONTESTED,
    STATUS_RETRACTED,
    TYPE_CODE,
    initial_state,
)
from membrane_es.projections.timecodes import micros
from membrane_es.schema.conversation import said_after, speaker_of_record
from membrane_es.schema.enums import GraphPredicate, MemoryType
from membrane_es.schema.payloads import EntityPayload
from membrane_es.schema.records import Relation

if TYPE_CHECKING:
    from membrane_es.projections.read_model import ReadModel

# The content columns a turn's earlier turns are checked by, and their positions in a row's
# content values (CONTENT_COLUMNS order).
_LINK_COLUMNS = ("type", "sensitivity", "scope")
_TYPE, _LEVEL, _SCOPE = ([name for name, _ in CONTENT_COLUMNS].index(n) for n in _LINK_COLUMNS)
_EPISODIC = TYPE_CODE[MemoryType.EPISODIC]

# Positions in a row's state list (STATE_COLUMNS order).
_BASE, _ANCHOR, _LAST, _UPDATED, _PINNED, _RETRACTED, _STATUS = (
    STATE_NAMES.index(name)
    for name in ("base", "anchor", "last_reinforced", "updated", "pinned", "retracted", "status")
)

TextSink = Callable[[list[tuple[int, str]]], None]


class ViewWrites:
    """The writes of one batch of events to one read model, applied in log order."""

    def __init__(self, model: ReadModel, count: int) -> None:
        self.model = model
        self.table = model.table
        self.first_row = model.table.size
        self.table.reserve(self.first_row + count)
        self.content: list[tuple[Any, ...]] = []  # content of rows first_row, first_row+1…
        self.written = 0  # of ``content``, already in the numpy columns
        self.types: list[int] = []
        self.figures: list[float] = []
        self.pending: dict[int, list[Any]] = {}  # state of every row touched, as it stands now
        self.changes: list[tuple[Any, ...]] = []  # timeline entries not yet in the timeline
        self.audit: list[tuple[int, int]] = []
        self.documents: list[tuple[int, str]] = []
        self.links: list[tuple[int, list[int]]] = []  # (turn, the turns it was said after)
        self.speakers: list[tuple[int, str]] = []  # (turn, who said it)
        self.vectors: list[tuple[int, int, str, bytes]] = []
        self.passages: list[tuple[int, bytes]] = []  # (row, its further passages' vectors)
        self.dimensions = 0  # of the passages' vectors
        self.erased: set[int] = set()  # rows whose content is erased by an event here
        self.next_checkpoint = self.table.timeline.next_checkpoint()

    def apply(self, events: Any) -> None:
        """Note every event's changes, in order (``events``: any iterable)."""
        dispatch = _DISPATCH
        audit, changes, timeline = self.audit, self.changes, self.table.timeline
        for event in events:
            cls = type(event)
            handler, audit_code = dispatch.get(cls) or _dispatch_of(cls)
            if handler is _skip:
                continue
            at = micros(event.timestamp)
            row = handler(self, event, at)
            if audit_code is not None:
                audit.append((at, audit_code))
            if row is not None:
                changes.append((at, row, *self.pending[row]))
                if timeline.size + len(changes) >= self.next_checkpoint:
                    self._checkpoint()

    def flush(self, index_text: TextSink | None = None) -> None:
        """Write what is noted to the views (``index_text``, if given, is handed the new
        ``(row, search text)`` documents instead of writing them to the text index here)."""
        model, table = self.model, self.table
        table.write_content(self.first_row + self.written, self.content[self.written :])
        table.write_state(list(self.pending), list(self.pending.values()))
        table.timeline.extend(self.changes)
        model.metrics.add_many(self.first_row, self.types, self.figures, self.audit)
        documents, erased = self.documents, self.erased
        if erased:  # text created and erased within these events is never indexed
            documents = [document for document in documents if document[0] not in erased]
        model.embeddings.add_many(self.vectors)
        model.passages.add_many(self.passages, self.dimensions)
        (model.text.add_many if index_text is None else index_text)(documents)
        model.text.link(self.links)
        model.speakers.add_many(self.speakers)
        if erased:
            model.purge(sorted(erased), text_now=index_text is None)

    # --- handlers: each notes one event's changes; returns the row whose state changed -----

    def created(self, event: RecordAggregate.Created, at: int) -> int:
        record, moment, table = event.record, event.timestamp, self.table
        row = table.register(record.id, event.originator_id)
        values = table.content_values(record, at, moment)
        self.content.append(values)
        self.types.append(values[0])
        self.figures.append(figure_of(record))
        for entry in record.audit_log:  # imported entries (its own ``create`` is filed after)
            code = ACTION_CODE.get(str(entry.action))
            if code is not None:
                self.audit.append((at, code))
        for relation in record.relations:
            self.model.graph.add(record.id, relation)
        self.documents.append((row, search_text(record)))
        speaker = speaker_of_record(record)
        if speaker:
            self.speakers.append((row, speaker))
        earlier = said_after(record)
        if earlier:
            self.links.append((row, self._earlier_turns(earlier, row, values)))
        if isinstance(record.payload, EntityPayload):
            self.model.entities.add(row, record.payload)
        self.model.facts.add(row, record, table, self.model.entities)
        embedding = event.embedding
        if embedding is not None:
            self.vectors.append((row, values[2], embedding.model, vector_bytes(embedding)))
            if embedding.passages and embedding.vector:
                self.passages.append((row, embedding.passages))
                self.dimensions = len(embedding.vector) // 4
        self.pending[row] = initial_state(record, at, moment)
        return row

    def retracted(self, event: Any, at: int) -> int:
        row, state = self._state(event, at)
        state[_BASE], state[_ANCHOR], state[_RETRACTED], state[_STATUS] = (
            0.0,
            at,
            True,
            STATUS_RETRACTED,
        )
        return row

    def forgotten(self, event: Any, at: int) -> int:
        """Retracted, and the content the views hold of it erased when the batch is flushed."""
        row = self.retracted(event, at)
        self.erased.add(row)
        return row

    def contested(self, event: RecordAggregate.Contested, at: int) -> int:
        row, state = self._state(event, at)
        state[_STATUS] = STATUS_CONTESTED
        if event.contesting_ref:
            relation = Relation(
                predicate=GraphPredicate.CONTESTED_BY.value,
                target_id=event.contesting_ref,
                weight=1.0,
                created_at=event.timestamp,
            )
            self.model.graph.add(self.table.ids[row], relation)
        return row

    def reinforced(
        self, event: RecordAggregate.Reinforced | RecordAggregate.Corroborated, at: int
    ) -> int:
        row, state = self._state(event, at)
        state[_BASE], state[_ANCHOR], state[_LAST] = event.salience, at, at
        return row

    def penalized(self, event: RecordAggregate.Penalized, at: int) -> int:
        row, state = self._state(event, at)
        state[_BASE], state[_ANCHOR] = event.salience, at
        return row

    def touched(self, event: Any, at: int) -> int:
        row, _ = self._state(event, at)
        return row

    def pinned(self, event: RecordAggregate.Pinned, at: int) -> int:
        row, state = self._state(event, at)
        # Salience frozen at its value now: computed from the row's columns, so what is
        # noted so far for it is written first.
        table = self.table
        table.write_content(self.first_row + self.written, self.content[self.written :])
        self.written = len(self.content)
        table.write_state([row], [state])
        state[_BASE] = table.salience_of(row, at)
        state[_ANCHOR], state[_PINNED] = at, True
        return row

    def unpinned(self, event: RecordAggregate.Unpinned, at: int) -> int:
        row, state = self._state(event, at)
        state[_ANCHOR], state[_PINNED] = at, False
        return row

    def relation_added(self, event: RecordAggregate.RelationAdded, at: int) -> None:
        table = self.table
        self.model.graph.add(table.ids[table.row_of_key[event.originator_id]], event.relation)

    # --- helpers ------------------------------------------------------------------------------

    def _state(self, event: Any, at: int) -> tuple[int, list[Any]]:
        """The event's row and its state as it stands now, marked updated at ``at``."""
        row = self.table.row_of_key[event.originator_id]
        state = self.pending.get(row)
        if state is None:
            state = self.pending[row] = self.table.state_row(row)
        state[_UPDATED] = at
        return row, state

    def _earlier_turns(self, ids: list[str], row: int, values: tuple[Any, ...]) -> list[int]:
        """Rows of the turns a new turn (``row``, its content ``values``) names as said before
        it that it may be searched with: earlier episodic records of its scope, no more
        sensitive than it. Capture only names such turns; a record written by hand that names
        others cannot lend itself their words (its readers may not be allowed to see them)."""
        table, first = self.table, self.first_row
        found = []
        for record_id in dict.fromkeys(ids):
            earlier = table.row_of.get(record_id)
            if earlier is None or earlier >= row:
                continue
            if earlier >= first:  # created in this batch: its columns are still in ``content``
                noted = self.content[earlier - first]
                kind, level, scope = noted[_TYPE], noted[_LEVEL], noted[_SCOPE]
            else:
                kind, level, scope = (table.content[name][earlier] for name in _LINK_COLUMNS)
            if kind == _EPISODIC and scope == values[_SCOPE] and level <= values[_LEVEL]:
                found.append(earlier)
        return found

    def _checkpoint(self) -> None:
        """Write the state noted so far, so the timeline can copy every row."""
        table, timeline = self.table, self.table.timeline
        table.write_state(list(self.pending), list(self.pending.values()))
        timeline.extend(self.changes)
        self.changes.clear()
        timeline.maybe_checkpoint(table.size, table.state)
        self.next_checkpoint = timeline.next_checkpoint()


Handler = Callable[[ViewWrites, Any, int], "int | None"]

# The one table: how each record event class changes the views (exact classes).
HANDLERS: dict[type, Handler] = {
    RecordAggregate.Created: ViewWrites.created,
    RecordAggregate.Superseded: ViewWrites.retracted,
    RecordAggregate.MergedInto: ViewWrites.retracted,
    RecordAggregate.Retracted: ViewWrites.retracted,
    RecordAggregate.Forgotten: ViewWrites.forgotten,
    RecordAggregate.Contested: ViewWrites.contested,
    RecordAggregate.Reinforced: ViewWrites.reinforced,
    RecordAggregate.Corroborated: ViewWrites.reinforced,
    RecordAggregate.Penalized: ViewWrites.penalized,
    RecordAggregate.RelationAdded: ViewWrites.relation_added,
    RecordAggregate.OutcomeRecorded: ViewWrites.touched,
    RecordAggregate.Pinned: ViewWrites.pinned,
    RecordAggregate.Unpinned: ViewWrites.unpinned,
}


def _skip(writes: ViewWrites, event: Any, at: int) -> None:
    """Events of other aggregates: nothing in the views."""


def _audit_only(writes: ViewWrites, event: Any, at: int) -> None:
    """Record events without a handler: only their audit entry (filed by the caller)."""


_DISPATCH: dict[type, tuple[Handler, int | None]] = {}


def _dispatch_of(cls: type) -> tuple[Handler, int | None]:
    """(handler, audit action code or None) of an event class, cached."""
    known = _DISPATCH.get(cls)
    if known is None:
        is_record_event = issubclass(cls, RecordAggregate.Event)
        handler = HANDLERS.get(cls, _audit_only if is_record_event else _skip)
        code = ACTION_CODE.get(getattr(cls, "action", "")) if is_record_event else None
        known = _DISPATCH[cls] = (handler, code)
    return known

"""The read side: every view, fed in log order from the notification log.

A :class:`ReadModel` knows the last notification it reflects (``position``). The engine calls
:meth:`ReadModel.catch_up` after each of its own writes (so callers read their own writes) and
before each query (so writes by other processes show up). Views are derived data:
:meth:`ReadModel.rebuild` replays the whole log, and must give the same views as the live
ones; :meth:`ReadModel.save` checkpoints them to disk with their position, and
:meth:`ReadModel.load` restores them so a restart only replays what came after.
"""

from __future__ import annotations

import gc
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from membrane_es.aggregates.memory_record import MemoryRecord
from membrane_es.embedding.text import search_text
from membrane_es.embedding.vectors import unpack
from membrane_es.projections.embeddings import Block, EmbeddingIndex
from membrane_es.projections.entities import EntityIndex
from membrane_es.projections.graph import RelationGraph
from membrane_es.projections.log_pages import LogReader, NotificationSource
from membrane_es.projections.metrics import ACTION_CODE, MetricsView, figure_of
from membrane_es.projections.records import (
    STATE_NAMES,
    STATUS_CONTESTED,
    STATUS_RETRACTED,
    RecordTable,
    initial_state,
)
from membrane_es.projections.text import TextIndex
from membrane_es.projections.timecodes import micros
from membrane_es.schema.enums import GraphPredicate
from membrane_es.schema.payloads import EntityPayload
from membrane_es.schema.records import Relation

CATCH_UP_BATCH = 500  # notifications read, decoded and applied at a time (larger pages
# gain nothing measurable and leave more freed memory behind)
# A write of at least this many events (a batch) is followed with apply_many, fewer one by one.
FOLLOW_IN_BULK_AT = 16
CHECKPOINT_VERSION = 4  # 2: validity columns, entity names, text lengths; 3: metrics;
# 4: the text index's tokenizer removes every diacritic, as queries do
# The text index is written by a worker thread only for catch-ups at least this long: the
# thread's own malloc arena costs a few MB of resident memory for as long as the process
# lives, which outweighs the overlap it buys on a short catch-up.
TEXT_WORKER_MIN_BACKLOG = 50_000


class ReadModel:
    """The record table (with its state timeline), the scope-partitioned embedding matrix,
    the relation graph, the text index, the entity names and the metrics, and the log
    position they reflect."""

    def __init__(self) -> None:
        self.table = RecordTable()
        self.embeddings = EmbeddingIndex()
        self.graph = RelationGraph()
        self.text = TextIndex()
        self.entities = EntityIndex()
        self.metrics = MetricsView()
        self.position = 0
        self.lock = threading.RLock()

    # --- following the log ----------------------------------------------------------------

    def catch_up(self, source: NotificationSource) -> int:
        """Apply every notification after ``position``; returns how many were applied.

        The log is read in pages (:class:`~membrane_es.projections.log_pages.LogReader`: raw
        rows where the recorder offers them), and each page decoded and applied in bulk
        (:meth:`apply_many`). On a backlog of at least ``TEXT_WORKER_MIN_BACKLOG`` events (a
        rebuild, or catching up on open), the text index is written by one worker thread,
        page after page in order and each page as one statement (SQLite tokenises without
        the GIL), while this thread decodes and applies the next page; every page is indexed,
        and its lengths noted, before this returns."""
        applied = 0
        with self.lock:
            reader = LogReader(source)
            worker: ThreadPoolExecutor | None = None
            indexed: list[Future[None]] = []

            def index_in_worker(documents: list[tuple[int, str]]) -> None:
                assert worker is not None
                indexed.append(worker.submit(self.text.insert_many, documents))

            first_row = self.table.size  # rows the worker indexes are this one and after
            backlog = (source.recorder.max_notification_id() or 0) - self.position
            use_worker = backlog >= TEXT_WORKER_MIN_BACKLOG
            try:
                with _collector_paused():
                    while True:
                        page = reader.page(self.position + 1, CATCH_UP_BATCH)
                        count = page.count
                        if use_worker and count == CATCH_UP_BATCH and worker is None:
                            worker = ThreadPoolExecutor(1, thread_name_prefix="membrane-text")
                        if count:
                            self.apply_many(
                                page.events,
                                page.last_id,
                                index_text=None if worker is None else index_in_worker,
                                count=count,
                            )
                            applied += count
                        if count < CATCH_UP_BATCH:
                            return applied
            finally:
                if worker is not None:
                    worker.shutdown(wait=True)
                    for done in indexed:
                        done.result()  # raises what the worker raised
                    self.text.note_lengths(first_row, self.table.size - 1)

    def follow(self, recordings: Sequence[Any], source: NotificationSource) -> None:
        """Apply what this process just wrote (``Recording`` objects), without reading the log
        back; if anything else was written in between, catch up from the log instead."""
        with self.lock:
            if recordings and recordings[0].notification.id == self.position + 1:
                if len(recordings) >= FOLLOW_IN_BULK_AT:
                    events = [recording.domain_event for recording in recordings]
                    self.apply_many(events, recordings[-1].notification.id)
                else:
                    for recording in recordings:
                        self.apply(recording.domain_event, recording.notification.id)
            self.catch_up(source)

    def apply(self, event: Any, notification_id: int) -> None:
        """Reflect one event (events of other aggregate types are skipped)."""
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)
        if isinstance(event, MemoryRecord.Event):
            # Every event filed under one of the seven audit actions (``Created`` included:
            # ``create``) adds one audit entry.
            self.metrics.audited(event.action, micros(event.timestamp))
        self.position = notification_id

    def apply_many(
        self,
        events: Iterable[Any],
        position: int,
        index_text: Callable[[list[tuple[int, str]]], None] | None = None,
        count: int | None = None,
    ) -> None:
        """Reflect events in log order, ``position`` being the last one's notification id:
        the same views as :meth:`apply` for each in turn, written column at a time.
        ``index_text``, if given, is handed the new ``(row, search text)`` documents instead
        of writing them to the text index here. ``events`` may be an iterator if ``count``
        (an upper bound of how many) is given.

        One pass over the events keeps what depends on order (row numbers, the graph, the
        audit entries, each touched row's state after every change) in Python lists; numpy
        columns, the timeline, the embedding blocks and the text index are then written in
        bulk. State is flushed early only where a reader needs it: a pin (whose salience is
        computed from the row's state then) and a timeline checkpoint (a copy of every row).
        """
        table, metrics, graph = self.table, self.metrics, self.graph
        timeline = table.timeline
        ids, row_of_key = table.ids, table.row_of_key
        first_row = table.size
        if count is None:
            events = list(events)
            count = len(events)
        table.reserve(first_row + count)
        content: list[tuple[Any, ...]] = []  # content columns of rows first_row, first_row+1…
        written = 0  # of ``content``, already in the numpy columns
        types: list[int] = []
        figures: list[float] = []
        pending: dict[int, list[Any]] = {}  # state of every row touched, as it stands now
        changes: list[tuple[Any, ...]] = []  # timeline entries not yet in the timeline
        audit: list[tuple[int, int]] = []
        documents: list[tuple[int, str]] = []
        vectors: list[tuple[int, int, str, bytes]] = []
        next_checkpoint = timeline.next_checkpoint()
        kinds = _KIND_CACHE
        # Bound once: the loop below runs for every event of a rebuild.
        register, content_values, add_relation = table.register, table.content_values, graph.add

        for event in events:
            cls = type(event)
            kind, audit_code = kinds.get(cls) or _kind_of(cls)
            if kind == _SKIP:
                continue
            moment = event.timestamp
            at = micros(moment)
            state: list[Any] | None
            if kind == _CREATED:
                record = event.record
                row = register(record.id, event.originator_id)
                values = content_values(record, at, moment)
                content.append(values)
                types.append(values[0])
                figures.append(figure_of(record))
                for entry in record.audit_log:
                    code = ACTION_CODE.get(str(entry.action))
                    if code is not None:
                        audit.append((at, code))
                for relation in record.relations:
                    add_relation(record.id, relation)
                documents.append((row, search_text(record)))
                if isinstance(record.payload, EntityPayload):
                    self.entities.add(row, record.payload)
                if event.embedding is not None:
                    embedding = event.embedding
                    vectors.append((row, values[2], embedding.model, embedding.vector))
                state = pending[row] = initial_state(record, at, moment)
            elif kind == _RELATION:
                graph.add(ids[row_of_key[event.originator_id]], event.relation)
                state = None
            elif kind == _AUDIT_ONLY:
                state = None
            else:
                row = row_of_key[event.originator_id]
                state = pending.get(row)
                if state is None:
                    state = pending[row] = table.state_row(row)
                if kind == _RETRACTED:
                    state[_BASE], state[_ANCHOR] = 0.0, at
                    state[_RETRACTED_AT], state[_STATUS] = True, STATUS_RETRACTED
                elif kind == _CONTESTED:
                    state[_STATUS] = STATUS_CONTESTED
                    if event.contesting_ref:
                        relation = Relation(
                            predicate=GraphPredicate.CONTESTED_BY.value,
                            target_id=event.contesting_ref,
                            weight=1.0,
                            created_at=moment,
                        )
                        graph.add(ids[row], relation)
                elif kind == _REINFORCED:
                    state[_BASE], state[_ANCHOR], state[_LAST] = event.salience, at, at
                elif kind == _PENALIZED:
                    state[_BASE], state[_ANCHOR] = event.salience, at
                elif kind == _PINNED:
                    # Salience frozen at its value now: computed from the row's columns.
                    table.write_content(first_row + written, content[written:])
                    written = len(content)
                    table.write_state([row], [state])
                    state[_BASE] = table.salience_of(row, at)
                    state[_ANCHOR], state[_PINNED_AT] = at, True
                elif kind == _UNPINNED:
                    state[_ANCHOR], state[_PINNED_AT] = at, False
                state[_UPDATED] = at
            if audit_code is not None:
                audit.append((at, audit_code))
            if state is not None:
                changes.append((at, row, *state))
                if timeline.size + len(changes) >= next_checkpoint:
                    table.write_state(list(pending), list(pending.values()))
                    timeline.extend(changes)
                    changes = []
                    timeline.maybe_checkpoint(table.size, table.state)
                    next_checkpoint = timeline.next_checkpoint()

        table.write_content(first_row + written, content[written:])
        table.write_state(list(pending), list(pending.values()))
        timeline.extend(changes)
        metrics.add_many(first_row, types, figures, audit)
        self.embeddings.add_many(vectors)
        (self.text.add_many if index_text is None else index_text)(documents)
        self.position = position

    def close(self) -> None:
        self.text.close()

    @classmethod
    def rebuild(cls, source: NotificationSource) -> ReadModel:
        """Fresh views from the whole log."""
        model = cls()
        model.catch_up(source)
        return model

    # --- event handlers ---------------------------------------------------------------------

    def _created(self, event: MemoryRecord.Created) -> None:
        record = event.record
        at = micros(event.timestamp)
        row = self.table.add(record, at)
        self.metrics.created(row, record, at)
        for relation in record.relations:
            self.graph.add(record.id, relation)
        self.text.add(row, search_text(record))
        if isinstance(record.payload, EntityPayload):
            self.entities.add(row, record.payload)
        if event.embedding is not None:
            vector = unpack(event.embedding)
            self.embeddings.add(
                row, int(self.table.content["scope"][row]), event.embedding.model, vector
            )

    def _retracted(self, event: Any) -> None:
        at = micros(event.timestamp)
        self._set(event, base=0.0, anchor=at, retracted=True, status=STATUS_RETRACTED, updated=at)

    def _contested(self, event: MemoryRecord.Contested) -> None:
        self._set(event, status=STATUS_CONTESTED, updated=micros(event.timestamp))
        if event.contesting_ref:
            source = self._record_id(event)
            relation = Relation(
                predicate=GraphPredicate.CONTESTED_BY.value,
                target_id=event.contesting_ref,
                weight=1.0,
                created_at=event.timestamp,
            )
            self.graph.add(source, relation)

    def _reinforced(self, event: MemoryRecord.Reinforced) -> None:
        at = micros(event.timestamp)
        self._set(event, base=event.salience, anchor=at, last_reinforced=at, updated=at)

    def _penalized(self, event: MemoryRecord.Penalized) -> None:
        at = micros(event.timestamp)
        self._set(event, base=event.salience, anchor=at, updated=at)

    def _relation_added(self, event: MemoryRecord.RelationAdded) -> None:
        self.graph.add(self._record_id(event), event.relation)

    def _touched(self, event: Any) -> None:
        self._set(event, updated=micros(event.timestamp))

    def _pinned(self, event: MemoryRecord.Pinned) -> None:
        at = micros(event.timestamp)
        row = self._row(event)
        base = self.table.salience_of(row, at)
        self.table.set_state(row, at, base=base, anchor=at, pinned=True, updated=at)

    def _unpinned(self, event: MemoryRecord.Unpinned) -> None:
        at = micros(event.timestamp)
        self._set(event, anchor=at, pinned=False, updated=at)

    def _set(self, event: Any, **values: Any) -> None:
        self.table.set_state(self._row(event), micros(event.timestamp), **values)

    def _row(self, event: Any) -> int:
        return self.table.row_of_key[event.originator_id]

    def _record_id(self, event: Any) -> str:
        return self.table.ids[self._row(event)]

    # --- checkpoints ------------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write every view and the position they reflect (atomically replacing the last)."""
        with self.lock:
            directory.mkdir(parents=True, exist_ok=True)
            staging = directory / "staging"
            staging.mkdir(exist_ok=True)
            table = self.table
            n = table.size
            timeline = table.timeline
            arrays: dict[str, Any] = {f"content.{k}": v[:n] for k, v in table.content.items()}
            arrays.update({f"state.{k}": v[:n] for k, v in table.state.items()})
            metrics = self.metrics
            arrays["metrics.figures"] = metrics.figures[:n]
            arrays["metrics.audit_times"] = metrics.audit_times[: metrics.audit_size]
            arrays["metrics.audit_codes"] = metrics.audit_codes[: metrics.audit_size]
            arrays["timeline.times"] = timeline.times[: timeline.size]
            arrays["timeline.rows"] = timeline.rows[: timeline.size]
            arrays.update({f"timeline.{k}": v[: timeline.size] for k, v in timeline.values.items()})
            for i, (_, _, copies) in enumerate(timeline.checkpoints):
                arrays.update({f"checkpoint.{i}.{k}": v for k, v in copies.items()})
            for scope, block in self.embeddings.blocks.items():
                arrays[f"block.{scope}.matrix"] = block.matrix[: block.size]
                arrays[f"block.{scope}.rows"] = block.rows[: block.size]
            np.savez(staging / "arrays.npz", **arrays)
            manifest = {
                "version": CHECKPOINT_VERSION,
                "position": self.position,
                "ids": table.ids,
                "scopes": table.scope_names,
                "checkpoints": [(count, size) for count, size, _ in timeline.checkpoints],
                "interval": timeline.interval,
                "model": self.embeddings.model,
                "dimensions": self.embeddings.dimensions,
                "skipped": self.embeddings.skipped,
                "graph": self.graph.outgoing,
                "entities": [
                    [row, canonical, list(aliases)]
                    for row, (canonical, aliases) in self.entities.names.items()
                ],
            }
            (staging / "manifest.msgpack").write_bytes(msgspec.msgpack.encode(manifest))
            self.text.save(staging / "text.sqlite")
            current = directory / "current"
            old = directory / "old"
            if current.exists():
                current.rename(old)
            staging.rename(current)
            if old.exists():
                for file in old.iterdir():
                    file.unlink()
                old.rmdir()

    @staticmethod
    def discard(directory: Path) -> None:
        """Remove the checkpoint saved in ``directory`` (if any): the next load finds none."""
        for name in ("current", "staging", "old"):
            shutil.rmtree(directory / name, ignore_errors=True)

    @classmethod
    def load(cls, directory: Path) -> ReadModel | None:
        """The views saved in ``directory``, or None if there is no usable checkpoint."""
        current = directory / "current"
        try:
            manifest = msgspec.msgpack.decode((current / "manifest.msgpack").read_bytes())
        except (OSError, msgspec.DecodeError):
            return None
        if manifest.get("version") != CHECKPOINT_VERSION:
            return None
        model = cls()
        table = model.table
        with np.load(current / "arrays.npz") as arrays:
            n = len(manifest["ids"])
            for columns, prefix in ((table.content, "content"), (table.state, "state")):
                for name in columns:
                    data = arrays[f"{prefix}.{name}"]
                    columns[name] = np.zeros(max(1024, 2 * n), dtype=data.dtype)
                    columns[name][:n] = data
            table.size = n
            table.set_ids(list(manifest["ids"]))
            table.scope_names = list(manifest["scopes"])
            table.scope_ids = {s: i for i, s in enumerate(table.scope_names)}
            timeline = table.timeline
            size = len(arrays["timeline.times"])
            timeline.times = np.zeros(max(1024, 2 * size), dtype="i8")
            timeline.times[:size] = arrays["timeline.times"]
            timeline.rows = np.zeros(max(1024, 2 * size), dtype="i4")
            timeline.rows[:size] = arrays["timeline.rows"]
            for name in timeline.values:
                data = arrays[f"timeline.{name}"]
                timeline.values[name] = np.zeros(max(1024, 2 * size), dtype=data.dtype)
                timeline.values[name][:size] = data
            timeline.size = size
            timeline.interval = manifest["interval"]
            timeline.checkpoints = [
                (count, csize, {k: arrays[f"checkpoint.{i}.{k}"] for k in table.state})
                for i, (count, csize) in enumerate(manifest["checkpoints"])
            ]
            model.metrics.restore(
                arrays["metrics.figures"],
                arrays["metrics.audit_times"],
                arrays["metrics.audit_codes"],
                table.content["type"][:n],
            )
            index = model.embeddings
            index.model, index.dimensions = manifest["model"], manifest["dimensions"]
            index.skipped = manifest["skipped"]
            blocks = {}
            for key in arrays.files:
                if key.startswith("block.") and key.endswith(".rows"):
                    scope = int(key.split(".")[1])
                    matrix = arrays[f"block.{scope}.matrix"]
                    rows = arrays[key]
                    blocks[scope] = Block.of(index.dimensions, rows, matrix)
            index.restore(blocks)
        model.graph.outgoing = {}
        model.graph.incoming = {}
        relation_type = msgspec.convert
        for source, relations in manifest["graph"].items():
            for relation in relations:
                model.graph.add(source, relation_type(relation, Relation, strict=False))
        for row, canonical, aliases in manifest["entities"]:
            model.entities.put(row, canonical, tuple(aliases))
        model.text.load(current / "text.sqlite")
        model.position = manifest["position"]
        return model


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (if it runs) while the log is read, decoded
    and applied: that makes many container objects and no garbage cycles, and the
    collections it would trigger rescan every object the views hold (without the pause,
    most of a rebuild's time at 100k records). It runs again when the catch-up returns."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# Kinds of event for :meth:`ReadModel.apply_many`.
_SKIP, _AUDIT_ONLY, _CREATED, _RELATION = -1, 0, 1, 2
_RETRACTED, _CONTESTED, _REINFORCED, _PENALIZED, _TOUCHED, _PINNED, _UNPINNED = range(3, 10)
_KINDS: dict[type, int] = {
    MemoryRecord.Created: _CREATED,
    MemoryRecord.Superseded: _RETRACTED,
    MemoryRecord.MergedInto: _RETRACTED,
    MemoryRecord.Retracted: _RETRACTED,
    MemoryRecord.Contested: _CONTESTED,
    MemoryRecord.Reinforced: _REINFORCED,
    MemoryRecord.Penalized: _PENALIZED,
    MemoryRecord.RelationAdded: _RELATION,
    MemoryRecord.OutcomeRecorded: _TOUCHED,
    MemoryRecord.Pinned: _PINNED,
    MemoryRecord.Unpinned: _UNPINNED,
}
# Positions in a row's state list (STATE_COLUMNS order).
_BASE, _ANCHOR, _LAST, _UPDATED, _PINNED_AT, _RETRACTED_AT, _STATUS = (
    STATE_NAMES.index(name)
    for name in ("base", "anchor", "last_reinforced", "updated", "pinned", "retracted", "status")
)
_KIND_CACHE: dict[type, tuple[int, int | None]] = {}


def _kind_of(cls: type) -> tuple[int, int | None]:
    """(kind, audit action code or None) of an event class, as :meth:`ReadModel.apply`
    treats it: handled by exact class; audited if it is a record event of the seven actions."""
    known = _KIND_CACHE.get(cls)
    if known is None:
        is_record_event = issubclass(cls, MemoryRecord.Event)
        kind = _KINDS.get(cls, _AUDIT_ONLY if is_record_event else _SKIP)
        code = ACTION_CODE.get(getattr(cls, "action", "")) if is_record_event else None
        known = _KIND_CACHE[cls] = (kind, code)
    return known


_HANDLERS: dict[type, Any] = {
    MemoryRecord.Created: ReadModel._created,
    MemoryRecord.Superseded: ReadModel._retracted,
    MemoryRecord.MergedInto: ReadModel._retracted,
    MemoryRecord.Retracted: ReadModel._retracted,
    MemoryRecord.Contested: ReadModel._contested,
    MemoryRecord.Reinforced: ReadModel._reinforced,
    MemoryRecord.Penalized: ReadModel._penalized,
    MemoryRecord.RelationAdded: ReadModel._relation_added,
    MemoryRecord.OutcomeRecorded: ReadModel._touched,
    MemoryRecord.Pinned: ReadModel._pinned,
    MemoryRecord.Unpinned: ReadModel._unpinned,
}

"""The read side: every view, fed in log order from the notification log.

A :class:`ReadModel` knows the last notification it reflects (``position``). The engine calls
:meth:`ReadModel.catch_up` after each of its own writes (so callers read their own writes) and
before each query (so writes by other processes show up). Views are derived data:
:meth:`ReadModel.rebuild` replays the whole log, and must give the same views as the live
ones; :meth:`ReadModel.save` checkpoints them to disk with their position, and
:meth:`ReadModel.load` restores them so a restart only replays what came after.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import msgspec
import numpy as np

from membrane_es.aggregates.memory_record import MemoryRecord
from membrane_es.embedding.text import search_text
from membrane_es.embedding.vectors import unpack
from membrane_es.projections.embeddings import Block, EmbeddingIndex
from membrane_es.projections.entities import EntityIndex
from membrane_es.projections.graph import RelationGraph
from membrane_es.projections.metrics import MetricsView
from membrane_es.projections.records import (
    STATUS_CONTESTED,
    STATUS_RETRACTED,
    RecordTable,
)
from membrane_es.projections.text import TextIndex
from membrane_es.projections.timecodes import micros
from membrane_es.schema.enums import GraphPredicate
from membrane_es.schema.payloads import EntityPayload
from membrane_es.schema.records import Relation

CATCH_UP_BATCH = 500
CHECKPOINT_VERSION = 3  # 2: validity columns, entity names, text lengths; 3: metrics


class NotificationSource(Protocol):
    """Where the read model reads the log from (an eventsourcing application)."""

    @property
    def recorder(self) -> Any: ...

    @property
    def mapper(self) -> Any: ...


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
        """Apply every notification after ``position``; returns how many were applied."""
        applied = 0
        with self.lock:
            while True:
                notifications = source.recorder.select_notifications(
                    start=self.position + 1, limit=CATCH_UP_BATCH
                )
                for notification in notifications:
                    self.apply(source.mapper.to_domain_event(notification), notification.id)
                    applied += 1
                if len(notifications) < CATCH_UP_BATCH:
                    return applied

    def follow(self, recordings: Sequence[Any], source: NotificationSource) -> None:
        """Apply what this process just wrote (``Recording`` objects), without reading the log
        back; if anything else was written in between, catch up from the log instead."""
        with self.lock:
            if recordings and recordings[0].notification.id == self.position + 1:
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
            for key in arrays.files:
                if key.startswith("block.") and key.endswith(".rows"):
                    scope = int(key.split(".")[1])
                    matrix = arrays[f"block.{scope}.matrix"]
                    rows = arrays[key]
                    index.blocks[scope] = Block.of(index.dimensions, rows, matrix)
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

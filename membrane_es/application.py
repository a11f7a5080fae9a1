"""The eventsourcing wiring: codec, recorder and repository behind the engine.

Configuration is explicit: the engine passes an ``env`` mapping; the class-level defaults
select the msgspec codec and the aggregate cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.application import (
    AggregateNotFoundError,
    Application,
    ProcessingEvent,
    Recording,
)
from eventsourcing.persistence import IntegrityError

from membrane_es.aggregates.identity import record_key
from membrane_es.aggregates.memory_record import MemoryRecord
from membrane_es.clock import MonotonicClock
from membrane_es.embedding.protocol import Embedder
from membrane_es.embedding.vectors import record_embedding
from membrane_es.errors import NotFoundError
from membrane_es.schema.records import Embedding
from membrane_es.schema.records import MemoryRecord as RecordData

APPLICATION_NAME = "memory"

DEFAULT_ENV: dict[str, str] = {
    "MAPPER_TOPIC": "membrane_es.codec:MsgspecMapper",
    "TRANSCODER_TOPIC": "membrane_es.codec:MsgpackTranscoder",
}

# Recently touched records stay in memory (see RecordCache).
CACHE_SIZE = 10_000


class MemoryApplication(Application):
    """The event-sourced store of memory records."""

    name = APPLICATION_NAME
    env = DEFAULT_ENV

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__(env)
        self.cache = RecordCache(CACHE_SIZE)

    # --- loading --------------------------------------------------------------------------

    def load(self, record_id: str) -> MemoryRecord:
        """The record's current aggregate (a private copy), or :class:`NotFoundError`."""
        key = record_key(record_id)
        cached = self.cache.get(key)
        if cached is None:
            try:
                loaded = self.repository.get(key, projector_func=_project)
            except AggregateNotFoundError:
                raise NotFoundError(record_id) from None
            assert isinstance(loaded, MemoryRecord)
            cached = loaded
            self.cache.put(cached)
        else:
            # Another process may have written since: catch up from the log, on a copy,
            # because concurrent readers share the cached object.
            newer = list(self.events.get(key, gt=cached.version))
            if newer:
                cached = _project(cached.copy(), newer)
                self.cache.put(cached)
        return cached.copy()

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """Append the pending events of these aggregates in one atomic write.

        Same steps as the library's ``save``, but our aggregates are recognised by class:
        its runtime ``Protocol`` checks cost more than a durable commit's CPU work.
        """
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        for obj in objs:
            if isinstance(obj, MemoryRecord):
                processing.events.extend(obj.collect_events())
                processing.aggregates[obj.id] = obj
            else:
                processing.collect_events(obj)
        processing.saved_kwargs.update(kwargs)
        recordings = self._record(processing)
        for aggregate in processing.aggregates.values():
            if isinstance(aggregate, MemoryRecord):
                self.cache.put(aggregate)
        self._take_snapshots(processing)
        self._notify(recordings)
        return recordings

    def load_as_of(self, record_id: str, moment: datetime) -> MemoryRecord:
        """The record as it stood at ``moment``: its events up to then, replayed."""
        aggregate: MemoryRecord | None = None
        event: Any
        for event in self.events.get(record_key(record_id)):
            if event.timestamp > moment:
                break
            aggregate = event.mutate(aggregate)
        if aggregate is None:
            raise NotFoundError(record_id)
        return aggregate

    def record_events(self, record_id: str) -> list[Any]:
        """Every event of one record, oldest first."""
        events = list(self.events.get(record_key(record_id)))
        if not events:
            raise NotFoundError(record_id)
        return events

    def exists(self, record_id: str) -> bool:
        return bool(self.recorder.select_events(record_key(record_id), limit=1))

    def last_event_time(self) -> datetime | None:
        """The time of the newest event in the log (to keep the clock ahead of it)."""
        last = self.recorder.max_notification_id()
        if not last:
            return None
        (notification,) = self.recorder.select_notifications(start=last, limit=1)
        event: Any = self.mapper.to_domain_event(notification)
        moment: datetime = event.timestamp
        return moment


def _project(aggregate: Any, events: Any) -> Any:
    """A plain fold: the default projector's runtime Protocol check costs more than replay."""
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


class RecordCache:
    """Committed aggregates by key, least recently used evicted first; thread-safe.

    Only committed state enters (after a successful save); loads hand out copies, so a
    command that fails leaves the cache exactly as it was.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[UUID, MemoryRecord] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: UUID) -> MemoryRecord | None:
        with self._lock:
            aggregate = self._items.get(key)
            if aggregate is not None:
                self._items.move_to_end(key)
            return aggregate

    def put(self, aggregate: MemoryRecord) -> None:
        with self._lock:
            current = self._items.get(aggregate.id)
            if current is not None and current.version > aggregate.version:
                return
            self._items[aggregate.id] = aggregate
            self._items.move_to_end(aggregate.id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class EventStoreUnitOfWork:
    """One command's (or one batch's) view of the write side, with an identity map."""

    def __init__(
        self, app: MemoryApplication, clock: MonotonicClock, embedder: Embedder | None = None
    ) -> None:
        self._app = app
        self._clock = clock
        self._embedder = embedder
        self._loaded: dict[str, MemoryRecord] = {}
        self._created: dict[str, MemoryRecord] = {}
        self._pending: dict[str, MemoryRecord] = {}
        self.deferred = False
        self.recordings: list[Recording[UUID]] = []  # what the commits wrote, in log order

    def get(self, record_id: str) -> MemoryRecord:
        known = self._created.get(record_id) or self._loaded.get(record_id)
        if known is None:
            known = self._loaded[record_id] = self._app.load(record_id)
            # Another engine (or process) may have written it with a clock ahead of ours:
            # this record's next event must still come after its last one.
            self._clock.observe(known.modified_on)
        return known

    def exists(self, record_id: str) -> bool:
        return (
            record_id in self._created or record_id in self._loaded or self._app.exists(record_id)
        )

    def now(self) -> datetime:
        return self._clock.now()

    def save(self, *aggregates: MemoryRecord) -> None:
        for aggregate in aggregates:
            if aggregate.version == 1 and aggregate.pending_events:
                self._created.setdefault(aggregate.record_id, aggregate)
            self._pending[aggregate.record_id] = aggregate
        if not self.deferred:
            self.commit()

    def embed(self, record: RecordData, given: Sequence[float] | None = None) -> Embedding | None:
        return record_embedding(record, self._embedder, given)

    def commit(self) -> None:
        """Write every pending event in one atomic save."""
        if self._pending:
            pending = list(self._pending.values())
            self._pending.clear()
            self.recordings.extend(self._app.save(*pending))

    def rollback(self) -> None:
        """Forget pending work; cached aggregates were copies, so nothing else to undo."""
        self._pending.clear()


__all__ = [
    "APPLICATION_NAME",
    "DEFAULT_ENV",
    "EventStoreUnitOfWork",
    "IntegrityError",
    "MemoryApplication",
]

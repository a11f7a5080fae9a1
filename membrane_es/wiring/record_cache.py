"""The committed record aggregates a process keeps in memory, least recently used evicted."""

from __future__ import annotations

import threading
from collections import OrderedDict
from uuid import UUID

from membrane_es.aggregates.memory_record import RecordAggregate


class RecordCache:
    """Committed aggregates by key, least recently used evicted first; thread-safe.

    Only committed state enters (after a successful save); loads hand out copies, so a
    command that fails leaves the cache exactly as it was.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[UUID, RecordAggregate] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: UUID) -> RecordAggregate | None:
        with self._lock:
            aggregate = self._items.get(key)
            if aggregate is not None:
                self._items.move_to_end(key)
            return aggregate

    def put(self, aggregate: RecordAggregate) -> None:
        with self._lock:
            current = self._items.get(aggregate.id)
            if current is not None and current.version > aggregate.version:
                return
            self._items[aggregate.id] = aggregate
            self._items.move_to_end(aggregate.id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def discard(self, key: UUID) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

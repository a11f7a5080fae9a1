"""What a command handler needs from the write side, and nothing more."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from membrane_es.aggregates.memory_record import MemoryRecord
from membrane_es.schema.records import Embedding
from membrane_es.schema.records import MemoryRecord as RecordData


class UnitOfWork(Protocol):
    """Loads aggregates, hands out event times, and saves every touched aggregate at once."""

    def get(self, record_id: str) -> MemoryRecord:
        """The record's aggregate; :class:`~membrane_es.errors.NotFoundError` if none."""
        ...

    def exists(self, record_id: str) -> bool:
        """Whether a record with this id has ever been created."""
        ...

    def now(self) -> datetime:
        """The next event time: strictly later than every earlier one."""
        ...

    def save(self, *aggregates: MemoryRecord) -> None:
        """Append all pending events of these aggregates in one atomic write."""
        ...

    def embed(self, record: RecordData, given: Sequence[float] | None = None) -> Embedding | None:
        """The vector to store with a new record: ``given`` (checked), else the engine's
        embedder's, else none."""
        ...

"""What a command handler needs from the write side, and nothing more."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from membrane_es.aggregates.memory_record import MemoryRecord


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

"""What a saver keeps between calls, and how it stays right when others write the engine.

:class:`KeptRecords` holds what the records a saver read or wrote hold, as of a log
position: a checkpoint is never revised (stored again, it is a new record), so a kept record
stays current until an event touches it. Before each operation the saver follows the log
from that position (:meth:`KeptRecords.follow`: only the records the newer events touched
are dropped, :meth:`~membrane_es.Membrane.record_changes`), so a write by another object,
thread or process — an erasure, a retraction, a new generation — is seen before the next
read. What is kept is only used while nothing was written after the position it is kept as
of; a record read while someone else wrote is not kept, as the next follow could miss it.

:class:`DecodedValues` keeps the bytes of the base64 values read again (the latest, bounded
in count and bytes), so a value shared by many checkpoints is decoded once.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from typing import Any

from membrane_es import Membrane
from membrane_es.integrations.langgraph_checkpoint.records import DECODED_BYTES, RECORDS_KEPT


class KeptRecords:
    """Record id → what it holds, as of the log position :attr:`at` (the latest used)."""

    def __init__(self, memory: Membrane) -> None:
        self._memory = memory
        self._lock = threading.Lock()  # the saver's async methods run on worker threads
        self._kept: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._at: int | None = None

    @property
    def at(self) -> int | None:
        """The log position what is kept is current at (None: nothing followed yet)."""
        with self._lock:
            return self._at

    def follow(self) -> None:
        """Drop the kept records that the log's events since :attr:`at` touched (every write
        acknowledged before now, by anyone; all of them after a long absence)."""
        with self._lock:
            kept_at = self._at
        if kept_at is None:
            position = self._memory.position
            with self._lock:
                if self._at is None:
                    self._at = position
            return
        changes = self._memory.record_changes(kept_at)
        with self._lock:
            if self._at != kept_at:
                return  # another thread followed meanwhile
            if changes is None:
                self._kept.clear()
                self._at = self._memory.position
                return
            for change in changes.records:
                self._kept.pop(change.record_id, None)
            self._at = changes.position

    def get(self, record_id: str) -> dict[str, Any] | None:
        """What the record holds, if kept and the log has not moved since it was followed."""
        with self._lock:
            if self._at != self._memory.position:
                return None  # the log moved since the saver last followed it
            found = self._kept.get(record_id)
            if found is not None:
                self._kept.move_to_end(record_id)
            return found

    def keep(self, record_id: str, data: dict[str, Any], kept_at: int | None) -> None:
        """Keep what a record read (or written) holds, if the log was followed up to
        ``kept_at`` and not moved on since (else the next follow could miss a change)."""
        if kept_at is None:
            return
        with self._lock:
            if self._at != kept_at:
                return
            self._kept[record_id] = data
            self._kept.move_to_end(record_id)
            while len(self._kept) > RECORDS_KEPT:
                self._kept.popitem(last=False)

    def moved_by_own_write(self, before: int, after: int) -> None:
        """The log moved from ``before`` to ``after`` by the saver's own write alone: what is
        kept as of ``before`` is current at ``after`` too."""
        with self._lock:
            if self._at == before:
                self._at = after


class DecodedValues:
    """Base64 text → its bytes, for the values read again (at most ``RECORDS_KEPT`` of them
    and ``DECODED_BYTES`` bytes, the latest decoded)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decoded: dict[str, bytes] = {}
        self._bytes = 0

    def raw(self, text: str) -> bytes:
        """The bytes of ``text`` (a kept record's strings are the same objects each time,
        so their hash is computed once)."""
        raw = self._decoded.get(text)
        if raw is None:
            raw = base64.b64decode(text)
            with self._lock:
                if text not in self._decoded:
                    self._decoded[text] = raw
                    self._bytes += len(raw)
                while len(self._decoded) > RECORDS_KEPT or self._bytes > DECODED_BYTES:
                    self._bytes -= len(self._decoded.pop(next(iter(self._decoded))))
        return raw

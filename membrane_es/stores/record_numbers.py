"""Record numbers: each record's number in its store, written in its ``Created`` event.

A store numbers its records 1, 2, 3, … in log order: a record's number is one more than the
number of records created before it in the log (so the numbers are dense, never reused, and
the same on every replica and after every rebuild). The entries API's integer ``id`` is the
number of an entry's first record; a store is one tenant's, so the numbers are per tenant.

:meth:`~membrane_es.wiring.application.MemoryApplication.save` writes the numbers into a save's
``Created`` events (in log order) and hands the recorder the first one and how many
(``LogStamp.record_numbers``, see :mod:`membrane_es.stores.log_stamp`). A recorder shared by
several processes (LMDB's, PostgreSQL's) keeps the count of records in its log head, under
the same lock that orders the log, and refuses a save whose first number is not that count
plus one (:class:`RecordNumberBehind`: another process created records meanwhile); the save
then takes numbers after the log's count and is recorded again. A log written before records
carried numbers is counted once, under that lock, at its first numbered write; readers
number such ``Created`` events the same way (by their position among the log's creations),
so ids do not change.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from eventsourcing.persistence import IntegrityError as ConcurrentWrite

INITIAL_VERSION = 1  # an aggregate's first event (a record's ``Created``) has this version


class RecordNumberBehind(ConcurrentWrite):
    """A save's first record number is not one more than the count of records in the log
    (another process created records meanwhile). Nothing was written; a retry must number
    its records from ``count + 1``."""

    def __init__(self, count: int, first: int) -> None:
        self.count = count
        super().__init__(f"the log holds {count} records; a save numbered from {first}")


def check_numbers(count: int, numbers: tuple[int, int] | None, created: int) -> int:
    """The log's record count after a save creating ``created`` records, given the count
    before it; :class:`RecordNumberBehind` unless the save numbered them from ``count + 1``
    (a save without numbers, ``None``, is not checked)."""
    if numbers is not None and created and numbers[0] != count + 1:
        raise RecordNumberBehind(count, numbers[0])
    return count + created


def creations(versions: Iterable[int]) -> int:
    """How many of these events (by their versions) are records' ``Created`` events."""
    return sum(1 for version in versions if version == INITIAL_VERSION)


class RecordNumbering:
    """The numbers this process hands out: the log's record count as last known (None until
    the engine has read it from its views)."""

    def __init__(self) -> None:
        self.count: int | None = None
        self.lock = threading.Lock()

    def start(self, count: int) -> None:
        """The log holds ``count`` records (known once the views have caught up)."""
        with self.lock:
            self.count = count

    def assign(self, created: list[Any]) -> tuple[int, int] | None:
        """Number these ``Created`` events (in log order) after the known count; returns
        (first, how many), or None if the count is not known (they stay unnumbered: readers
        number them by position, which is the same number)."""
        count = self.count
        if count is None or not created:
            return None
        for offset, event in enumerate(created, start=1):
            # Events are frozen once made; this one is not stored yet, and its number is
            # not part of anything applied from it.
            event.__dict__["number"] = count + offset
        return count + 1, len(created)

    def recorded(self, numbers: tuple[int, int] | None) -> None:
        if numbers is not None:
            self.count = numbers[0] + numbers[1] - 1

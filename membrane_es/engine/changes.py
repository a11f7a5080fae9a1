"""The facade's change feed: the log's events from a position on, as the reader may see
them (see :mod:`membrane_es.queries.changes`), read up to the log's head or followed as
they commit.

What is in the log is read a page at a time, through the read side's fastest read
(:class:`~membrane_es.projections.log_pages.LogReader`). Following goes on with the
recorder's own subscription from the last position read — LMDB's wake-up on each commit
(this process's or another's), PostgreSQL's ``LISTEN``/``NOTIFY`` — pumped by a thread of
its own into a bounded queue, so the reader waits with a timeout and Ctrl-C reaches it.
Positions only grow, and a subscription starts after the last one read: nothing is
skipped or handed twice, and a consumer that keeps the last position it handled resumes
there after a restart of either side.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from membrane_es.engine.core import _LEAST_PRIVILEGE, EngineCore
from membrane_es.engine.subscribing import SubscriptionThread
from membrane_es.errors import MembraneError, ValidationError
from membrane_es.projections.log_pages import LogReader, event_decoder
from membrane_es.queries.changes import ChangeFolder
from membrane_es.schema.changes import Change, ChangePage
from membrane_es.schema.records import TrustContext
from membrane_es.schema.validation import check_trust
from membrane_es.wiring.application import MemoryApplication

# Events read from the log at a time while catching up.
PAGE_EVENTS = 1_000
# The most changes one page (HTTP, MCP) returns, and how many it returns unless asked.
MAX_PAGE = 10_000
DEFAULT_PAGE = 100
# How often a waiting reader looks whether the engine closed or the feed was closed.
WAKE_SECONDS = 0.25


def check_after(after: object, field: str = "after") -> int:
    """A log position to read after: a whole number, at least 0."""
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise ValidationError(field, f"must be a log position (a whole number >= 0): {after!r}")
    return after


def check_limit(limit: object, most: int | None, field: str = "limit") -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError(field, f"must be a whole number >= 0: {limit!r}")
    if most is not None and not 1 <= limit <= most:
        raise ValidationError(field, f"must be from 1 to {most}: {limit}")
    return limit


def check_timeout(timeout: object) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ValidationError("timeout", f"must be seconds (a number >= 0) or None: {timeout!r}")
    if not math.isfinite(timeout) or timeout < 0:
        raise ValidationError("timeout", f"must be seconds (a finite number >= 0): {timeout!r}")
    return float(timeout)


class ChangeFeed(Iterator[Change]):
    """The changes after a position, in log order; iterate it, and close it (or use it as a
    context manager) when done. :attr:`position` is the last position read — past changes
    the reader may not see, too — which is where a page or a consumer resumes."""

    def __init__(
        self,
        app: MemoryApplication,
        folder: ChangeFolder,
        *,
        after: int,
        limit: int,
        follow: bool,
        timeout: float | None,
        closing: threading.Event,
    ) -> None:
        self._app = app
        self._change = folder.change  # once per event: bound once
        self._reader = LogReader(app)
        self._decode = event_decoder(app.mapper)
        self.position = after
        self._left = limit or -1  # -1: no limit
        self._follow = follow
        self._timeout = timeout
        self._closing = closing
        self._closed = False
        self.head = app.recorder.max_notification_id() or 0
        self._page: Iterator[tuple[int, Any]] = iter(())
        self._pump: _Pump | None = None

    def __iter__(self) -> ChangeFeed:
        return self

    def __next__(self) -> Change:
        fold = self._change
        while self._left != 0 and not self._closed:
            for position, event in self._page:
                self.position = position
                change = fold(position, event)
                if change is not None:
                    self._left -= 1
                    return change
            if not self._next_events():
                break
        self.close()
        raise StopIteration

    def _next_events(self) -> bool:
        """Make the next events ready; False when the feed ends."""
        if self.position < self.head:
            ids, events = self._reader.numbered(self.position + 1, PAGE_EVENTS)
            ids = [i for i in ids if i <= self.head]
            if ids:
                self._page = zip(ids, events, strict=False)
                return True
            self.head = self.position  # the log ended before the head read at first
        if not self._follow:
            return False
        return self._wait()

    def _wait(self) -> bool:
        """Wait for the next event after :attr:`position`, up to the timeout."""
        pump = self._pump
        if pump is None:
            pump = self._pump = _Pump(self._app, self.position)
            pump.start()
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while not self._closed:
            if self._closing.is_set():
                raise MembraneError("the store was closed while its changes were followed")
            wait = WAKE_SECONDS
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return False
            try:
                item = pump.ready.get(timeout=wait)
            except queue.Empty:
                continue
            if isinstance(item, BaseException):
                raise MembraneError(f"following the log failed: {item}") from item
            if item.id <= self.position:
                continue  # read already (never expected: the subscription starts after it)
            self.head = item.id
            self._page = iter(((item.id, self._decode(item)),))
            return True
        return False

    def close(self) -> None:
        """Stop reading (idempotent); a follow waiting for events ends."""
        self._closed = True
        pump, self._pump = self._pump, None
        if pump is not None:
            pump.stop()

    def __enter__(self) -> ChangeFeed:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class _Pump(SubscriptionThread):
    """The recorder's subscription after a position, handed over through a bounded queue
    (what it raises, too: the reader raises it)."""

    def __init__(self, app: MemoryApplication, after: int) -> None:
        super().__init__(app, "membrane-changes", join_seconds=5.0)
        self._after = after
        self.ready: queue.Queue[Any] = queue.Queue(maxsize=PAGE_EVENTS)

    def _run(self) -> None:
        try:
            self._follow(self._after, self._put)
        except BaseException as error:
            if not self._stopped.is_set():
                self._put(error)

    def _put(self, item: Any) -> bool:
        while not self._stopped.is_set():
            try:
                self.ready.put(item, timeout=WAKE_SECONDS)
                return True
            except queue.Full:
                continue
        return False


class Changes(EngineCore):
    """The change feed on the facade."""

    def changes(
        self,
        *,
        after: int = 0,
        limit: int = 0,
        follow: bool = False,
        timeout: float | None = None,
        trust: TrustContext | None = _LEAST_PRIVILEGE,
    ) -> ChangeFeed:
        """The store's changes after log position ``after``, in log order, as typed
        :class:`~membrane_es.schema.changes.Change` structs: position, log and event time,
        record, operation, actor, rationale, the fields it changed and the record right
        after it.

        :param after: the last position already handled (0: from the start). A consumer
            that keeps the position of the last change it handled and passes it here again
            resumes with no gap and no repeat, across restarts of either side: positions
            are given once and never change.
        :param limit: at most this many changes (0: no limit).
        :param follow: once the log is read, wait for new events as they commit (LMDB: the
            writer's wake-up; PostgreSQL: ``NOTIFY``) until the feed is closed or ...
        :param timeout: ... this many seconds pass with nothing new (None: no timeout).
        :param trust: who reads. Changes to records it may read in full come whole; to
            records exactly one level above its ceiling, without content (``redacted``:
            the record's structure, no fields, actor or rationale); to any other, not at
            all. Erased content appears in no change: a forgotten record's changes carry
            its structure only, and its ``forgotten`` change says when it was erased.
            Default: least privilege.

        Close the feed (or use it in a ``with`` block) when leaving it before its end.
        """
        trust = check_trust(trust)
        after = check_after(after)
        limit = check_limit(limit, None)
        timeout = check_timeout(timeout)
        if not isinstance(follow, bool):
            raise ValidationError("follow", f"must be true or false: {follow!r}")
        app = self._app
        # Keys read before another process destroyed them must not open its records again.
        app.keys.drop_cache()
        return ChangeFeed(
            app,
            ChangeFolder(app, trust),
            after=after,
            limit=limit,
            follow=follow,
            timeout=timeout,
            closing=self._closing,
        )

    def changes_page(
        self,
        *,
        after: int = 0,
        limit: int = DEFAULT_PAGE,
        trust: TrustContext | None = _LEAST_PRIVILEGE,
    ) -> ChangePage:
        """One bounded page of :meth:`changes` (``limit`` from 1 to 10,000): the changes
        and the position to read the next page after."""
        limit = check_limit(limit, MAX_PAGE)
        with self.changes(after=after, limit=limit, trust=trust) as feed:
            found = list(feed)
            head = feed.head
            # Caught up past changes the reader may not see: the page says so.
            next_after = feed.position if len(found) == limit else max(feed.position, head)
        return ChangePage(changes=found, next_after=next_after, head=head)

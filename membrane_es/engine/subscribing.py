"""A thread that reads the recorder's subscription to the log: what the log follower and the
change feed's follow share.

The recorder's own subscription (LMDB: the writer's wake-up; PostgreSQL: ``LISTEN``/``NOTIFY``
waking a pull of the new rows) blocks in its iteration, so it runs on a thread of its own.
:meth:`SubscriptionThread.stop` must reach a thread blocked there: it stops the subscription
the thread holds, which ends the iteration. The subscription is registered under a lock
before it is iterated, and the stop flag is looked at after that, so a stop that comes
before the subscription exists is never lost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from eventsourcing.persistence import Notification, Subscription

from membrane_es.wiring.application import MemoryApplication


class SubscriptionThread:
    """Runs :meth:`_run` on a daemon thread; :meth:`_follow` there hands the log's
    notifications after a position to a function until told to stop."""

    def __init__(self, app: MemoryApplication, name: str, join_seconds: float | None) -> None:
        self._app = app
        self._join_seconds = join_seconds
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._subscription: Subscription[Any] | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def subscribed(self) -> bool:
        """Whether a subscription is being read now."""
        return self._subscription is not None and not self._stopped.is_set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop (idempotent); returns once the thread has ended (or after the join timeout
        given at construction)."""
        self._stopped.set()
        with self._lock:
            subscription = self._subscription
        if subscription is not None:
            subscription.stop()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._join_seconds)

    def _run(self) -> None:
        raise NotImplementedError

    def _follow(self, after: int, handle: Callable[[Notification], bool]) -> None:
        """Subscribe after position ``after`` and hand each notification to ``handle``
        until it returns False, :meth:`stop` is called or the subscription ends; what the
        subscription raises is raised."""
        with self._app.recorder.subscribe(gt=after) as subscription:
            with self._lock:
                self._subscription = subscription
            try:
                if self._stopped.is_set():
                    return  # stopped before the subscription could be
                for notification in subscription:
                    if not handle(notification):
                        return
            finally:
                with self._lock:
                    self._subscription = None

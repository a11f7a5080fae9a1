"""Following a shared log: other processes' writes reach this process's views as they commit.

A :class:`LogFollower` subscribes to the log through the recorder's own subscription
(eventsourcing's PostgreSQL one: ``LISTEN``/``NOTIFY`` wakes a pull of the new rows) from the
position the views reflect, and applies each notification it is handed, in log order,
skipping what the views already hold (this process's own writes are applied as they
commit). If the subscription fails (the database restarted, a connection dropped), it
subscribes again from the views' position after a pause; meanwhile :attr:`following` is
false and the engine catches its views up at each read instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from eventsourcing.persistence import Notification, Subscription

from membrane_es.projections.log_pages import event_decoder
from membrane_es.projections.read_model import ReadModel
from membrane_es.wiring.application import MemoryApplication

log = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 0.2
RETRY_MAX_SECONDS = 5.0


class LogFollower:
    """Applies the log to the views current at each moment (``views()``), on a thread of its
    own; ``applied(views, event)`` is called after each event it applies (``event`` None when
    it caught up from the log instead)."""

    def __init__(
        self,
        app: MemoryApplication,
        views: Callable[[], ReadModel],
        applied: Callable[[ReadModel, Any | None], None],
    ) -> None:
        self._app = app
        self._views = views
        self._applied = applied
        self._decode = event_decoder(app.mapper)
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._subscription: Subscription[Any] | None = None
        self._thread = threading.Thread(target=self._run, name="membrane-follower", daemon=True)
        self.following = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop following (idempotent); returns once the thread has ended."""
        self._stopped.set()
        with self._lock:
            subscription = self._subscription
        if subscription is not None:
            subscription.stop()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        pause = RETRY_FIRST_SECONDS
        while not self._stopped.is_set():
            try:
                with self._app.recorder.subscribe(gt=self._views().position) as subscription:
                    with self._lock:
                        self._subscription = subscription
                    if self._stopped.is_set():
                        return
                    self.following = True
                    delivered = 0
                    for notification in subscription:
                        self._apply(notification, delivered)
                        delivered = notification.id
                        pause = RETRY_FIRST_SECONDS
            except Exception:
                if self._stopped.is_set():
                    return
                log.exception("following the log failed; subscribing again in %.1f s", pause)
            finally:
                self.following = False
                with self._lock:
                    self._subscription = None
            self._stopped.wait(pause)
            pause = min(pause * 2, RETRY_MAX_SECONDS)

    def _apply(self, notification: Notification, delivered: int) -> None:
        """Apply one notification; ``delivered`` is the last one the subscription handed
        over before it (0 at first)."""
        views = self._views()
        with views.lock:
            if notification.id <= views.position:
                return  # applied already (this process wrote it, or a read caught up)
            if views.position < delivered:
                # These views lack something handed over before (they replaced the ones
                # it went to, e.g. a rebuild): read the log from where they stand.
                views.catch_up(self._app)
                event = None
            else:
                event = self._decode(notification)
                views.apply_many([event], notification.id)
        self._applied(views, event)

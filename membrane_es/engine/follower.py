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
from collections.abc import Callable
from typing import Any

from eventsourcing.persistence import Notification

from membrane_es.engine.subscribing import SubscriptionThread
from membrane_es.projections.log_pages import event_decoder
from membrane_es.projections.read_model import ReadModel
from membrane_es.wiring.application import MemoryApplication

log = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 0.2
RETRY_MAX_SECONDS = 5.0


class LogFollower(SubscriptionThread):
    """Applies the log to the views current at each moment (``views()``), on a thread of its
    own; ``applied(views, event)`` is called after each event it applies (``event`` None when
    it caught up from the log instead)."""

    def __init__(
        self,
        app: MemoryApplication,
        views: Callable[[], ReadModel],
        applied: Callable[[ReadModel, Any | None], None],
    ) -> None:
        super().__init__(app, "membrane-follower", join_seconds=None)
        self._views = views
        self._applied = applied
        self._decode = event_decoder(app.mapper)
        self._delivered = 0  # the last notification this subscription handed over
        self._pause = RETRY_FIRST_SECONDS

    @property
    def following(self) -> bool:
        """Whether the log is followed now (if not, reads catch the views up themselves)."""
        return self.subscribed

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._delivered = 0
            try:
                self._follow(self._views().position, self._handle)
            except Exception:
                if self._stopped.is_set():
                    return
                log.exception("following the log failed; subscribing again in %.1f s", self._pause)
            self._stopped.wait(self._pause)
            self._pause = min(self._pause * 2, RETRY_MAX_SECONDS)

    def _handle(self, notification: Notification) -> bool:
        """Apply one notification handed over (and go on: True)."""
        self._apply(notification, self._delivered)
        self._delivered = notification.id
        self._pause = RETRY_FIRST_SECONDS
        return True

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

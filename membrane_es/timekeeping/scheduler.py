"""Run a task every so often on a background thread, until stopped.

As the reference's schedulers: the first run comes one interval after start; an error in a
run is logged and the loop goes on; starting twice is refused, stopping is idempotent and
safe before start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class PeriodicTask:
    def __init__(self, name: str, interval: float, work: Callable[[], object]) -> None:
        if not interval > 0:
            raise ValueError("interval must be > 0 seconds")
        self.name = name
        self.interval = interval
        self._work = work
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.failures = 0
        self.ran = threading.Condition()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} is already running")
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def wait_for_runs(self, count: int, timeout: float) -> bool:
        """Block until at least ``count`` runs have finished (for callers that must know)."""
        with self.ran:
            return self.ran.wait_for(lambda: self.runs >= count, timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._work()
            except Exception:  # the loop must outlive one bad run, as the reference's does
                self.failures += 1
                log.exception("%s run failed", self.name)
            with self.ran:
                self.runs += 1
                self.ran.notify_all()

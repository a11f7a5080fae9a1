"""Waiting for the signals that stop a server (SIGINT, SIGTERM), for every server we run,
and acting on SIGHUP (reload) meanwhile where the server asks to.

The handler only notes the signal. Python runs a handler in the main thread between two
bytecodes of whatever it was doing, here waiting: a handler that set a ``threading.Event``
could take the lock the interrupted ``Event.wait`` already holds, and the server would hang
on its stop signal (it did, about once in thirty stops right after start). Noting a signal
takes no lock, and the waiting loop reads the note."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from types import FrameType

log = logging.getLogger("membrane_es.daemon")

POLL_SECONDS = 0.1  # how soon a noted signal is acted on


def wait_for_stop_signal(on_hangup: Callable[[], object] | None = None) -> None:
    """Block until SIGINT or SIGTERM arrives (main thread only); the previous handlers are
    back in place when this returns, so the caller shuts down in its own order. With
    ``on_hangup``, each SIGHUP meanwhile calls it (from this loop, not the handler)."""
    received: list[int] = []
    hangups: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)  # no lock, no logging: see above

    def on_hangup_signal(signum: int, frame: FrameType | None) -> None:
        hangups.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    if on_hangup is not None and hasattr(signal, "SIGHUP"):
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hangup_signal)
    try:
        while not received:
            time.sleep(POLL_SECONDS)
            if hangups and on_hangup is not None:
                del hangups[:]
                log.info("received SIGHUP, reloading")
                on_hangup()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("received signal %d, shutting down", received[0])

"""Waiting for the signals that stop a server (SIGINT, SIGTERM), for every server we run."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

log = logging.getLogger("membrane_es.daemon")


def wait_for_stop_signal() -> None:
    """Block until SIGINT or SIGTERM arrives (main thread only); the previous handlers are
    back in place when this returns, so the caller shuts down in its own order."""
    received = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received signal %d, shutting down", signum)
        received.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not received.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

"""A server's wait for its stop signal: it returns on SIGTERM or SIGINT, handlers restored."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from membrane_es.serving.signals import wait_for_stop_signal


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_wait_ends_on_a_stop_signal_and_puts_the_handlers_back(signum: int) -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    sender = threading.Timer(0.2, os.kill, (os.getpid(), signum))
    sender.start()
    try:
        wait_for_stop_signal()
    finally:
        sender.cancel()
    assert {sig: signal.getsignal(sig) for sig in before} == before

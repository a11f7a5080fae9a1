"""The ``membraned`` command: Membrane's daemon, its Go-style flags passed through unchanged.

Its dependencies are the ``server`` extra; without them it says so in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def membraned(argv: Sequence[str] | None = None) -> int:
    try:
        from membrane_es.grpc_server import membraned as daemon
    except ImportError as error:
        print(
            f"membraned: the daemon needs the 'server' extra ({error.name} is not installed): "
            "pip install 'membrane-es[server]'",
            file=sys.stderr,
        )
        return 1
    return daemon.main(argv)

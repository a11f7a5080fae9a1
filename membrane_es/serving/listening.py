"""Where a server listens, and the warning it owes when that is beyond this machine.

Every server here binds to the loopback interface unless told otherwise. One told to listen
on another interface without API keys serves every record to whoever can reach it: it says
so on standard error as it starts.
"""

from __future__ import annotations

import ipaddress
import sys
from typing import TextIO

LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})


def host_of(address: str) -> str:
    """The host part of ``host:port`` (``[::1]:80`` → ``::1``; ``:9090`` → ``""``)."""
    host = address.rpartition(":")[0] if ":" in address else address
    return host.strip("[]")


def is_loopback(address: str) -> bool:
    """Whether ``host:port`` listens on this machine only (an empty host, as in Go's
    ``:9090``, means every interface)."""
    host = host_of(address)
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # every interface (""), or a name that may resolve to any of them


def warn_if_open(
    program: str, what: str, address: str, keyed: bool, stream: TextIO | None = None
) -> bool:
    """Warn on standard error (or ``stream``) when ``what`` listens on ``address`` beyond
    loopback without keys; True when it warned."""
    if keyed or is_loopback(address):
        return False
    print(
        f"{program}: warning: {what} listens on {address}, beyond this machine, without API "
        "keys: anyone who can reach it may read and write every record. Set MEMBRANE_API_KEY "
        "(or a keys file), or listen on 127.0.0.1.",
        file=stream or sys.stderr,
    )
    return True

"""A key entered once per browser session.

Pages are plain links and forms (no script), so a browser cannot add a bearer header to
them. The key is posted once to ``/ui/key``; the server checks it against the key ring and
answers with a random session token in a cookie (HttpOnly, SameSite=Strict, scoped to
``/ui``, no expiry: it ends with the browser session). The token maps to the key's caller in
this process only, so the key itself is never stored in the browser, and a restart asks for
it again. A request may also carry ``Authorization: Bearer …`` as the API takes it. A server
without keys needs none: every reader is the unrestricted default caller.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from typing import Any

from litestar import Request

from membrane_es.access.ceiling import Caller
from membrane_es.access.keys import BEARER, KeyRing

COOKIE = "membrane_ui_session"
MAX_SESSIONS = 4096  # the oldest sessions are dropped beyond this (they enter the key again)


class Sessions:
    """Session tokens → callers, the most recent :data:`MAX_SESSIONS` of them."""

    def __init__(self) -> None:
        self._callers: OrderedDict[str, Caller] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, caller: Caller) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._callers[token] = caller
            while len(self._callers) > MAX_SESSIONS:
                self._callers.popitem(last=False)
        return token

    def caller(self, token: str | None) -> Caller | None:
        if not token:
            return None
        with self._lock:
            return self._callers.get(token)

    def close(self, token: str | None) -> None:
        with self._lock:
            self._callers.pop(token or "", None)


def caller_of(request: Request[Any, Any, Any], sessions: Sessions) -> Caller | None:
    """Who is reading: the key's caller (from the header, else the session), or None."""
    keys: KeyRing = request.app.state.key_ring
    header = request.headers.get("authorization")
    if not keys.enabled or header is not None:
        return keys.caller_for(header)
    return sessions.caller(request.cookies.get(COOKIE))


def check_key(keys: KeyRing, key: str) -> Caller | None:
    """The caller a key entered in the form authenticates, or None."""
    key = key.strip()
    return keys.caller_for(BEARER + key) if key else None

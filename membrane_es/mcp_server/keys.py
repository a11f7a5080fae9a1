"""API keys on the MCP server's streamable HTTP: the same keys, checked the same way, as the
HTTP entries API and the gRPC daemon (:class:`~membrane_es.access.keys.KeyRing`).

With keys configured every request needs ``Authorization: Bearer <key>`` (else 401). A key
serves the server's one store, so a key of another tenant is refused (403). The key's ceiling
narrows the server's for the requests it makes: the lower sensitivity, and the scopes both
allow (a key whose scopes share none with the server's is refused). An MCP session stays
with the key that opened it: a request in it with another key is refused (403).
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from membrane_es.access.keys import DEFAULT_TENANT, Caller, KeyRing
from membrane_es.schema.enums import Sensitivity

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_HEADER = "mcp-session-id"
_RANK = {level: rank for rank, level in enumerate(Sensitivity)}

# The ceiling of the request being served (None: the server's own), read by the tools.
REQUEST_CEILING: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "membrane_mcp_ceiling", default=None
)


def narrowed(server: Caller, key: Caller) -> Caller | None:
    """The server's ceiling narrowed by a key's; None when they share no scope."""
    level = min(server.max_sensitivity, key.max_sensitivity, key=_RANK.__getitem__)
    if server.scopes and key.scopes:
        scopes = tuple(scope for scope in server.scopes if scope in key.scopes)
        if not scopes:
            return None
    else:
        scopes = server.scopes or key.scopes
    return Caller(max_sensitivity=level, scopes=scopes, name=key.name)


class KeyCheck:
    """ASGI middleware in front of the MCP app: authenticates each HTTP request with ``keys``
    and serves it under its key's ceiling (:data:`REQUEST_CEILING`)."""

    def __init__(self, app: App, keys: KeyRing, server: Caller) -> None:
        self._app = app
        self._keys = keys
        self._server = server
        self._sessions: dict[str, str] = {}  # MCP session id -> the name of its key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers", [])
        }
        caller = self._keys.caller_for(headers.get("authorization"))
        if caller is None:
            await _refuse(send, 401, "missing or invalid bearer token")
            return
        if caller.tenant != DEFAULT_TENANT:
            await _refuse(send, 403, "this key is another tenant's; this server serves one store")
            return
        ceiling = narrowed(self._server, caller)
        if ceiling is None:
            await _refuse(send, 403, "this key's scopes are outside this server's")
            return
        session = headers.get(SESSION_HEADER)
        if session is not None and self._sessions.get(session, caller.name) != caller.name:
            await _refuse(send, 403, "this session was opened with another key")
            return

        async def pinning(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.decode("latin-1").lower() == SESSION_HEADER:
                        self._sessions.setdefault(value.decode("latin-1"), caller.name)
            await send(message)

        token = REQUEST_CEILING.set(ceiling)
        try:
            await self._app(scope, receive, pinning)
        finally:
            REQUEST_CEILING.reset(token)


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

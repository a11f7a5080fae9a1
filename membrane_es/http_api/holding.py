"""Every HTTP request runs inside :meth:`~membrane_es.serving.tenants.Tenants.serving`: the tenant
stores it takes stay open until its response has been sent, however many stores a process
keeps open and whichever thread the handler runs on (the request's context goes with it)."""

from __future__ import annotations

from litestar.types import ASGIApp, Receive, Scope, Send

from membrane_es.serving.tenants import Tenants


def holding_stores(app: ASGIApp) -> ASGIApp:
    """ASGI middleware: hold the stores a request takes until it ends."""

    async def held(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        tenants: Tenants | None = getattr(scope["app"].state, "tenant_stores", None)
        if tenants is None:
            await app(scope, receive, send)
            return
        with tenants.serving():
            await app(scope, receive, send)

    return held

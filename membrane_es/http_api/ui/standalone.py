"""The inspector alone, over one local store (``membrane-es ui STORE``): no API routes, so
nothing can be written through it; ``/`` leads to ``/ui/``."""

from __future__ import annotations

from litestar import Litestar, get
from litestar.response import Redirect

from membrane_es.access.keys import KeyRing
from membrane_es.http_api.holding import holding_stores
from membrane_es.http_api.ui.routes import PREFIX, inspector
from membrane_es.serving.tenants import Tenants


@get("/", include_in_schema=False, sync_to_thread=False)
def _home() -> Redirect:
    return Redirect(PREFIX + "/", status_code=303)


def inspector_app(tenants: Tenants, keys: KeyRing | None = None) -> Litestar:
    """An ASGI application serving only the inspector over ``tenants`` (no keys: every
    reader is the store's owner, as on the command line)."""
    app = Litestar(
        route_handlers=[_home, inspector()],
        openapi_config=None,
        middleware=[holding_stores],
        logging_config=None,  # the process's logging stays as its owner set it up
    )
    app.state.tenant_stores = tenants
    app.state.key_ring = keys or KeyRing()
    return app

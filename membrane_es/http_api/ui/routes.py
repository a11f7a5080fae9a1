"""The inspector's routes under ``/ui``: read-only pages over the engine, as HTML.

Each page is rendered on the server from a Jinja template; there is no script, and the
page's Content-Security-Policy lets it load only the inspector's own style sheet, so a
browser showing it asks nothing of any other host. The only POSTs are entering the key and
leaving (they write nothing to the store).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from litestar import Controller, Request, Response, Router, get, post
from litestar.di import Provide
from litestar.exceptions import HTTPException, NotFoundException
from litestar.response import File, Redirect

from membrane_es import __version__
from membrane_es.ceiling import Caller
from membrane_es.engine import Membrane
from membrane_es.errors import (
    AccessDeniedError,
    MembraneError,
    NotFoundError,
    ValidationError,
    status_of,
)
from membrane_es.http_api.ui import charts, reads
from membrane_es.http_api.ui.context import Reading
from membrane_es.http_api.ui.sessions import COOKIE, Sessions, caller_of, check_key
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.timestamps import rfc3339
from membrane_es.tenants import Tenants

log = logging.getLogger("membrane_es.http")

PREFIX = "/ui"
HERE = Path(__file__).parent
STATIC = {"ui.css": "text/css"}
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
}

_templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_templates.filters["moment"] = rfc3339


class KeyRequired(Exception):
    """The server has keys and the request carried none that it knows."""


def _page(
    template: str,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    *,
    here: str = PREFIX + "/",
    keep: Sequence[tuple[str, str]] = (),
    **values: Any,
) -> Response[str]:
    """A page rendered from ``template``; ``here`` and ``keep``: the page the time control
    reloads, and the parameters of its own that it keeps (the query, the hops…)."""
    html = _templates.get_template(template).render(
        prefix=PREFIX,
        version=__version__,
        types=[t.value for t in MemoryType],
        here=here,
        keep=list(keep),
        **values,
    )
    return Response(
        html,
        status_code=status,
        media_type="text/html; charset=utf-8",
        headers={**SECURITY_HEADERS, **(headers or {})},
    )


def _reader(request: Request[Any, Any, Any], sessions: Sessions) -> tuple[Membrane, Reading]:
    caller = caller_of(request, sessions)
    if caller is None:
        raise KeyRequired
    tenants: Tenants = request.app.state.tenant_stores
    params = {k: v for k, v in request.query_params.items() if isinstance(v, str)}
    return tenants.get(caller.tenant), Reading.from_params(caller, params)


def _page_number(text: str | None) -> int:
    text = (text or "1").strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 100_000:
        raise ValidationError("page", f"{text!r} is not a page number (1 or more)")
    return int(text)


def _types(values: list[str]) -> list[str]:
    known = [t.value for t in MemoryType]
    for value in values:
        if value and value not in known:
            raise ValidationError(
                "type", f"{value!r} is not a memory type; one of {', '.join(known)}"
            )
    return [value for value in values if value]


def _hops(text: str | None) -> int:
    text = (text or "2").strip()
    if not (text.isascii() and text.isdigit()) or int(text) > reads.MAX_HOPS:
        raise ValidationError("hops", f"{text!r}: a number of hops from 0 to {reads.MAX_HOPS}")
    return int(text)


def search_page(
    memory: Membrane, reading: Reading, task: str, types: list[str], page: int
) -> Response[str]:
    """The search page: a ranked read's page ``page``, each hit with its score's parts."""
    found = reads.search(memory, reading, task, types, page)
    bars = {
        hit.record.id: charts.share_svg(
            charts.share_bars([(s.name, s.part) for s in hit.shares]), f"why-{i}"
        )
        for i, hit in enumerate(found.hits)
    }
    keep = [("q", task), *(("type", t) for t in types)] if task or types else []
    return _page(
        "search.html", keep=keep, reading=reading, task=task, chosen=types, found=found, bars=bars
    )


def record_page(memory: Membrane, reading: Reading, record_id: str, page: int) -> Response[str]:
    """A record's page: the record at the reader's moment and page ``page`` of its events."""
    shown = reads.record_page(memory, reading, record_id, page)
    return _page("record.html", here=f"{PREFIX}/records/{record_id}", reading=reading, shown=shown)


# --- pages -------------------------------------------------------------------------------------


def _next_page(value: object) -> str:
    """Where to go after entering the key: a page of the inspector, nothing else."""
    text = str(value or "")
    return text if text.startswith(PREFIX + "/") and "//" not in text else PREFIX + "/"


class Inspector(Controller):
    """The pages (a controller: Litestar makes fresh handlers for each application)."""

    @get("/", sync_to_thread=True)
    def search(self, request: Request[Any, Any, Any], sessions: Sessions) -> Response[str]:
        """Search (a task, or none: by salience), explained, under the reader's trust and moment."""
        memory, reading = _reader(request, sessions)
        task = request.query_params.get("q", "")
        types = _types(request.query_params.getall("type", []))
        page = _page_number(request.query_params.get("page"))
        return search_page(memory, reading, task, types, page)

    @get("/records/{record_id:str}", sync_to_thread=True)
    def record(
        self, request: Request[Any, Any, Any], sessions: Sessions, record_id: str
    ) -> Response[str]:
        """A record at the reader's moment and its timeline up to then."""
        memory, reading = _reader(request, sessions)
        page = _page_number(request.query_params.get("page"))
        return record_page(memory, reading, record_id, page)

    @get("/records/{record_id:str}/graph", sync_to_thread=True)
    def graph_page(
        self, request: Request[Any, Any, Any], sessions: Sessions, record_id: str
    ) -> Response[str]:
        """The records related to one, within a few hops, as the reader sees them then."""
        memory, reading = _reader(request, sessions)
        hops = _hops(request.query_params.get("hops"))
        graph = reads.neighbourhood(memory, reading, record_id, hops)
        drawing = charts.ring_layout(graph)
        return _page(
            "graph.html",
            here=f"{PREFIX}/records/{record_id}/graph",
            keep=[("hops", str(hops))],
            reading=reading,
            graph=graph,
            drawing=drawing,
            marks=charts.TYPE_MARK,
        )

    @get("/metrics", sync_to_thread=True)
    def metrics_page(self, request: Request[Any, Any, Any], sessions: Sessions) -> Response[str]:
        """Records by type and state, salience distribution and records written per day."""
        memory, reading = _reader(request, sessions)
        figures = reads.metrics(memory, reading)
        snapshot = figures.snapshot
        by_type = charts.column_chart(
            "Records by type", sorted(snapshot["records_by_type"].items()), width=420
        )
        by_state = charts.column_chart(
            "Records by state", list(figures.by_state.items()), width=420
        )
        salience = charts.column_chart(
            "Salience distribution", list(snapshot["salience_distribution"].items()), width=420
        )
        per_day = charts.column_chart(
            f"Records written per day, the {reads.DAYS} days up to the moment",
            [(day.strftime("%m-%d"), count) for day, count in figures.per_day],
            label_every=5,
            names=[day.date().isoformat() for day, _ in figures.per_day],
        )
        return _page(
            "metrics.html",
            here=f"{PREFIX}/metrics",
            reading=reading,
            figures=figures,
            charts=[by_type, by_state, salience, per_day],
        )

    @get("/integrity", sync_to_thread=True)
    def integrity_page(self, request: Request[Any, Any, Any], sessions: Sessions) -> Response[str]:
        """The hash chain's verification and head, run when asked (``run=1``): it walks the
        whole log. It covers every record of the store, so it needs a key without a ceiling."""
        memory, reading = _reader(request, sessions)
        if not reading.caller.unrestricted:
            raise AccessDeniedError("the log")
        report = reads.integrity(memory) if request.query_params.get("run") == "1" else None
        return _page("integrity.html", here=f"{PREFIX}/integrity", reading=reading, report=report)

    @get("/key", sync_to_thread=False)
    def key_form(self, request: Request[Any, Any, Any]) -> Response[Any]:
        target = _next_page(request.query_params.get("next"))
        if not request.app.state.key_ring.enabled:  # nothing to enter
            return Redirect(target, status_code=303)
        return _page("key.html", reading=None, next=target)

    @post("/key", status_code=303)
    async def enter_key(self, request: Request[Any, Any, Any], sessions: Sessions) -> Response[Any]:
        form = await request.form()
        target = _next_page(form.get("next"))
        caller: Caller | None = check_key(request.app.state.key_ring, str(form.get("key") or ""))
        if caller is None:
            return _page(
                "key.html", status=401, reading=None, next=target, refused="That key is not valid."
            )
        redirect: Response[Any] = Redirect(target, status_code=303)
        redirect.set_cookie(
            COOKIE, sessions.open(caller), path=PREFIX, httponly=True, samesite="strict"
        )
        return redirect

    @post("/key/forget", status_code=303)
    async def forget_key(
        self, request: Request[Any, Any, Any], sessions: Sessions
    ) -> Response[Any]:
        sessions.close(request.cookies.get(COOKIE))
        redirect: Response[Any] = Redirect(f"{PREFIX}/key", status_code=303)
        redirect.delete_cookie(COOKIE, path=PREFIX)
        return redirect

    @get("/static/{name:str}", sync_to_thread=False)
    def static_file(self, name: str) -> File:
        media_type = STATIC.get(name)
        if media_type is None:
            raise NotFoundException(f"no file {name!r}")
        return File(
            path=HERE / "static" / name,
            filename=name,
            media_type=media_type,
            content_disposition_type="inline",
        )


# --- errors -----------------------------------------------------------------------------------


def _key_required(request: Request[Any, Any, Any], error: KeyRequired) -> Response[str]:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return _page("key.html", status=401, reading=None, next=_next_page(quote(target, safe="/?=&")))


def _membrane_error(request: Request[Any, Any, Any], error: MembraneError) -> Response[str]:
    status = status_of(error)[1]
    if isinstance(error, NotFoundError):
        message = "No such record here at this moment (or none you may see)."
    elif isinstance(error, AccessDeniedError):
        message = "This needs a key without a ceiling: it covers every record of the store."
    elif isinstance(error, ValidationError):
        message = f"{error.field}: {error.message}"
    else:
        message = str(error)
    if status >= 500:
        log.error("inspector request failed: %s", error)
    return _page("error.html", status=status, reading=None, status_code=status, message=message)


def _http_error(request: Request[Any, Any, Any], error: HTTPException) -> Response[str]:
    return _page(
        "error.html",
        status=error.status_code,
        reading=None,
        status_code=error.status_code,
        message=error.detail,
    )


def _internal_error(request: Request[Any, Any, Any], error: Exception) -> Response[str]:
    log.exception("inspector request failed", exc_info=error)
    return _page("error.html", status=500, reading=None, status_code=500, message="internal error")


def inspector() -> Router:
    """The inspector's routes, mounted at ``/ui`` (one router per application: it holds that
    application's browser sessions)."""
    sessions = Sessions()

    def provide_sessions() -> Sessions:
        return sessions

    return Router(
        path=PREFIX,
        route_handlers=[Inspector],
        dependencies={"sessions": Provide(provide_sessions, sync_to_thread=False)},
        exception_handlers={
            KeyRequired: _key_required,
            MembraneError: _membrane_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
        include_in_schema=False,
    )

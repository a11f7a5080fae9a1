"""The inspector's routes under ``/ui``: read-only pages over the engine, as HTML.

Each page is rendered on the server from a Jinja template; there is no script, and the
page's Content-Security-Policy lets it load only the inspector's own style sheet, so a
browser showing it asks nothing of any other host. The only POSTs are entering the key and
leaving (they write nothing to the store).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec
from jinja2 import Environment, FileSystemLoader, select_autoescape
from litestar import Controller, Request, Response, Router, get, post
from litestar.di import Provide
from litestar.exceptions import HTTPException, NotFoundException
from litestar.response import File, Redirect

from membrane_es import __version__
from membrane_es.access.ceiling import Caller
from membrane_es.engine import Membrane
from membrane_es.errors import (
    AccessDeniedError,
    MembraneError,
    NotFoundError,
    ValidationError,
    status_of,
)
from membrane_es.http_api.ui import charts, listing, reads
from membrane_es.http_api.ui import entries as entries_view
from membrane_es.http_api.ui.context import Reading, Resolver
from membrane_es.http_api.ui.conversation import conversation
from membrane_es.http_api.ui.sessions import COOKIE, Sessions, caller_of, check_key
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.timestamps import rfc3339
from membrane_es.serving.tenants import Tenants

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
_templates.filters["epoch"] = lambda seconds: rfc3339(datetime.fromtimestamp(seconds, UTC))


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
        media_type="text/html",  # Litestar adds "; charset=utf-8" itself
        headers={**SECURITY_HEADERS, **(headers or {})},
    )


def _reader(request: Request[Any, Any, Any], sessions: Sessions) -> tuple[Membrane, Reading]:
    caller = caller_of(request, sessions)
    if caller is None:
        raise KeyRequired
    tenants: Tenants = request.app.state.tenant_stores
    params = {k: v for k, v in request.query_params.items() if isinstance(v, str)}
    memory = tenants.get(caller.tenant)
    return memory, Reading.from_params(caller, params, memory.log_time_at)


def _page_number(text: str | None) -> int:
    text = (text or "1").strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 1_000_000_000:
        raise ValidationError("page", f"{_shown(text)!r} is not a page number (1 or more)")
    return int(text)


_FILE_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _text(value: str | None) -> str:
    """A text parameter with control characters (a NUL byte…) replaced by U+FFFD: never
    echoed raw into a page, nor searched for."""
    return _CONTROL.sub("\ufffd", value or "")


def _shown(text: str, limit: int = 80) -> str:
    """``text`` cut for a message (a parameter may be any length)."""
    text = _text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cutoff(text: str | None) -> float | None:
    """The relevance cut-off (0..1; empty: none)."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:  # nan fails too
        raise ValidationError("min", f"{_shown(text)!r}: a relevance from 0 to 1")
    return value


def _choice(name: str, text: str | None, allowed: Sequence[str]) -> str:
    text = (text or "").strip()
    if text and text not in allowed:
        raise ValidationError(name, f"{_shown(text)!r}: one of {', '.join(allowed)}")
    return text


def _wants_json(request: Request[Any, Any, Any]) -> bool:
    return _choice("format", request.query_params.get("format"), ("html", "json")) == "json"


def _json(value: Any, name: str) -> Response[bytes]:
    """What a page shows, as JSON: the export of that page (a download named ``name``)."""
    body = json.dumps(value, indent=2, ensure_ascii=False, default=str).encode()
    name = name if _FILE_NAME.fullmatch(name) else "export"  # a path's text, made safe
    return Response(
        body,
        media_type="application/json",
        headers={
            **SECURITY_HEADERS,
            "content-disposition": f'inline; filename="{name}.json"',
        },
    )


def _types(values: list[str]) -> list[str]:
    known = [t.value for t in MemoryType]
    for value in values:
        if value and value not in known:
            raise ValidationError(
                "type", f"{_shown(value)!r} is not a memory type; one of {', '.join(known)}"
            )
    return [value for value in values if value]


def _hops(text: str | None) -> int:
    text = (text or "2").strip()
    if not (text.isascii() and text.isdigit()) or int(text) > reads.MAX_HOPS:
        raise ValidationError(
            "hops", f"{_shown(text)!r}: a number of hops from 0 to {reads.MAX_HOPS}"
        )
    return int(text)


def search_page(
    memory: Membrane,
    reading: Reading,
    task: str,
    types: list[str],
    page: int,
    cutoff: float | None = None,
) -> Response[str]:
    """The search page: a ranked read's page ``page``, each hit with its score's parts."""
    keep = [("q", task), *(("type", t) for t in types)] if task or types else []
    if cutoff is not None:
        keep.append(("min", f"{cutoff:g}"))
    last = (reads.MAX_RESULTS - 1) // reads.SEARCH_PAGE
    if page > last:  # past what one ranked read returns: say so, and where the end is
        return _page(
            "search.html",
            keep=keep,
            reading=reading,
            task=task,
            chosen=types,
            cutoff=cutoff,
            found=None,
            asked=page,
            last=last,
            size=reads.SEARCH_PAGE,
            bars={},
        )
    found = reads.search(memory, reading, task, types, page, cutoff)
    bars = {
        hit.record.id: charts.share_svg(
            charts.share_bars([(s.name, s.part) for s in hit.shares]), f"why-{i}"
        )
        for i, hit in enumerate(found.hits)
        if hit.shares
    }
    return _page(
        "search.html",
        keep=keep,
        reading=reading,
        task=task,
        chosen=types,
        cutoff=cutoff,
        found=found,
        asked=page,
        last=last,
        size=reads.SEARCH_PAGE,
        bars=bars,
    )


def _search_json(found: reads.SearchPage, task: str) -> dict[str, Any]:
    return {
        "task": task,
        "page": found.page,
        "total": found.total,
        "more": found.more,
        "cutoff": found.cutoff,
        "results": [
            {
                "record": msgspec.to_builtins(hit.record),
                "explanation": msgspec.to_builtins(hit.explanation),
            }
            for hit in found.hits
        ],
    }


def record_page(memory: Membrane, reading: Reading, record_id: str, page: int) -> Response[str]:
    """A record's page: the record at the reader's moment and page ``page`` of its events."""
    shown = reads.record_page(memory, reading, record_id, page)
    return _page("record.html", here=f"{PREFIX}/records/{record_id}", reading=reading, shown=shown)


# --- pages -------------------------------------------------------------------------------------


def _cursor(text: str | None) -> int | None:
    text = (text or "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise ValidationError("before", f"{_shown(text)!r}: an entry's updated_at (epoch seconds)")
    return int(text)


def _next_page(value: object) -> str:
    """Where to go after entering the key: a page of the inspector, nothing else."""
    text = str(value or "")
    return text if text.startswith(PREFIX + "/") and "//" not in text else PREFIX + "/"


class Inspector(Controller):
    """The pages (a controller: Litestar makes fresh handlers for each application)."""

    @get("/", sync_to_thread=True)
    def search(self, request: Request[Any, Any, Any], sessions: Sessions) -> Response[Any]:
        """Search (a task, or none: by salience), explained, under the reader's trust and moment."""
        memory, reading = _reader(request, sessions)
        task = _text(request.query_params.get("q", ""))
        types = _types(request.query_params.getall("type", []))
        page = _page_number(request.query_params.get("page"))
        cutoff = _cutoff(request.query_params.get("min"))
        if _wants_json(request):
            last = (reads.MAX_RESULTS - 1) // reads.SEARCH_PAGE
            if page > last:
                raise ValidationError("page", f"search reads at most {last} pages")
            found = reads.search(memory, reading, task, types, page, cutoff)
            return _json(_search_json(found, task), "search")
        return search_page(memory, reading, task, types, page, cutoff)

    @get("/records", sync_to_thread=True)
    def records(self, request: Request[Any, Any, Any], sessions: Sessions) -> Response[Any]:
        """Every record the reader may see, filtered by scope, type and state, a page at a
        time; ``id``: go to the record with that id (or the one id starting so)."""
        memory, reading = _reader(request, sessions)
        wanted = _text(request.query_params.get("id", "")).strip()
        if wanted:
            matches = listing.matching(memory, reading, wanted)
            if len(matches) == 1:
                return Redirect(reading.link(f"{PREFIX}/records/{matches[0]}"), status_code=303)
            if not matches:
                raise NotFoundError(_shown(wanted))
        params = request.query_params
        scope = _text(params.get("scope", "")).strip()
        types = _types([_text(params.get("type", ""))])
        state = _choice("state", params.get("state"), listing.STATES)
        order = _choice("sort", params.get("sort"), ("oldest", "newest")) or "newest"
        page = _page_number(params.get("page"))
        table = listing.browse(
            memory,
            reading,
            scope=scope,
            types=types,
            state=state,
            newest=order == "newest",
            page=page,
        )
        if _wants_json(request):
            return _json(
                {
                    "page": table.page,
                    "pages": table.pages,
                    "total": table.total,
                    "records": [
                        {"state": row.state, "record": msgspec.to_builtins(row.record)}
                        for row in table.rows
                    ],
                },
                "records",
            )
        keep = [("scope", scope), ("type", types[0] if types else ""), ("state", state)]
        keep = [(name, value) for name, value in [*keep, ("sort", order)] if value]
        return _page(
            "records.html",
            here=f"{PREFIX}/records",
            keep=keep,
            reading=reading,
            table=table,
            scope=scope,
            kind=types[0] if types else "",
            state=state,
            order=order,
            states=listing.STATES,
            size=listing.RECORDS_PAGE,
            matches=[] if not wanted else listing.matching(memory, reading, wanted),
            wanted=wanted,
        )

    @get("/records/{record_id:str}", sync_to_thread=True)
    def record(
        self, request: Request[Any, Any, Any], sessions: Sessions, record_id: str
    ) -> Response[Any]:
        """A record at the reader's moment and its timeline up to then (``format=json``:
        the record as the reader may see it)."""
        memory, reading = _reader(request, sessions)
        page = _page_number(request.query_params.get("page"))
        if _wants_json(request):
            return _json(msgspec.to_builtins(reads.shown(memory, reading, record_id)), record_id)
        return record_page(memory, reading, record_id, page)

    @get("/records/{record_id:str}/conversation", sync_to_thread=True)
    def conversation_page(
        self, request: Request[Any, Any, Any], sessions: Sessions, record_id: str
    ) -> Response[Any]:
        """The conversation a turn belongs to: its sitting's turns in order."""
        memory, reading = _reader(request, sessions)
        talk = conversation(memory, reading, record_id)
        if _wants_json(request):
            return _json(
                {
                    "scope": talk.scope,
                    "source": talk.source,
                    "turns": [
                        {
                            "id": turn.record.id,
                            "speaker": turn.speaker,
                            "at": turn.record.created_at,
                            "said_after": turn.said_after,
                            "text": turn.text,
                        }
                        for turn in talk.turns
                    ],
                },
                f"conversation-{record_id}",
            )
        return _page(
            "conversation.html",
            here=f"{PREFIX}/records/{record_id}/conversation",
            reading=reading,
            talk=talk,
        )

    @get("/entries", sync_to_thread=True)
    def entries_page(self, request: Request[Any, Any, Any], sessions: Sessions) -> Response[Any]:
        """The tenant's entries, newest first, as the entries API lists them."""
        memory, reading = _reader(request, sessions)
        params = request.query_params
        kind = _choice("type", params.get("type"), entries_view.ENTRY_TYPES)
        q = _text(params.get("q", "")).strip()
        before = _cursor(params.get("before"))
        found = entries_view.entries(memory, reading, kind=kind, q=q, before=before)
        if _wants_json(request):
            return _json(
                {"tenant": found.tenant, "entries": msgspec.to_builtins(found.entries)},
                "entries",
            )
        keep = [(name, value) for name, value in (("type", kind), ("q", q)) if value]
        return _page(
            "entries.html",
            here=f"{PREFIX}/entries",
            keep=keep,
            reading=reading,
            found=found,
            entry_types=entries_view.ENTRY_TYPES,
        )

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


def _message(error: MembraneError) -> str:
    if isinstance(error, NotFoundError):
        return "No such record here at this moment (or none you may see)."
    if isinstance(error, AccessDeniedError):
        return "This needs a key without a ceiling: it covers every record of the store."
    if isinstance(error, ValidationError):
        return f"{error.field}: {error.message}"
    return str(error)


def _failed(
    request: Request[Any, Any, Any], sessions: Sessions, status: int, message: str
) -> Response[str]:
    """An error page that keeps the views and the time and trust control: the reader's
    parameters that read are kept (one that does not is what the page names)."""
    reading = None
    try:
        caller = caller_of(request, sessions)
    except Exception:  # a malformed header: the page is shown without the reader
        caller = None
    if caller is not None:
        params = {k: v for k, v in request.query_params.items() if isinstance(v, str)}
        resolve: Resolver | None = None
        try:
            tenants: Tenants = request.app.state.tenant_stores
            resolve = tenants.get(caller.tenant).log_time_at
        except Exception:  # no store to read positions in: the moment is kept, if given
            resolve = None
        reading = Reading.forgiving(caller, params, resolve)
    return _page(
        "error.html",
        status=status,
        here=request.url.path if request.url.path.startswith(PREFIX + "/") else PREFIX + "/",
        reading=reading,
        status_code=status,
        message=message,
    )


def inspector() -> Router:
    """The inspector's routes, mounted at ``/ui`` (one router per application: it holds that
    application's browser sessions)."""
    sessions = Sessions()

    def provide_sessions() -> Sessions:
        return sessions

    def membrane_error(request: Request[Any, Any, Any], error: MembraneError) -> Response[str]:
        status = status_of(error)[1]
        if status >= 500:
            log.error("inspector request failed: %s", error)
        return _failed(request, sessions, status, _message(error))

    def http_error(request: Request[Any, Any, Any], error: HTTPException) -> Response[str]:
        return _failed(request, sessions, error.status_code, _text(str(error.detail)))

    def internal_error(request: Request[Any, Any, Any], error: Exception) -> Response[str]:
        log.exception("inspector request failed", exc_info=error)
        return _failed(request, sessions, 500, "internal error")

    return Router(
        path=PREFIX,
        route_handlers=[Inspector],
        dependencies={"sessions": Provide(provide_sessions, sync_to_thread=False)},
        exception_handlers={
            KeyRequired: _key_required,
            MembraneError: membrane_error,
            HTTPException: http_error,
            Exception: internal_error,
        },
        include_in_schema=False,
    )

"""The HTTP entries API as an ASGI application on Litestar.

Routes, shapes, status codes and error bodies follow Arbiter's memory API: ``/v1/memory/
entries`` (browse, search, create), ``/v1/memory/entries/{id}`` (read, revise, delete),
``/v1/memory/entries/{id}/invalidate``, ``/v1/memory/relations`` and ``/v1/memory/graph``;
``/v1/memory/context`` is membrane_es's own (a context packed into a token budget).
Every error is ``{"error": "..."}`` with 400 (naming the bad field, or ``body``), 401, 403,
404, 409 (a duplicate relation adds ``existing_id``) or 413. Bodies are decoded with strict
types (:mod:`membrane_es.http_api.bodies`). The OpenAPI document is ``/openapi.json`` and
the interactive docs page ``/docs`` (:mod:`membrane_es.http_api.docs`).

A bearer token is checked against the same keys as the gRPC daemon's
(:class:`~membrane_es.access.keys.KeyRing`): its tenant picks the store, its ceiling bounds what
it reads and writes, and its name is the actor of its writes. A write to an entry the key
cannot see is 404, as for an entry that does not exist, so a key cannot learn what lies
outside its ceiling; a write to one it can see but may not write (an unscoped entry, for a
key limited to some conversations), or into a scope it may not write, is 403, as the gRPC
edge answers PERMISSION_DENIED. This module turns requests into calls on the engine and
results back into JSON; it holds no domain logic.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec
from litestar import Controller, Litestar, Request, Response, delete, get, patch, post
from litestar.di import Provide
from litestar.exceptions import HTTPException, NotAuthorizedException, ValidationException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.openapi.spec import Components, Example, SecurityScheme
from litestar.params import Parameter
from litestar.response import ServerSentEvent

from membrane_es import ChangePage, __version__
from membrane_es.access.keys import Caller, KeyRing
from membrane_es.engine import (
    DEFAULT_BUDGET_TOKENS,
    DEFAULT_CHANGE_PAGE,
    DEFAULT_ENTRY_LIMIT,
    ENTRY_ACTOR,
    MAX_BUDGET_TOKENS,
    MAX_CHANGE_PAGE,
    MAX_ENTRY_LIMIT,
    MIN_BUDGET_TOKENS,
    EntryExplanation,
    EntryQuery,
    Expansion,
    Membrane,
    RerankReport,
    SearchAdvisor,
    moment_of,
)
from membrane_es.errors import (
    DuplicateRelationError,
    EntryNotFoundError,
    MembraneError,
    ValidationError,
    status_of,
)
from membrane_es.http_api import changes as change_feed
from membrane_es.http_api.bodies import StrictBody, require
from membrane_es.http_api.docs import swagger_assets, swagger_ui
from membrane_es.http_api.guide import DESCRIPTION, ERROR_EXAMPLES
from membrane_es.http_api.holding import holding_stores
from membrane_es.http_api.ui import inspector
from membrane_es.schema.entries import (
    ENTRY_TYPES,
    MAX_INTEGER,
    Artifact,
    Entry,
    EntryPatch,
    EntryRelation,
    HydratedEntry,
    NewEntry,
    NewRelation,
    RelationKind,
)
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext
from membrane_es.serving.tenants import Tenants

log = logging.getLogger("membrane_es.http")

MAX_BODY_BYTES = 1_048_576  # an entry is at most 64 KiB of content; 1 MiB is generous
RELATIONS_DEFAULT_LIMIT = 200
RELATIONS_MAX_LIMIT = 1000
GRAPH_LIMIT = 200
POSITION_HEADER = "x-membrane-position"
MIN_POSITION_HEADER = "x-membrane-min-position"
POSITION_WAIT_SECONDS = 5.0
OWNER = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)  # a key without limits
_TRUE = frozenset({"1", "true", "yes", "on", "t", "y"})
_FALSE = frozenset({"", "0", "false", "no", "off", "f", "n"})


# --- response shapes ----------------------------------------------------------------------


class EntryList(msgspec.Struct, kw_only=True, omit_defaults=True):
    count: int
    entries: list[Entry]
    expansion: Expansion | None = None
    rerank: RerankReport | None = None
    explain: list[EntryExplanation] | None = None


class RelationList(msgspec.Struct, kw_only=True):
    count: int
    relations: list[EntryRelation]


class Graph(msgspec.Struct, kw_only=True):
    tenant_id: int | str
    entries: list[Entry]
    relations: list[EntryRelation]


class Deleted(msgspec.Struct, kw_only=True):
    deleted: bool


class Invalidated(msgspec.Struct, kw_only=True):
    invalidated: bool
    id: int


class InvalidateBody(msgspec.Struct, kw_only=True):
    """The optional body of ``/invalidate``: ``when``, the moment the entry's validity ended
    if not now (epoch seconds as Arbiter takes it, or RFC 3339 text with its offset), not
    before its ``valid_from``. It becomes the entry's ``valid_to``."""

    when: Annotated[int, msgspec.Meta(ge=0, le=MAX_INTEGER)] | str | None = None


class ContextAnswer(msgspec.Struct, kw_only=True):
    """A context: ``text`` to hand a model (one line a memory: event date, who, the words,
    ``[ref]``, a prefix of its record id), the record ids it holds in the order of the text,
    the tokens it counts (at most ``budget_tokens``) and what counted them."""

    text: str
    ids: list[str]
    tokens: int
    budget_tokens: int
    counted_with: str


class ErrorBody(msgspec.Struct, kw_only=True, omit_defaults=True):
    error: str
    existing_id: int | None = None


def _error(status: int, description: str) -> ResponseSpec:
    summary, example = ERROR_EXAMPLES[status]
    return ResponseSpec(
        data_container=ErrorBody,
        description=description,
        generate_examples=False,
        examples=[Example(summary=summary, value=example)],
    )


# Every route answers errors as {"error": "..."} (409 on a duplicate relation adds existing_id).
ERRORS: dict[int, ResponseSpec] = {
    400: _error(400, "A bad parameter or body; the message names the field (or body)"),
    401: _error(401, "Missing or invalid bearer token"),
    403: _error(403, "The entry, or the scope asked for, is outside what the key may write"),
    404: _error(404, "No such entry (or route)"),
    409: _error(409, "A duplicate relation (with existing_id), or a conflicting revision"),
    413: _error(413, "The body is over the size limit"),
    504: _error(504, "The views did not reach x-membrane-min-position in time"),
}


# --- who is calling -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Access:
    """The caller's store, the trust its key allows (None: no limit), its tenant id, and the
    log position its read must include (``x-membrane-min-position``)."""

    engine: Membrane
    trust: TrustContext | None
    tenant: int | str
    caller: Caller
    min_position: int | None = None

    @property
    def actor(self) -> str:
        """Who the audit records as writing: the key's name (without authentication, every
        caller is the same anonymous one)."""
        return self.caller.name or ENTRY_ACTOR

    def store(self) -> Membrane:
        """The caller's engine, once its views include ``min_position`` (on the handler's
        thread: the wait must not hold the event loop)."""
        self.engine.wait_for_position(self.min_position, timeout=POSITION_WAIT_SECONDS)
        return self.engine


def _written(access: Access, content: Any, status: int = 200) -> Response[Any]:
    """A write's answer, with the log position of its last event (``x-membrane-position``),
    which a read anywhere may then ask to include."""
    position = access.engine.last_position
    headers = {} if position is None else {POSITION_HEADER: str(position)}
    return Response(content, status_code=status, headers=headers)


def tenant_id(tenant: str) -> int | str:
    """Arbiter's numeric ``tenant_id`` where the tenant's name is a number (the default
    tenant is 0), else the name."""
    if not tenant:
        return 0
    return int(tenant) if tenant.isascii() and tenant.isdigit() else tenant


def provide_access(request: Request[Any, Any, Any]) -> Access:
    keys: KeyRing = request.app.state.key_ring
    tenants: Tenants = request.app.state.tenant_stores
    caller = keys.caller_for(request.headers.get("authorization"))
    if caller is None:
        raise NotAuthorizedException("missing or invalid bearer token")
    trust = None if caller.unrestricted else caller.ceiling()
    wanted = request.headers.get(MIN_POSITION_HEADER)
    if wanted is not None and not (wanted.isascii() and wanted.isdigit()):
        raise ValidationError(MIN_POSITION_HEADER, "a log position (a whole number >= 0)")
    min_position = None if wanted is None else int(wanted)
    # A read never creates a tenant's store: one that has none reads as empty.
    reads = request.method in ("GET", "HEAD")
    engine = tenants.reader(caller.tenant) if reads else tenants.get(caller.tenant)
    return Access(engine, trust, tenant_id(caller.tenant), caller, min_position)


def _advisor(request: Request[Any, Any, Any]) -> SearchAdvisor | None:
    advisor: SearchAdvisor | None = request.app.state.search_advisor
    return advisor


# --- parameters ---------------------------------------------------------------------------


def _bool(name: str, value: str | None) -> bool:
    text = (value or "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValidationError(name, f"{value!r} is not a boolean")


def _types(value: str | None) -> tuple[str, ...]:
    types = tuple(dict.fromkeys(t.strip() for t in (value or "").split(",") if t.strip()))
    for kind in types:
        if kind not in ENTRY_TYPES:
            raise ValidationError("type", f"unknown type {kind!r}; one of {', '.join(ENTRY_TYPES)}")
    return types


def _moment(name: str, value: str | None) -> datetime | None:
    """A moment parameter: epoch seconds, or RFC 3339 text with its offset (as the body's
    ``when`` and every other surface take it)."""
    if value is None:
        return None
    text = value.strip()
    given: int | str = int(text) if text.isascii() and text.isdigit() else text
    return moment_of(name, given)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _epoch(name: str, value: str | None) -> int | None:
    """A moment parameter (see :func:`_moment`) in epoch seconds, as the entries queries take it."""
    moment = _moment(name, value)
    if moment is None:
        return None
    if moment < _EPOCH:
        raise ValidationError(name, f"{value} is before 1970: entries keep time in epoch seconds")
    return int(moment.timestamp())


def _intent(value: str | None) -> bool:
    text = (value or "auto").strip().lower()
    if text not in ("auto", "off"):
        raise ValidationError("intent", "must be auto or off")
    return text == "auto"


Limit = Annotated[
    int | None,
    Parameter(
        ge=1, le=MAX_INTEGER, description=f"default {DEFAULT_ENTRY_LIMIT}, max {MAX_ENTRY_LIMIT}"
    ),
]
Moment = Annotated[
    str | None,
    Parameter(
        description="a moment: epoch seconds (1767225600) or RFC 3339 with its offset "
        "(2026-01-01T00:00:00Z)",
        examples=[Example(value="2026-01-01T00:00:00Z"), Example(value="1767225600")],
    ),
]
QueryId = Annotated[int | None, Parameter(ge=-MAX_INTEGER, le=MAX_INTEGER)]
PathId = Annotated[int, Parameter(ge=-MAX_INTEGER, le=MAX_INTEGER)]


class MemoryController(Controller):
    """The ``/v1/memory`` routes (a controller: Litestar makes fresh handlers per app)."""

    # --- entries ------------------------------------------------------------------------------

    @get("/v1/memory/entries", sync_to_thread=True, operation_id="list_entries", responses=ERRORS)
    def list_entries(
        self,
        request: Request[Any, Any, Any],
        access: Access,
        types: Annotated[
            str | None, Parameter(query="type", description="csv of entry types")
        ] = None,
        tag: str | None = None,
        q: str | None = None,
        conversation_id: Annotated[int | None, Parameter(ge=0, le=MAX_INTEGER)] = None,
        graduated: str | None = None,
        intent: str | None = None,
        expand: str | None = None,
        rerank: str | None = None,
        rerank_fine: str | None = None,
        as_of: Moment = None,
        as_of_position: Annotated[
            str | None,
            Parameter(
                description="as the store stood right after this log position (to the "
                "second: entries keep time in epoch seconds); not with as_of"
            ),
        ] = None,
        since: Moment = None,
        before_updated_at: Moment = None,
        limit: Limit = None,
        decay: str | None = None,
        explain: Annotated[
            str | None,
            Parameter(
                description="true: with q, an explain list: per entry its BM25, boosts, age "
                "decay and the rank-fusion passes that placed it"
            ),
        ] = None,
    ) -> EntryList:
        """Browse (no ``q``: newest first, ``type``/``tag`` filter) or search (``q``: BM25,
        ``type``/``tag`` boost)."""
        moment = _epoch("as_of", as_of)
        if as_of_position is not None:
            if as_of is not None:
                raise ValidationError("as_of_position", "give as_of or as_of_position, not both")
            at = access.store().log_time_at(change_feed.position("as_of_position", as_of_position))
            moment = max(0, int(at.timestamp()))
        query = EntryQuery(
            q=q or "",
            types=_types(types),
            tag=tag or "",
            conversation_id=conversation_id or None,
            graduated=_bool("graduated", graduated),
            intent=_intent(intent),
            as_of=moment,
            since=_epoch("since", since),
            before_updated_at=_epoch("before_updated_at", before_updated_at),
            limit=min(limit or DEFAULT_ENTRY_LIMIT, MAX_ENTRY_LIMIT),
            decay=_bool("decay", decay),
            expand=expand or "",
            rerank=rerank or "",
            rerank_fine=rerank_fine or "",
            explain=_bool("explain", explain),
        )
        page = access.store().list_entries(
            query, trust=access.trust, tenant=access.tenant, advisor=_advisor(request)
        )
        return EntryList(
            count=len(page.entries),
            entries=page.entries,
            expansion=page.expansion,
            rerank=page.rerank,
            explain=page.explain,
        )

    @post(
        "/v1/memory/entries",
        sync_to_thread=True,
        operation_id="create_entry",
        responses=ERRORS,
        dto=StrictBody[NewEntry],
        return_dto=None,
    )
    def create_entry(self, access: Access, data: NewEntry | None = None) -> Response[Entry]:
        """Create an entry (201); ``supersedes_ids`` invalidates those entries atomically."""
        entry = access.store().create_entry(
            require(data),
            actor=access.actor,
            trust=access.trust,
            tenant=access.tenant,
            writer=access.caller,
        )
        return _written(access, entry, 201)

    @get(
        "/v1/memory/entries/{entry_id:int}",
        sync_to_thread=True,
        operation_id="get_entry",
        responses=ERRORS,
    )
    def read_entry(self, entry_id: PathId, access: Access) -> HydratedEntry:
        """One active entry, with its artifact and its relations."""
        entry = access.store().get_entry(entry_id, trust=access.trust, tenant=access.tenant)
        relations = access.store().entry_relations(
            trust=access.trust, tenant=access.tenant, source_id=entry_id
        ) + access.store().entry_relations(
            trust=access.trust, tenant=access.tenant, target_id=entry_id
        )
        return HydratedEntry(
            **msgspec.structs.asdict(entry),
            artifact=None if entry.artifact_id is None else Artifact(id=entry.artifact_id),
            relations=sorted(relations, key=lambda r: r.id),
        )

    @patch(
        "/v1/memory/entries/{entry_id:int}",
        sync_to_thread=True,
        operation_id="patch_entry",
        responses=ERRORS,
        dto=StrictBody[EntryPatch],
        return_dto=None,
    )
    def patch_entry(
        self, entry_id: PathId, access: Access, data: EntryPatch | None = None
    ) -> Response[Entry]:
        """Revise an active entry: a new revision, the old one kept in the log (a patch that
        changes nothing is 400 and writes nothing)."""
        revised = access.store().revise_entry(
            entry_id,
            require(data),
            actor=access.actor,
            trust=access.trust,
            tenant=access.tenant,
            writer=access.caller,
        )
        return _written(access, revised)

    @delete(
        "/v1/memory/entries/{entry_id:int}",
        status_code=200,
        sync_to_thread=True,
        operation_id="delete_entry",
        responses=ERRORS,
    )
    def delete_entry(
        self,
        entry_id: PathId,
        access: Access,
        erase: Annotated[
            str | None, Parameter(description="true: also erase every revision's content")
        ] = None,
    ) -> Response[Deleted]:
        """Hide an entry from every entries read (its events stay in the log); with
        ``erase=true`` its content is erased for good (crypto-shredding)."""
        access.store().delete_entry(
            entry_id,
            erase=_bool("erase", erase),
            actor=access.actor,
            trust=access.trust,
            writer=access.caller,
        )
        return _written(access, Deleted(deleted=True))

    @post(
        "/v1/memory/entries/{entry_id:int}/invalidate",
        status_code=200,
        sync_to_thread=True,
        operation_id="invalidate_entry",
        responses=ERRORS,
        dto=StrictBody[InvalidateBody],
        return_dto=None,
    )
    def invalidate_entry(
        self, entry_id: PathId, access: Access, data: InvalidateBody | None = None
    ) -> Response[Invalidated]:
        """End an active entry's validity (now, or at ``when``); a second call is 404."""
        when = None if data is None else data.when
        try:
            access.store().invalidate_entry(
                entry_id, when=when, actor=access.actor, trust=access.trust, writer=access.caller
            )
        except EntryNotFoundError:
            raise EntryNotFoundError(entry_id, "entry not found or already invalidated") from None
        return _written(access, Invalidated(invalidated=True, id=entry_id))

    # --- relations and the graph --------------------------------------------------------------

    @get(
        "/v1/memory/relations", sync_to_thread=True, operation_id="list_relations", responses=ERRORS
    )
    def list_relations(
        self,
        access: Access,
        source_id: QueryId = None,
        target_id: QueryId = None,
        relation: RelationKind | None = None,
        limit: Annotated[int | None, Parameter(ge=1, le=MAX_INTEGER)] = None,
    ) -> RelationList:
        found = access.store().entry_relations(
            trust=access.trust,
            tenant=access.tenant,
            source_id=source_id,
            target_id=target_id,
            relation=relation or "",
            limit=min(limit or RELATIONS_DEFAULT_LIMIT, RELATIONS_MAX_LIMIT),
        )
        return RelationList(count=len(found), relations=found)

    @post(
        "/v1/memory/relations",
        sync_to_thread=True,
        operation_id="create_relation",
        responses=ERRORS,
        dto=StrictBody[NewRelation],
        return_dto=None,
    )
    def create_relation(
        self, access: Access, data: NewRelation | None = None
    ) -> Response[EntryRelation]:
        """Relate two entries (201); a repeat is 409 with ``existing_id``."""
        body = require(data)
        made = access.store().relate_entries(
            body.source_id,
            body.target_id,
            body.relation,
            actor=access.actor,
            trust=access.trust,
            tenant=access.tenant,
            writer=access.caller,
        )
        return _written(access, made, 201)

    @get("/v1/memory/graph", sync_to_thread=True, operation_id="graph", responses=ERRORS)
    def graph(
        self,
        access: Access,
        types: Annotated[
            str | None, Parameter(query="type", description="csv of entry types")
        ] = None,
    ) -> Graph:
        """Active entries (at most 200, newest first) and the relations among them."""
        query = EntryQuery(types=_types(types), limit=GRAPH_LIMIT)
        entries = (
            access.store().list_entries(query, trust=access.trust, tenant=access.tenant).entries
        )
        relations = access.store().entry_relations(
            trust=access.trust, tenant=access.tenant, among=[e.id for e in entries]
        )
        return Graph(tenant_id=access.tenant, entries=entries, relations=relations)

    @get("/v1/memory/context", sync_to_thread=True, operation_id="context", responses=ERRORS)
    def context(
        self,
        access: Access,
        q: Annotated[str | None, Parameter(description="the task, in words")] = None,
        budget_tokens: Annotated[
            int | None,
            Parameter(
                ge=MIN_BUDGET_TOKENS,
                le=MAX_BUDGET_TOKENS,
                description=f"the most the text may count (default {DEFAULT_BUDGET_TOKENS})",
            ),
        ] = None,
        memory_types: Annotated[
            str | None, Parameter(description="csv of memory types (default: all)")
        ] = None,
        as_of: Moment = None,
        as_of_position: Annotated[
            str | None,
            Parameter(description="as the store stood right after this log position"),
        ] = None,
    ) -> ContextAnswer:
        """The memories a task needs, packed into a token budget as text a model reads
        (``Membrane.context``), under the key's ceiling; ``as_of``: as the store stood then
        (``as_of_position``: right after that log event, instead)."""
        types = [t.strip() for t in (memory_types or "").split(",") if t.strip()]
        packed = access.store().context(
            q or "",
            trust=access.trust or OWNER,
            budget_tokens=budget_tokens or DEFAULT_BUDGET_TOKENS,
            memory_types=types or None,
            as_of=_moment("as_of", as_of),
            as_of_position=(
                None
                if as_of_position is None
                else change_feed.position("as_of_position", as_of_position)
            ),
        )
        return ContextAnswer(
            text=packed.text,
            ids=packed.ids,
            tokens=packed.tokens,
            budget_tokens=packed.budget_tokens,
            counted_with=packed.counted_with,
        )

    # --- the change feed ---------------------------------------------------------------------

    @get("/v1/memory/changes", sync_to_thread=True, operation_id="changes", responses=ERRORS)
    def changes(
        self,
        access: Access,
        after: Annotated[
            str | None,
            Parameter(description="the last log position handled (default 0: from the start)"),
        ] = None,
        limit: Annotated[
            str | None,
            Parameter(
                description=f"the most changes in the page (1 to {MAX_CHANGE_PAGE}, "
                f"default {DEFAULT_CHANGE_PAGE})"
            ),
        ] = None,
    ) -> ChangePage:
        """The store's changes after a log position, in log order, under the key's ceiling
        (``Membrane.changes``): each change's position, times, record, operation, actor,
        rationale, field diff and the record after it. Ask again with ``after=next_after``;
        ``next_after == head``: caught up."""
        return access.store().changes_page(
            after=change_feed.position("after", after),
            limit=change_feed.page_limit(limit),
            trust=access.trust or OWNER,
        )

    @get("/v1/memory/changes/stream", operation_id="changes_stream", responses=ERRORS)
    async def changes_stream(
        self,
        request: Request[Any, Any, Any],
        access: Access,
        after: Annotated[
            str | None,
            Parameter(description="the last log position handled (or the Last-Event-ID header)"),
        ] = None,
    ) -> ServerSentEvent:
        """The same changes as Server-Sent Events (``event: change``, ``id``: the position,
        ``data``: the change as JSON), followed as writes commit; a comment every 15 s while
        idle. A reconnecting client's ``Last-Event-ID`` resumes after that position."""
        last = request.headers.get("last-event-id")
        start = change_feed.position("after", after if after is not None else last)
        return ServerSentEvent(change_feed.stream(access.engine, access.trust or OWNER, start))


# --- errors -------------------------------------------------------------------------------


def _membrane_error(request: Request[Any, Any, Any], error: MembraneError) -> Response[Any]:
    status = status_of(error)[1]
    body = ErrorBody(error=str(error))
    if isinstance(error, ValidationError):
        body = ErrorBody(error=f"{error.field}: {error.message}")
    elif isinstance(error, DuplicateRelationError):
        body = ErrorBody(error=str(error), existing_id=error.existing_id)
    if status >= 500:
        log.error("request failed: %s", error)
    return Response(content=body, status_code=status)


def _http_error(request: Request[Any, Any, Any], error: HTTPException) -> Response[Any]:
    message = error.detail
    if isinstance(error, ValidationException) and isinstance(error.extra, list):
        fields = [
            f"{item.get('key', '')}: {item.get('message', '')}".strip(": ")
            for item in error.extra
            if isinstance(item, dict)
        ]
        if fields:
            message = "; ".join(fields)
    return Response(
        content=ErrorBody(error=message),
        status_code=error.status_code,
        headers=getattr(error, "headers", None),
    )


def _internal_error(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
    log.exception("request failed", exc_info=error)
    return Response(content=ErrorBody(error="internal error"), status_code=500)


# --- the application ----------------------------------------------------------------------


def create_app(
    tenants: Tenants,
    keys: KeyRing,
    *,
    advisor: SearchAdvisor | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Litestar:
    """The ASGI application over ``tenants`` (one store per tenant), authenticating with
    ``keys``; ``advisor`` serves ``expand`` and ``rerank``."""
    openapi = OpenAPIConfig(
        title="membrane_es memory entries API",
        version=__version__,
        description=DESCRIPTION,  # for the API's users; this module's docstring is for its code
        path="/",
        # The first plugin also answers at the root: GET / opens the docs page.
        render_plugins=[swagger_ui("/docs"), JsonRenderPlugin(path="/openapi.json")],
        components=Components(
            security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}
        ),
        security=[{"bearer": []}],
    )
    app = Litestar(
        route_handlers=[MemoryController, *swagger_assets(), inspector()],
        # On a worker thread: taking a tenant's store may open it, or wait for another to
        # close (bounded open stores), and must not hold up the requests of open ones.
        dependencies={"access": Provide(provide_access, sync_to_thread=True)},
        middleware=[holding_stores],
        exception_handlers={
            MembraneError: _membrane_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
        openapi_config=openapi,
        request_max_body_size=max_body_bytes,
        logging_config=None,  # the process's logging stays as its owner set it up
    )
    app.state.tenant_stores = tenants
    app.state.key_ring = keys
    app.state.search_advisor = advisor
    return app

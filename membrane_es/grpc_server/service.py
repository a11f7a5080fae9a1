"""``membrane.v1.MembraneService`` on the engine: request → checks → engine → response.

No domain logic lives here: each RPC checks its request as the reference does (§8.4),
resolves the caller's tenant engine and effective trust, calls the facade and converts the
answer (§8.3). Errors become statuses through one table (§8.6).

``as_of`` over the wire: the read RPCs (RetrieveGraph, RetrieveByID, GetMetrics) honour an
``x-membrane-as-of`` metadata value (RFC 3339) and answer as the store stood then, or an
``x-membrane-as-of-position`` value (a log position) and answer as it stood right after that
event (not both: INVALID_ARGUMENT; a position past the log's head too). Membrane's requests
carry neither field, so its SDKs' messages are unchanged.

Log positions (read-your-writes across daemons on one PostgreSQL log): every successful write
RPC answers with ``x-membrane-position`` in its response (initial) metadata, the log position
of its last event; a read RPC given ``x-membrane-min-position`` answers only once this
daemon's views include the log up to it, waiting at most the call's deadline and
``POSITION_WAIT_SECONDS``, then DEADLINE_EXCEEDED.

Explanations (an extension; ``membrane.v1`` is unchanged): RetrieveGraph given
``x-membrane-explain: true`` answers with ``x-membrane-explanation`` in its trailing metadata,
a JSON array with one object per root in rank order (the fields of
:class:`~membrane_es.schema.results.Explanation`: vector and lexical scores, relevance,
salience at the moment answered for, boost, score, trust decision), and with
``x-membrane-searched-toward``, a JSON array of the ids of the records relevance feedback
moved the task toward (empty when the read searched once).

``max_hops`` keeps its wire meaning: 0 asks for the configured default (1), −1 for the roots
only (the library's ``max_hops=0``). Zero limits ask for the configured defaults.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import NoReturn, Protocol, TypeVar

import grpc
import msgspec

from membrane_es.access.keys import CURRENT_CALLER, Caller, first_value
from membrane_es.engine import (
    DEFAULT_EDGE_LIMIT,
    DEFAULT_MAX_HOPS,
    DEFAULT_NODE_LIMIT,
    DEFAULT_POSITION_WAIT_SECONDS,
    DEFAULT_ROOT_LIMIT,
    Membrane,
)
from membrane_es.errors import (
    MembraneError,
    NotFoundError,
    ValidationError,
    status_of,
)
from membrane_es.grpc_server import checks, convert
from membrane_es.grpc_server.checks import WireError
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2 as pb
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from membrane_es.schema.records import MemoryRecord
from membrane_es.schema.results import ExplainedRetrieveGraphResult
from membrane_es.serving.tenants import Tenants

AS_OF_METADATA = "x-membrane-as-of"
AS_OF_POSITION_METADATA = "x-membrane-as-of-position"
MAX_POSITION = 2**63 - 1
POSITION_METADATA = "x-membrane-position"
MIN_POSITION_METADATA = "x-membrane-min-position"
EXPLAIN_METADATA = "x-membrane-explain"
# Resolution on write for this call (true or false; absent: the daemon's resolve_writes).
RESOLVE_METADATA = "x-membrane-resolve"
# A revision may be readable more widely than what it revises (true; absent: never).
WIDEN_METADATA = "x-membrane-widen"
EXPLANATION_METADATA = "x-membrane-explanation"
SEARCHED_TOWARD_METADATA = "x-membrane-searched-toward"
POSITION_WAIT_SECONDS = DEFAULT_POSITION_WAIT_SECONDS
# The RPCs that write, and so answer with a position.
WRITE_RPCS = frozenset(
    {
        "CaptureMemory",
        "Supersede",
        "Fork",
        "Merge",
        "Retract",
        "Contest",
        "Reinforce",
        "Penalize",
        "Forget",  # membrane_es.v1
    }
)


class EngineSource(Protocol):
    """A service that finds the caller's engine (for the position a write answers with)."""

    def engine(self, caller: Caller) -> Membrane: ...


ServiceT = TypeVar("ServiceT", bound=EngineSource)
RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")
Handler = Callable[[ServiceT, RequestT, grpc.ServicerContext], ResponseT]


class GraphDefaults(msgspec.Struct, frozen=True, kw_only=True):
    """What a zero limit (or ``max_hops`` 0) on the wire asks for (config §7.1)."""

    root_limit: int = DEFAULT_ROOT_LIMIT
    node_limit: int = DEFAULT_NODE_LIMIT
    edge_limit: int = DEFAULT_EDGE_LIMIT
    max_hops: int = DEFAULT_MAX_HOPS


def rpc(
    handler: Handler[ServiceT, RequestT, ResponseT],
) -> Handler[ServiceT, RequestT, ResponseT]:
    """Maps every error a handler raises to its status (§8.6) and aborts the call with it."""

    writes = handler.__name__ in WRITE_RPCS

    @functools.wraps(handler)
    def handle(service: ServiceT, request: RequestT, context: grpc.ServicerContext) -> ResponseT:
        try:
            response = handler(service, request, context)
            if writes:
                _send_position(context, service.engine(CURRENT_CALLER.get()))
            return response
        except Exception as error:
            _abort(context, error)

    return handle


def rpc_stream(
    handler: Handler[ServiceT, RequestT, Iterator[ResponseT]],
) -> Handler[ServiceT, RequestT, Iterator[ResponseT]]:
    """:func:`rpc` for a server-streaming handler: an error before or between its messages
    ends the call with its status."""

    @functools.wraps(handler)
    def handle(
        service: ServiceT, request: RequestT, context: grpc.ServicerContext
    ) -> Iterator[ResponseT]:
        try:
            yield from handler(service, request, context)
        except Exception as error:
            _abort(context, error)

    return handle


def _abort(context: grpc.ServicerContext, error: Exception) -> NoReturn:
    """End the call with the status the error maps to (§8.6)."""
    if isinstance(error, WireError):
        context.abort(error.code, error.message)
    if isinstance(error, ValidationError):
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, _validation_text(error))
    if isinstance(error, NotFoundError):
        context.abort(grpc.StatusCode.NOT_FOUND, "record not found")
    if isinstance(error, MembraneError):
        code, _ = status_of(error)
        context.abort(grpc.StatusCode[code], str(error))
    # The reference answers INTERNAL with the error's text.
    context.abort(grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}")


class MembraneService(pb_grpc.MembraneServiceServicer):
    """The 11 RPCs of ``membrane.v1`` over per-tenant engines."""

    def __init__(self, tenants: Tenants, graph_defaults: GraphDefaults | None = None) -> None:
        self._tenants = tenants
        self._defaults = graph_defaults or GraphDefaults()

    # --- capture ----------------------------------------------------------------------------

    @rpc
    def CaptureMemory(
        self, request: pb.CaptureMemoryRequest, context: grpc.ServicerContext
    ) -> pb.CaptureMemoryResponse:
        content = convert.value_from_wire(request.content, request.HasField("content"), "content")
        capture_context = convert.value_from_wire(
            request.context, request.HasField("context"), "context"
        )
        checks.check_capture(request, content, capture_context)
        timestamp = checks.parse_timestamp(request.timestamp, "invalid timestamp")
        caller = CURRENT_CALLER.get()
        _check_ceiling(caller, request.sensitivity, request.scope)
        result = self.engine(caller).capture_memory(
            content,
            source_kind=request.source_kind,
            context=capture_context,
            reason_to_remember=request.reason_to_remember,
            proposed_type=request.proposed_type or None,
            summary=request.summary,
            sensitivity=request.sensitivity or "low",
            source=request.source,
            tags=list(request.tags),
            scope=request.scope,
            timestamp=timestamp,
            resolve=_flag(context, RESOLVE_METADATA),
        )
        return convert.capture_to_wire(result)

    # --- reads ------------------------------------------------------------------------------

    @rpc
    def RetrieveGraph(
        self, request: pb.RetrieveGraphRequest, context: grpc.ServicerContext
    ) -> pb.RetrieveGraphResponse:
        checks.check_retrieve_graph(request)
        as_of, as_of_position = _as_of(context)
        explain = _explain(context)
        caller = CURRENT_CALLER.get()
        _await_min_position(context, self._reader(caller))
        defaults = self._defaults
        hops = request.max_hops
        result = self._reader(caller).retrieve_graph(
            request.task_descriptor,
            trust=caller.clamp(convert.trust_from_wire(request.trust)),
            memory_types=list(request.memory_types) or None,
            min_salience=request.min_salience,
            root_limit=request.root_limit or defaults.root_limit,
            node_limit=request.node_limit or defaults.node_limit,
            edge_limit=request.edge_limit or defaults.edge_limit,
            max_hops=defaults.max_hops if hops == 0 else max(hops, 0),
            as_of=as_of,
            as_of_position=as_of_position,
            explain=explain,
        )
        if isinstance(result, ExplainedRetrieveGraphResult):
            explained = msgspec.json.encode(result.explanations).decode()
            toward = msgspec.json.encode(result.searched_toward).decode()
            context.set_trailing_metadata(
                ((EXPLANATION_METADATA, explained), (SEARCHED_TOWARD_METADATA, toward))
            )
        return convert.graph_to_wire(result)

    @rpc
    def RetrieveByID(
        self, request: pb.RetrieveByIDRequest, context: grpc.ServicerContext
    ) -> pb.MemoryRecordResponse:
        checks.check_retrieve_by_id(request)
        as_of, as_of_position = _as_of(context)
        caller = CURRENT_CALLER.get()
        _await_min_position(context, self._reader(caller))
        record = self._reader(caller).retrieve_by_id(
            request.id,
            trust=caller.clamp(convert.trust_from_wire(request.trust)),
            as_of=as_of,
            as_of_position=as_of_position,
        )
        return pb.MemoryRecordResponse(record=convert.record_to_wire(record))

    @rpc
    def GetMetrics(
        self, request: pb.GetMetricsRequest, context: grpc.ServicerContext
    ) -> pb.MetricsResponse:
        as_of, as_of_position = _as_of(context)
        engine = self._reader(CURRENT_CALLER.get())
        _await_min_position(context, engine)
        snapshot = engine.get_metrics(as_of=as_of, as_of_position=as_of_position)
        return convert.metrics_to_wire(snapshot)

    # --- revisions --------------------------------------------------------------------------

    @rpc
    def Supersede(
        self, request: pb.SupersedeRequest, context: grpc.ServicerContext
    ) -> pb.MemoryRecordResponse:
        record = convert.record_from_wire(
            request.new_record, request.HasField("new_record"), "new_record"
        )
        engine = self.revisable([request.old_id], record)
        created = engine.supersede(
            request.old_id,
            record,
            request.actor,
            request.rationale,
            widen=bool(_flag(context, WIDEN_METADATA)),
        )
        return pb.MemoryRecordResponse(record=convert.record_to_wire(created))

    @rpc
    def Fork(
        self, request: pb.ForkRequest, context: grpc.ServicerContext
    ) -> pb.MemoryRecordResponse:
        record = convert.record_from_wire(
            request.forked_record, request.HasField("forked_record"), "forked_record"
        )
        engine = self.revisable([request.source_id], record)
        created = engine.fork(
            request.source_id,
            record,
            request.actor,
            request.rationale,
            widen=bool(_flag(context, WIDEN_METADATA)),
        )
        return pb.MemoryRecordResponse(record=convert.record_to_wire(created))

    @rpc
    def Merge(
        self, request: pb.MergeRequest, context: grpc.ServicerContext
    ) -> pb.MemoryRecordResponse:
        checks.check_merge_ids(request.ids)
        record = convert.record_from_wire(
            request.merged_record, request.HasField("merged_record"), "merged_record"
        )
        ids = list(request.ids)
        created = self.revisable(ids, record).merge(
            ids,
            record,
            request.actor,
            request.rationale,
            widen=bool(_flag(context, WIDEN_METADATA)),
        )
        return pb.MemoryRecordResponse(record=convert.record_to_wire(created))

    @rpc
    def Retract(
        self, request: pb.RetractRequest, context: grpc.ServicerContext
    ) -> pb.RetractResponse:
        self.revisable([request.id]).retract(request.id, request.actor, request.rationale)
        return pb.RetractResponse()

    @rpc
    def Contest(
        self, request: pb.ContestRequest, context: grpc.ServicerContext
    ) -> pb.ContestResponse:
        checks.check_actor_rationale(request.actor, request.rationale)
        self.revisable([request.id]).contest(
            request.id, request.contesting_ref, request.actor, request.rationale
        )
        return pb.ContestResponse()

    @rpc
    def Reinforce(
        self, request: pb.ReinforceRequest, context: grpc.ServicerContext
    ) -> pb.ReinforceResponse:
        checks.check_actor_rationale(request.actor, request.rationale)
        self.revisable([request.id]).reinforce(request.id, request.actor, request.rationale)
        return pb.ReinforceResponse()

    @rpc
    def Penalize(
        self, request: pb.PenalizeRequest, context: grpc.ServicerContext
    ) -> pb.PenalizeResponse:
        checks.check_penalize(request)
        self.revisable([request.id]).penalize(
            request.id, request.amount, request.actor, request.rationale
        )
        return pb.PenalizeResponse()

    def revisable(self, ids: list[str], new_record: MemoryRecord | None = None) -> Membrane:
        """The caller's engine, once its key may revise ``ids`` and write ``new_record``.

        A key with a ceiling may only revise records it could read in full, and may not
        write what it could not read back.
        """
        caller = CURRENT_CALLER.get()
        engine = self.engine(caller)
        if not caller.unrestricted:
            ceiling = caller.ceiling()
            for record_id in ids:
                engine.retrieve_by_id(record_id, trust=ceiling)
            if new_record is not None:
                _check_ceiling(caller, new_record.sensitivity, new_record.scope)
        return engine

    def engine(self, caller: Caller) -> Membrane:
        """The caller's tenant's store (opened, and so made, if need be: for a write)."""
        return self._tenants.get(caller.tenant)

    def reader(self, caller: Caller) -> Membrane:
        """The caller's store for a read (see :meth:`_reader`)."""
        return self._reader(caller)

    def _reader(self, caller: Caller) -> Membrane:
        """The caller's store for a read: a tenant without one reads as empty, and none is
        created for it."""
        return self._tenants.reader(caller.tenant)


def _check_ceiling(caller: Caller, sensitivity: str, scope: str) -> None:
    """A key may not write what it could not read back."""
    if not caller.may_write(sensitivity, scope):
        raise WireError(
            grpc.StatusCode.PERMISSION_DENIED,
            "record sensitivity or scope exceeds this API key's ceiling",
        )


def _explain(context: grpc.ServicerContext) -> bool:
    """Whether the call asks for explanations (``x-membrane-explain``: true or false)."""
    return bool(_flag(context, EXPLAIN_METADATA))


def _flag(context: grpc.ServicerContext, key: str) -> bool | None:
    """A true-or-false metadata value of the call (None: absent)."""
    value = first_value(context.invocation_metadata(), key)
    if value is None:
        return None
    answer = {"true": True, "1": True, "false": False, "0": False}.get(value.strip().lower())
    if answer is None:
        raise WireError(grpc.StatusCode.INVALID_ARGUMENT, f"invalid {key}: true or false")
    return answer


def _as_of(context: grpc.ServicerContext) -> tuple[datetime | None, int | None]:
    """The moment a read answers for: ``x-membrane-as-of`` (RFC 3339), or the log position
    ``x-membrane-as-of-position`` (right after that event); one or neither, not both."""
    metadata = context.invocation_metadata()
    value = first_value(metadata, AS_OF_METADATA)
    position = first_value(metadata, AS_OF_POSITION_METADATA)
    if position is None:
        return (
            None if value is None else checks.parse_timestamp(value, f"invalid {AS_OF_METADATA}")
        ), None
    if value is not None:
        raise WireError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"invalid {AS_OF_POSITION_METADATA}: give {AS_OF_METADATA} or it, not both",
        )
    text = position.strip()
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_POSITION:
        raise WireError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"invalid {AS_OF_POSITION_METADATA}: a log position (a whole number >= 0)",
        )
    return None, int(text)


def _send_position(context: grpc.ServicerContext, engine: Membrane) -> None:
    """Answer a write with the log position of its last event (this thread's last write)."""
    position = engine.last_position
    if position is not None:
        context.send_initial_metadata(((POSITION_METADATA, str(position)),))


def _await_min_position(context: grpc.ServicerContext, engine: Membrane) -> None:
    """Wait until the engine's views include ``x-membrane-min-position``, if given: at most
    the call's remaining deadline and POSITION_WAIT_SECONDS (then DEADLINE_EXCEEDED)."""
    value = first_value(context.invocation_metadata(), MIN_POSITION_METADATA)
    if value is None:
        return
    if not (value.isascii() and value.isdigit()):
        raise WireError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"invalid {MIN_POSITION_METADATA}: a log position (a whole number >= 0)",
        )
    remaining = context.time_remaining()
    wait = POSITION_WAIT_SECONDS if remaining is None else min(remaining, POSITION_WAIT_SECONDS)
    engine.wait_for_position(int(value), timeout=wait)


def _validation_text(error: ValidationError) -> str:
    """The message, naming its field when the message does not already."""
    if error.field and error.field.split(".")[0].split("[")[0] not in error.message:
        return f"{error.field}: {error.message}"
    return error.message

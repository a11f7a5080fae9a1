"""Authentication, then rate limiting, then parsing, around every unary call (spec §8.5).

Auth first, so refused calls spend no tokens; the request bytes are parsed only after the
key is accepted, so an unauthenticated caller cannot make the server parse anything.
Bytes that are not a valid request (malformed, or nested deeper than protobuf allows) are
INVALID_ARGUMENT. Unary calls, and the server-streaming calls of our own service (the
change feed), which are guarded once as they begin; the health service's streaming
``Watch`` is not guarded, its unary ``Check`` is. The authenticated caller is handed to the
handler through :data:`~membrane_es.access.keys.CURRENT_CALLER`. The
handler runs inside ``serving()`` (:meth:`~membrane_es.serving.tenants.Tenants.serving`), so no
store it uses is closed before the call ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from membrane_es.access.ceiling import Caller
from membrane_es.access.keys import CURRENT_CALLER, KeyRing, first_value
from membrane_es.grpc_server.ratelimit import TokenBuckets

UnaryBehaviour = Callable[[Any, grpc.ServicerContext], Any]
StreamBehaviour = Callable[[Any, grpc.ServicerContext], Iterator[Any]]
# The streaming RPCs guarded: our own service's (the health service's Watch stays open).
GUARDED_STREAMS = ("/membrane_es.v1.",)


class GuardInterceptor(grpc.ServerInterceptor):
    """Refuses unauthenticated calls (UNAUTHENTICATED) and over-quota ones (RESOURCE_EXHAUSTED)."""

    def __init__(
        self,
        keys: KeyRing,
        buckets: TokenBuckets,
        serving: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> None:
        self._keys = keys
        self._buckets = buckets
        self._serving = serving

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if (
            handler is not None
            and handler.unary_stream is not None
            and handler_call_details.method.startswith(GUARDED_STREAMS)
        ):
            return grpc.unary_stream_rpc_method_handler(
                self._guard_stream(handler.unary_stream, handler.request_deserializer),
                request_deserializer=None,
                response_serializer=handler.response_serializer,
            )
        if handler is None or handler.unary_unary is None:
            return handler
        # The raw bytes reach the guard, which parses them once the caller is known.
        return grpc.unary_unary_rpc_method_handler(
            self._guard(handler.unary_unary, handler.request_deserializer),
            request_deserializer=None,
            response_serializer=handler.response_serializer,
        )

    def _admit(
        self, raw: Any, context: grpc.ServicerContext, parse: Callable[[bytes], Any] | None
    ) -> tuple[Caller, Any]:
        """The caller and its request, once its key and its rate allow (else the call is
        aborted): what every guarded call, unary or streaming, does first."""
        authorization = first_value(context.invocation_metadata(), "authorization")
        caller = self._keys.caller_for(authorization)
        if caller is None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid or missing API key")
        buckets = self._buckets
        if buckets.enabled and not buckets.allow(_identity(context, authorization)):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit exceeded")
        request = raw if parse is None else _parse(parse, raw, context)
        return caller, request

    def _guard(
        self, behaviour: UnaryBehaviour, parse: Callable[[bytes], Any] | None
    ) -> UnaryBehaviour:
        admit, serving = self._admit, self._serving

        def guarded(raw: Any, context: grpc.ServicerContext) -> Any:
            caller, request = admit(raw, context, parse)
            token = CURRENT_CALLER.set(caller)
            try:
                with serving():
                    return behaviour(request, context)
            finally:
                CURRENT_CALLER.reset(token)

        return guarded

    def _guard_stream(
        self, behaviour: StreamBehaviour, parse: Callable[[bytes], Any] | None
    ) -> StreamBehaviour:
        admit, serving = self._admit, self._serving

        def guarded(raw: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            caller, request = admit(raw, context, parse)
            token = CURRENT_CALLER.set(caller)
            try:
                # a followed feed holds its store open for as long as it streams
                with serving():
                    yield from behaviour(request, context)
            finally:
                CURRENT_CALLER.reset(token)

        return guarded


def _parse(parse: Callable[[bytes], Any], raw: bytes, context: grpc.ServicerContext) -> Any:
    try:
        return parse(raw)
    except DecodeError as error:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {error}")
    except RecursionError:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "malformed request: nested too deeply")


def _identity(context: grpc.ServicerContext, authorization: str | None) -> str:
    """The peer address (so each connection has its own quota), as the reference does."""
    peer = context.peer()
    if peer:
        return str(peer)
    return f"auth:{authorization}" if authorization else "anonymous"

"""Authentication, then rate limiting, around every unary call (spec §8.5).

Auth first, so refused calls spend no tokens. Unary only, as the reference: the health
service's streaming ``Watch`` is not guarded, its unary ``Check`` is. The authenticated
caller is handed to the handler through :data:`~membrane_es.access.CURRENT_CALLER`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from membrane_es.access import CURRENT_CALLER, KeyRing, first_value
from membrane_es.grpc_server.ratelimit import TokenBuckets

UnaryBehaviour = Callable[[Any, grpc.ServicerContext], Any]


class GuardInterceptor(grpc.ServerInterceptor):
    """Refuses unauthenticated calls (UNAUTHENTICATED) and over-quota ones (RESOURCE_EXHAUSTED)."""

    def __init__(self, keys: KeyRing, buckets: TokenBuckets) -> None:
        self._keys = keys
        self._buckets = buckets

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        return grpc.unary_unary_rpc_method_handler(
            self._guard(handler.unary_unary),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _guard(self, behaviour: UnaryBehaviour) -> UnaryBehaviour:
        keys, buckets = self._keys, self._buckets

        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            authorization = first_value(context.invocation_metadata(), "authorization")
            caller = keys.caller_for(authorization)
            if caller is None:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid or missing API key")
            if buckets.enabled and not buckets.allow(_identity(context, authorization)):
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit exceeded")
            token = CURRENT_CALLER.set(caller)
            try:
                return behaviour(request, context)
            finally:
                CURRENT_CALLER.reset(token)

        return guarded


def _identity(context: grpc.ServicerContext, authorization: str | None) -> str:
    """The peer address (so each connection has its own quota), as the reference does."""
    peer = context.peer()
    if peer:
        return str(peer)
    return f"auth:{authorization}" if authorization else "anonymous"

"""``membrane_es.v1.MembraneEsService``: the daemon's RPCs beyond Membrane's contract.

``membrane.v1`` stays exactly Membrane's (its SDKs must keep working unchanged), so every RPC
it lacks lives in our own proto package, ``membrane_es.v1``, served by the same daemon with
the same API keys, tenants, rate limits and status table as :mod:`.service`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import grpc

from membrane_es.access.keys import CURRENT_CALLER, Caller
from membrane_es.engine import Membrane
from membrane_es.errors import ValidationError
from membrane_es.grpc_server.convert import record_to_wire
from membrane_es.grpc_server.service import MembraneService, rpc, rpc_stream
from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2 as pb
from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2_grpc as pb_grpc
from membrane_es.schema.changes import Change
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext


class MembraneEsService(pb_grpc.MembraneEsServiceServicer):
    """Our own RPCs, on the engines and access rules of a :class:`MembraneService`."""

    def __init__(self, membrane: MembraneService) -> None:
        self._membrane = membrane

    @rpc
    def Forget(self, request: pb.ForgetRequest, context: grpc.ServicerContext) -> pb.ForgetResponse:
        # A key with a ceiling may forget only records it could read in full.
        engine = self._membrane.revisable([request.id])
        forgotten = engine.forget(request.id, request.actor, request.rationale)
        return pb.ForgetResponse(forgotten_ids=forgotten)

    @rpc_stream
    def Changes(
        self, request: pb.ChangesRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.Change]:
        caller = CURRENT_CALLER.get()
        trust = OWNER if caller.unrestricted else caller.ceiling()
        timeout = request.timeout_seconds
        if not math.isfinite(timeout) or timeout < 0:
            raise ValidationError("timeout_seconds", f"must be seconds (>= 0): {timeout}")
        feed = self._membrane.reader(caller).changes(
            after=request.after,
            limit=request.limit,
            follow=request.follow,
            timeout=timeout or None,
            trust=trust,
        )
        # A cancelled call (the client left) ends a follow that waits for writes.
        context.add_callback(feed.close)
        with feed:
            for change in feed:
                yield change_to_wire(change)

    def engine(self, caller: Caller) -> Membrane:
        return self._membrane.engine(caller)


OWNER = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)


def change_to_wire(change: Change) -> pb.Change:
    return pb.Change(
        position=change.position,
        log_time=change.log_time.isoformat().replace("+00:00", "Z"),
        event_time=(
            ""
            if change.event_time is None
            else change.event_time.isoformat().replace("+00:00", "Z")
        ),
        record_id=change.record_id,
        version=change.version,
        type=change.type,
        scope=change.scope,
        sensitivity=change.sensitivity,
        operation=change.operation,
        action=change.action,
        actor=change.actor,
        rationale=change.rationale,
        redacted=change.redacted,
        erased=change.erased,
        fields=[
            pb.FieldChange(path=f.path, kind=f.kind, before=f.before, after=f.after)
            for f in change.fields
        ],
        record=record_to_wire(change.record),
    )

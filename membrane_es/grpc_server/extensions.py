"""``membrane_es.v1.MembraneEsService``: the daemon's RPCs beyond Membrane's contract.

``membrane.v1`` stays exactly Membrane's (its SDKs must keep working unchanged), so every RPC
it lacks lives in our own proto package, ``membrane_es.v1``, served by the same daemon with
the same API keys, tenants, rate limits and status table as :mod:`.service`.
"""

from __future__ import annotations

import grpc

from membrane_es.access import Caller
from membrane_es.engine import Membrane
from membrane_es.grpc_server.service import MembraneService, rpc
from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2 as pb
from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2_grpc as pb_grpc


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

    def engine(self, caller: Caller) -> Membrane:
        return self._membrane.engine(caller)

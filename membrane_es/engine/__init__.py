"""The ``Membrane`` facade: the one object users hold, and the composition root.

Method names and signatures follow the reference Python SDK, so code written against it
ports by changing how the client is made::

    with Membrane.open("./memory") as memory:          # durable, LMDB-backed
        fact = memory.create_record({...})
        memory.reinforce(fact.id, "agent", "it helped")
        memory.retrieve_by_id(fact.id, trust=TrustContext(max_sensitivity="medium"))
        memory.retrieve("deploy the service", limit=10)       # layered, ranked
        memory.retrieve_graph("Orchid")                        # roots and their neighbours
        memory.capture_memory({"project": "Orchid"}, source_kind="event")  # raw content in

The facade is composed of parts, one idea each: :mod:`.core` (state, read side, command
bus), :mod:`.opening` (open, close, checkpoint), :mod:`.revisions`, :mod:`.ingestion`,
:mod:`.reads`, :mod:`.maintenance` (consolidation, now or on a schedule), :mod:`.forgetting`
(erasure), :mod:`.export_import` (the log to and from a file) and :mod:`.entries` (the seed-003
entries API).
"""

from __future__ import annotations

from membrane_es.engine.core import CONFLICT_ATTEMPTS, RequestTime
from membrane_es.engine.entries import Entries
from membrane_es.engine.export_import import ExportImport
from membrane_es.engine.forgetting import Forgetting
from membrane_es.engine.ingestion import Ingestion
from membrane_es.engine.maintenance import Maintenance
from membrane_es.engine.opening import Opening
from membrane_es.engine.reads import Reads
from membrane_es.engine.revisions import Revisions

__all__ = ["CONFLICT_ATTEMPTS", "Membrane", "RequestTime"]


class Membrane(
    Opening, Entries, Revisions, Ingestion, Reads, Maintenance, Forgetting, ExportImport
):
    """An event-sourced memory engine.

    :param app: the eventsourcing application holding the log (see :meth:`open`,
        :meth:`in_memory`).
    :param clock: the engine's clock; tests may pass one driven by hand.
    :param selection_threshold: the selector's confidence below which a retrieval's
        selection says ``needs_more`` (the reference's default, 0.7).
    :param interpreter: reads captures and proposes mentions and links (an LLM, rules…);
        see :class:`~membrane_es.commands.interpreter.Interpreter`. Without one, capture
        uses its fallback interpretation only.
    :param default_sensitivity: the sensitivity the ``ingest_*`` operations give records
        when the caller names none (capture always defaults to ``low``, as the reference).

    Writes are serialised within one process (event times then increase in log order);
    a write that loses a race with another process is retried from a fresh load, then
    reported as :class:`~membrane_es.errors.ConflictError`.
    """

"""The ``Membrane`` facade: the one object users hold, and the composition root.

Method names and signatures follow the reference Python SDK, so code written against it
ports by changing how the client is made::

    with Membrane.connect("./memory") as memory:       # durable, LMDB-backed
        fact = memory.create_record({...})
        memory.reinforce(fact.id, "agent", "it helped")
        memory.retrieve_by_id(fact.id, trust=TrustContext(max_sensitivity="medium"))
        memory.retrieve("deploy the service", limit=10)       # layered, ranked
        memory.retrieve_graph("Orchid")                        # roots and their neighbours
        memory.capture_memory({"project": "Orchid"}, source_kind="event")  # raw content in

The facade is composed of parts, one idea each: :mod:`.core` (state, read side, command
bus), :mod:`.options` (what an engine is opened with), :mod:`.addresses` (where a store
is), :mod:`.opening` (connect, open, close, checkpoint), :mod:`.closing` (a closed engine
refuses every call), :mod:`.store_check` (verify a store without opening it),
:mod:`.revisions`, :mod:`.ingestion`, :mod:`.reads`, :mod:`.inspection` (figures about the
store as a whole), :mod:`.maintenance` (consolidation, now or on a schedule),
:mod:`.forgetting` (erasure), :mod:`.export_import` (the log to and from a file) and
:mod:`.entries` (the seed-003 entries API).
"""

from __future__ import annotations

from membrane_es.engine.addresses import IN_MEMORY, StoreAddress, holds_store
from membrane_es.engine.changes import DEFAULT_PAGE as DEFAULT_CHANGE_PAGE
from membrane_es.engine.changes import MAX_PAGE as MAX_CHANGE_PAGE
from membrane_es.engine.changes import ChangeFeed, Changes
from membrane_es.engine.closing import refuse_after_close
from membrane_es.engine.core import CONFLICT_ATTEMPTS, DEFAULT_POSITION_WAIT_SECONDS, RequestTime
from membrane_es.engine.entries import ENTRY_ACTOR, Entries, moment_of
from membrane_es.engine.export_import import ExportImport
from membrane_es.engine.forgetting import FORGOTTEN_EVENT, Forgetting
from membrane_es.engine.ingestion import Ingestion
from membrane_es.engine.inspection import Census, Inspection
from membrane_es.engine.maintenance import Maintenance
from membrane_es.engine.opening import Opening
from membrane_es.engine.options import EngineOptions
from membrane_es.engine.reads import Reads
from membrane_es.engine.revisions import Revisions
from membrane_es.engine.store_check import verify_store

# What the edges (CLI, servers, MCP) show and take besides the engine's methods: the shapes
# of its answers, its defaults and limits, and the trust rule a page applies to a record.
from membrane_es.queries import compact, field_diff
from membrane_es.queries.by_id import HistoryEntry
from membrane_es.queries.context import (
    DEFAULT_BUDGET_TOKENS,
    MAX_BUDGET_TOKENS,
    MIN_BUDGET_TOKENS,
)
from membrane_es.queries.entries import DEFAULT_LIMIT as DEFAULT_ENTRY_LIMIT
from membrane_es.queries.entries import MAX_LIMIT as MAX_ENTRY_LIMIT
from membrane_es.queries.entries import EntryQuery, Expansion, RerankReport, SearchAdvisor
from membrane_es.queries.entry_scores import EntryExplanation
from membrane_es.queries.ranking import EVIDENCE_WEIGHT, SALIENCE_WEIGHT
from membrane_es.queries.retrieve import DEFAULT_RESULTS
from membrane_es.queries.retrieve_graph import (
    DEFAULT_EDGE_LIMIT,
    DEFAULT_MAX_HOPS,
    DEFAULT_NODE_LIMIT,
    DEFAULT_ROOT_LIMIT,
)
from membrane_es.queries.trust import allows, visible
from membrane_es.schema.validation import MAX_LIMIT as MAX_RESULTS  # the most one read returns

__all__ = [
    "CONFLICT_ATTEMPTS",
    "DEFAULT_BUDGET_TOKENS",
    "DEFAULT_CHANGE_PAGE",
    "DEFAULT_EDGE_LIMIT",
    "DEFAULT_ENTRY_LIMIT",
    "DEFAULT_MAX_HOPS",
    "DEFAULT_NODE_LIMIT",
    "DEFAULT_POSITION_WAIT_SECONDS",
    "DEFAULT_RESULTS",
    "DEFAULT_ROOT_LIMIT",
    "ENTRY_ACTOR",
    "EVIDENCE_WEIGHT",
    "FORGOTTEN_EVENT",
    "IN_MEMORY",
    "MAX_BUDGET_TOKENS",
    "MAX_CHANGE_PAGE",
    "MAX_ENTRY_LIMIT",
    "MAX_RESULTS",
    "MIN_BUDGET_TOKENS",
    "SALIENCE_WEIGHT",
    "Census",
    "ChangeFeed",
    "EngineOptions",
    "EntryExplanation",
    "EntryQuery",
    "Expansion",
    "HistoryEntry",
    "Membrane",
    "RerankReport",
    "SearchAdvisor",
    "StoreAddress",
    "RequestTime",
    "allows",
    "compact",
    "field_diff",
    "holds_store",
    "moment_of",
    "verify_store",
    "visible",
]


@refuse_after_close
class Membrane(
    Opening,
    Entries,
    Revisions,
    Ingestion,
    Reads,
    Changes,
    Inspection,
    Maintenance,
    Forgetting,
    ExportImport,
):
    """An event-sourced memory engine.

    :param app: the eventsourcing application holding the log (see :meth:`connect`, which
        makes one from a store's address, and :meth:`open`, :meth:`in_memory`).
    :param options: what the engine is opened with — clock, embedder, selection threshold,
        interpreter, default sensitivity: :class:`~membrane_es.engine.options.EngineOptions`,
        whose fields the keyword arguments (``clock=…``, ``embedder=…``) also set.

    Writes are serialised within one process (event times then increase in log order);
    a write that loses a race with another process is retried from a fresh load, then
    reported as :class:`~membrane_es.errors.ConflictError`.
    """

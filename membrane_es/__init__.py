"""membrane_es: an event-sourced memory engine for AI agents.

Typed, revisable, trust-gated memory whose every revision is an immutable event, so the
whole store can be read as of any past moment.
"""

from importlib import metadata as _metadata

from membrane_es import errors as _errors
from membrane_es.commands.extractor import Extractor, Triple
from membrane_es.commands.interpreter import Interpreter, Resolver
from membrane_es.engine import MAX_RESULTS, ChangeFeed, EngineOptions, Membrane, StoreAddress
from membrane_es.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    AlreadyReplacedError,
    ConflictError,
    EpisodicImmutableError,
    ErasureUnsupportedError,
    ForgottenError,
    IntegrityError,
    KeyStoreError,
    MembraneError,
    NotFoundError,
    ReadOnlyError,
    StorageFullError,
    StoreClosedError,
    StoreNotFoundError,
    ValidationError,
)
from membrane_es.queries.by_id import HistoryEntry
from membrane_es.queries.touched import RecordChange, RecordChanges
from membrane_es.schema import (
    AuditAction,
    AuditEntry,
    CaptureMemoryResult,
    CompetencePayload,
    ConsolidationResult,
    ContextMemory,
    ContextResult,
    DecayProfile,
    EntityPayload,
    EpisodicPayload,
    ExplainedRetrieveGraphResult,
    ExplainedRetrieveResult,
    Explanation,
    GraphEdge,
    GraphNode,
    Lifecycle,
    MemoryRecord,
    MemoryType,
    OutcomeStatus,
    PlanGraphPayload,
    Provenance,
    ProvenanceRef,
    ProvenanceSource,
    Relation,
    RetrieveGraphResult,
    RetrieveResult,
    RevisionStatus,
    SelectionResult,
    SemanticPayload,
    Sensitivity,
    TrustContext,
    WorkingPayload,
)
from membrane_es.schema.changes import Change, ChangePage, FieldChange

__all__ = [
    "MAX_RESULTS",
    "AccessDeniedError",
    "AlreadyExistsError",
    "AlreadyReplacedError",
    "AuditAction",
    "AuditEntry",
    "CaptureMemoryResult",
    "Change",
    "ChangeFeed",
    "ChangePage",
    "CompetencePayload",
    "ConflictError",
    "ConsolidationResult",
    "ContextMemory",
    "ContextResult",
    "DecayProfile",
    "EntityPayload",
    "EngineOptions",
    "EpisodicImmutableError",
    "ErasureUnsupportedError",
    "ForgottenError",
    "EpisodicPayload",
    "FieldChange",
    "Extractor",
    "GraphEdge",
    "GraphNode",
    "HistoryEntry",
    "RecordChange",
    "RecordChanges",
    "IntegrityError",
    "Interpreter",
    "KeyStoreError",
    "Lifecycle",
    "Membrane",
    "MembraneError",
    "MemoryRecord",
    "MemoryType",
    "NotFoundError",
    "OutcomeStatus",
    "PlanGraphPayload",
    "Provenance",
    "ProvenanceRef",
    "ProvenanceSource",
    "ReadOnlyError",
    "Relation",
    "Resolver",
    "ExplainedRetrieveGraphResult",
    "ExplainedRetrieveResult",
    "Explanation",
    "RetrieveGraphResult",
    "RetrieveResult",
    "RevisionStatus",
    "SelectionResult",
    "SemanticPayload",
    "Sensitivity",
    "StorageFullError",
    "StoreClosedError",
    "StoreAddress",
    "StoreNotFoundError",
    "Triple",
    "TrustContext",
    "ValidationError",
    "WorkingPayload",
]


def __getattr__(name: str) -> object:
    """The errors' earlier names (:data:`membrane_es.errors.EARLIER_NAMES`), with a warning."""
    if name in _errors.EARLIER_NAMES:
        return _errors.renamed(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


try:
    __version__ = _metadata.version("membrane-es")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

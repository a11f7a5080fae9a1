"""membrane_es: an event-sourced memory engine for AI agents.

Typed, revisable, trust-gated memory whose every revision is an immutable event, so the
whole store can be read as of any past moment.
"""

from membrane_es.engine import Membrane
from membrane_es.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    ConflictError,
    EpisodicImmutableError,
    IntegrityViolationError,
    MembraneError,
    NotFoundError,
    ValidationError,
)
from membrane_es.queries.records import HistoryEntry
from membrane_es.schema import (
    AuditAction,
    AuditEntry,
    CompetencePayload,
    DecayProfile,
    EntityPayload,
    EpisodicPayload,
    Lifecycle,
    MemoryRecord,
    MemoryType,
    OutcomeStatus,
    PlanGraphPayload,
    Provenance,
    ProvenanceRef,
    ProvenanceSource,
    Relation,
    RevisionStatus,
    SemanticPayload,
    Sensitivity,
    TrustContext,
    WorkingPayload,
)

__all__ = [
    "AccessDeniedError",
    "AlreadyExistsError",
    "AuditAction",
    "AuditEntry",
    "CompetencePayload",
    "ConflictError",
    "DecayProfile",
    "EntityPayload",
    "EpisodicImmutableError",
    "EpisodicPayload",
    "HistoryEntry",
    "IntegrityViolationError",
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
    "Relation",
    "RevisionStatus",
    "SemanticPayload",
    "Sensitivity",
    "TrustContext",
    "ValidationError",
    "WorkingPayload",
]

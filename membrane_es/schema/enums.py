"""The enumerations of the Membrane data model.

All are plain strings on the wire and in storage, so each is a ``str`` enum whose value is
the wire string.
"""

from __future__ import annotations

from enum import StrEnum


class MemoryType(StrEnum):
    EPISODIC = "episodic"
    WORKING = "working"
    SEMANTIC = "semantic"
    COMPETENCE = "competence"
    PLAN_GRAPH = "plan_graph"
    ENTITY = "entity"


class Sensitivity(StrEnum):
    PUBLIC = "public"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    HYPER = "hyper"

    @property
    def level(self) -> int:
        """Numeric order used by trust decisions: public 0 … hyper 4."""
        return _SENSITIVITY_LEVELS[self]


_SENSITIVITY_LEVELS = {s: i for i, s in enumerate(Sensitivity)}


class DecayCurve(StrEnum):
    EXPONENTIAL = "exponential"


class DeletionPolicy(StrEnum):
    AUTO_PRUNE = "auto_prune"
    MANUAL_ONLY = "manual_only"
    NEVER = "never"


class RevisionStatus(StrEnum):
    ACTIVE = "active"
    CONTESTED = "contested"
    RETRACTED = "retracted"


class ValidityMode(StrEnum):
    GLOBAL = "global"
    CONDITIONAL = "conditional"
    TIMEBOXED = "timeboxed"


class TaskState(StrEnum):
    PLANNING = "planning"
    EXECUTING = "executing"
    BLOCKED = "blocked"
    WAITING = "waiting"
    DONE = "done"


class OutcomeStatus(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    PARTIAL = "partial"


class AuditAction(StrEnum):
    CREATE = "create"
    REVISE = "revise"
    FORK = "fork"
    MERGE = "merge"
    DELETE = "delete"
    REINFORCE = "reinforce"
    DECAY = "decay"


class ProvenanceKind(StrEnum):
    EVENT = "event"
    ARTIFACT = "artifact"
    TOOL_CALL = "tool_call"
    OBSERVATION = "observation"
    OUTCOME = "outcome"


class EdgeKind(StrEnum):
    DATA = "data"
    CONTROL = "control"


class InterpretationStatus(StrEnum):
    TENTATIVE = "tentative"
    RESOLVED = "resolved"


class EntityKind(StrEnum):
    PERSON = "person"
    TOOL = "tool"
    PROJECT = "project"
    FILE = "file"
    CONCEPT = "concept"
    OTHER = "other"


class SourceKind(StrEnum):
    EVENT = "event"
    TOOL_OUTPUT = "tool_output"
    OBSERVATION = "observation"
    WORKING_STATE = "working_state"
    AGENT_TURN = "agent_turn"


class GraphPredicate(StrEnum):
    """Relation predicates the engine itself writes (any other string is allowed too)."""

    SUPERSEDES = "supersedes"
    DERIVED_FROM = "derived_from"
    DERIVED_SEMANTIC = "derived_semantic"
    CONTESTED_BY = "contested_by"
    MENTIONS_ENTITY = "mentions_entity"
    MENTIONED_IN = "mentioned_in"
    REFERENCES_RECORD = "references_record"
    REFERENCED_BY = "referenced_by"
    SUBJECT_ENTITY = "subject_entity"
    FACT_SUBJECT_OF = "fact_subject_of"
    OBJECT_ENTITY = "object_entity"
    FACT_OBJECT_OF = "fact_object_of"
    USES = "uses"
    USED_BY = "used_by"


# The entity ontology, in the reference order (``BuiltinEntityTypes``).
BUILTIN_ENTITY_TYPES: tuple[str, ...] = (
    "Person",
    "Organization",
    "Team",
    "Agent",
    "Project",
    "Repository",
    "File",
    "Directory",
    "Symbol",
    "API",
    "Service",
    "Database",
    "Package",
    "Dependency",
    "Tool",
    "Command",
    "Runtime",
    "Environment",
    "Task",
    "Issue",
    "PullRequest",
    "Decision",
    "Requirement",
    "Incident",
    "Document",
    "URL",
    "Dataset",
    "Metric",
    "Concept",
    "Event",
    "Other",
)

"""The write use cases: one message and one handler per command."""

from membrane_es.commands.extractor import Extractor, Triple
from membrane_es.commands.handlers import COMMAND_HANDLERS
from membrane_es.commands.interpreter import Interpreter, Resolver
from membrane_es.commands.messages import (
    AddRelation,
    CaptureMemory,
    Command,
    Consolidate,
    Contest,
    CreateRecord,
    Forget,
    Fork,
    IngestEvent,
    IngestObservation,
    IngestOutcome,
    IngestToolOutput,
    IngestWorkingState,
    Merge,
    Penalize,
    Pin,
    RecordOutcome,
    Reinforce,
    Retract,
    Supersede,
    Unpin,
)
from membrane_es.commands.unit_of_work import UnitOfWork

__all__ = [
    "COMMAND_HANDLERS",
    "AddRelation",
    "CaptureMemory",
    "Command",
    "Consolidate",
    "Contest",
    "CreateRecord",
    "Extractor",
    "Forget",
    "Fork",
    "IngestEvent",
    "IngestObservation",
    "IngestOutcome",
    "IngestToolOutput",
    "IngestWorkingState",
    "Interpreter",
    "Merge",
    "Penalize",
    "Pin",
    "RecordOutcome",
    "Reinforce",
    "Resolver",
    "Retract",
    "Supersede",
    "Triple",
    "Unpin",
    "UnitOfWork",
]

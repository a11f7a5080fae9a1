"""The write use cases: one message and one handler per command."""

from collections.abc import Callable
from typing import Any

from membrane_es.commands.entries import ENTRY_HANDLERS
from membrane_es.commands.extractor import Extractor, Triple
from membrane_es.commands.handlers import RECORD_HANDLERS
from membrane_es.commands.interpreter import Interpreter, Resolver
from membrane_es.commands.messages import (
    AddRelation,
    CaptureMemory,
    Command,
    Consolidate,
    Contest,
    CreateEntry,
    CreateRecord,
    DeleteEntry,
    Forget,
    Fork,
    IngestEvent,
    IngestObservation,
    IngestOutcome,
    IngestToolOutput,
    IngestWorkingState,
    InvalidateEntry,
    Merge,
    Penalize,
    Pin,
    RecordOutcome,
    Reinforce,
    RelateEntries,
    Retract,
    ReviseEntry,
    Supersede,
    Unpin,
)
from membrane_es.commands.unit_of_work import EntryReads, UnitOfWork

# Every command's handler: the records' use cases, then the entries API's.
COMMAND_HANDLERS: dict[type[Command], Callable[[Any, UnitOfWork], Any]] = {
    **RECORD_HANDLERS,
    **ENTRY_HANDLERS,
}

__all__ = [
    "COMMAND_HANDLERS",
    "AddRelation",
    "CaptureMemory",
    "Command",
    "Consolidate",
    "Contest",
    "CreateEntry",
    "CreateRecord",
    "DeleteEntry",
    "EntryReads",
    "Extractor",
    "Forget",
    "Fork",
    "IngestEvent",
    "IngestObservation",
    "IngestOutcome",
    "IngestToolOutput",
    "IngestWorkingState",
    "Interpreter",
    "InvalidateEntry",
    "Merge",
    "Penalize",
    "Pin",
    "RecordOutcome",
    "Reinforce",
    "RelateEntries",
    "Resolver",
    "Retract",
    "ReviseEntry",
    "Supersede",
    "Triple",
    "Unpin",
    "UnitOfWork",
]

"""The write use cases: one message and one handler per command."""

from membrane_es.commands.handlers import COMMAND_HANDLERS
from membrane_es.commands.messages import (
    AddRelation,
    Command,
    Contest,
    CreateRecord,
    Fork,
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
    "Command",
    "Contest",
    "CreateRecord",
    "Fork",
    "Merge",
    "Penalize",
    "Pin",
    "RecordOutcome",
    "Reinforce",
    "Retract",
    "Supersede",
    "Unpin",
    "UnitOfWork",
]

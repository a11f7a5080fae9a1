"""The interpretation hook of capture (spec §2.4 steps 3 and 5, §5.7).

Capture always builds a fallback interpretation from the content's keys. An engine may also
be given an :class:`Interpreter` (an LLM, rules, anything): its ``interpret`` result is merged
over the fallback; if it also has a ``resolve`` method (:class:`Resolver`), a second pass may
fill canonical entity ids and target record ids against the capture's candidate records.

Either method may return an :class:`~membrane_es.schema.Interpretation`, a dict of the same
shape (the reference JSON form), or None for "nothing to add". Whatever it raises is ignored,
as the reference ignores a failing LLM: capture never depends on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from membrane_es.commands.messages import CaptureMemory
from membrane_es.schema.records import Interpretation, MemoryRecord

InterpretationLike = Interpretation | Mapping[str, Any] | None


class Interpreter(Protocol):
    """Reads a capture and proposes an interpretation (summary, type, mentions, links).

    ``request`` is the validated capture: content and context as plain JSON values,
    sensitivity resolved and the timestamp as a UTC datetime.
    """

    def interpret(self, request: CaptureMemory) -> InterpretationLike: ...


class Resolver(Protocol):
    """An interpreter that can also resolve its mentions and links against known records."""

    def resolve(
        self,
        request: CaptureMemory,
        interpretation: Interpretation,
        candidates: Sequence[MemoryRecord],
    ) -> InterpretationLike: ...


# What a reconciler answers: {"action": "supersede" | "keep" | "reinforce", "records": [ids],
# "rationale": "..."}, or None for "no opinion" (the predicate vocabulary decides).
ReconcileLike = Mapping[str, Any] | None


class Reconciler(Protocol):
    """An interpreter that can also decide what a new fact means for the facts already held
    about its subject and predicate (resolution on write asks it only when the store's
    predicate vocabulary does not know the predicate): ``supersede`` the records it names
    (default: all of ``existing``), ``keep`` them alongside, or ``reinforce`` the one it
    names (the new fact says the same thing in other words; nothing new is stored).

    ``existing`` are the active facts of the same type, scope and sensitivity, same subject
    and predicate, other object, oldest first."""

    def reconcile(
        self, record: MemoryRecord, existing: Sequence[MemoryRecord]
    ) -> ReconcileLike: ...

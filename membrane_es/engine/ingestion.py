"""The facade's capture and ingestion (spec §2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from membrane_es.commands import messages
from membrane_es.engine.core import (
    EngineCore,
    RequestTime,
)
from membrane_es.schema.capture import CaptureMemoryResult
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import DecayProfile, MemoryRecord
from membrane_es.schema.validation import as_dict, as_list


class Ingestion(EngineCore):
    """Raw content and typed observations in."""

    # --- capture and ingestion (spec §2) ------------------------------------------------------

    def capture_memory(
        self,
        content: Any,
        *,
        source_kind: str = "agent_turn",
        context: Any = None,
        reason_to_remember: str = "",
        proposed_type: str | None = None,
        summary: str = "",
        sensitivity: str = Sensitivity.LOW.value,
        source: str = "python-client",
        tags: Sequence[str] | None = None,
        scope: str = "",
        timestamp: RequestTime = None,
        decay: DecayProfile | Mapping[str, Any] | None = None,
        pinned: bool = False,
        resolve: bool | None = None,
    ) -> CaptureMemoryResult:
        """Remember raw content (spec §2.4; the SDK's signature).

        Makes a primary record (working for ``source_kind="working_state"``, episodic for
        anything else), an entity for each thing the content names that is not known yet,
        a semantic fact when the content is ``{"subject", "predicate", "object"}``-shaped,
        and the edges between them and the records they name — all in one atomic write.

        :param content: any JSON value; an object's keys drive what is extracted.
        :param context: any JSON value kept alongside (``active_entities`` guide matching).
        :param timestamp: when it happened (aware datetime or RFC 3339); default now.
        :param decay: the primary record's decay profile (a :class:`DecayProfile` or a dict
            of its fields); default the engine's long-lived profile for its type.
        :param pinned: create the primary record pinned (it does not decay until unpinned).
        :param resolve: resolve the derived fact on write (None: the store's choice; see
            :meth:`create_record`). A fact already known is not derived again: the existing
            one is linked, reinforced, and listed in ``resolved_records``. The primary record
            is never merged: two identical turns are two events.
        """
        result: CaptureMemoryResult = self.handle(
            messages.CaptureMemory(
                content=content,
                source_kind=source_kind,
                context=context,
                reason_to_remember=reason_to_remember,
                proposed_type=proposed_type or "",
                summary=summary,
                sensitivity=sensitivity,
                source=source,
                tags=as_list("tags", tags),
                scope=scope,
                timestamp=timestamp,
                decay=decay,
                pinned=pinned,
                resolve=resolve,
            )
        )
        return result

    def ingest_event(
        self,
        event_kind: str,
        ref: str,
        *,
        summary: str = "",
        sensitivity: str | None = None,
        source: str = "python-client",
        tags: Sequence[str] | None = None,
        scope: str = "",
        timestamp: RequestTime = None,
    ) -> MemoryRecord:
        """An event as an episodic record (the older API; confidence 0.8, half-life a day)."""
        result: MemoryRecord = self.handle(
            messages.IngestEvent(
                event_kind=event_kind,
                ref=ref,
                summary=summary,
                **self._ingest_fields(sensitivity, source, tags, scope, timestamp),
            )
        )
        return result

    def ingest_tool_output(
        self,
        tool_name: str,
        *,
        args: Mapping[str, Any] | None = None,
        result: Any = None,
        sensitivity: str | None = None,
        source: str = "python-client",
        depends_on: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        scope: str = "",
        timestamp: RequestTime = None,
    ) -> MemoryRecord:
        """A tool call and its result as an episodic record (confidence 0.9, half-life a day)."""
        record: MemoryRecord = self.handle(
            messages.IngestToolOutput(
                tool_name=tool_name,
                args=as_dict("args", args),
                result=result,
                depends_on=as_list("depends_on", depends_on),
                **self._ingest_fields(sensitivity, source, tags, scope, timestamp),
            )
        )
        return record

    def ingest_observation(
        self,
        subject: str,
        predicate: str,
        obj: Any,
        *,
        sensitivity: str | None = None,
        source: str = "python-client",
        tags: Sequence[str] | None = None,
        scope: str = "",
        timestamp: RequestTime = None,
        resolve: bool | None = None,
    ) -> MemoryRecord:
        """An observed fact as a semantic record (confidence 0.7, half-life a year).

        A subject (or string object) that names a known entity in ``scope`` (or unscoped) is
        replaced by the entity's id and joined to it by ``subject_entity``/``object_entity``
        and their inverses, in the same write.

        :param resolve: resolution on write (None: the store's choice; see
            :meth:`create_record`): a repeat returns the fact already known, reinforced; a new
            value of a single-valued predicate supersedes the old one.
        """
        record: MemoryRecord = self.handle(
            messages.IngestObservation(
                subject=subject,
                predicate=predicate,
                object=obj,
                resolve=resolve,
                **self._ingest_fields(sensitivity, source, tags, scope, timestamp),
            )
        )
        return record

    def ingest_outcome(
        self,
        target_record_id: str,
        outcome_status: str,
        *,
        source: str = "python-client",
        timestamp: RequestTime = None,
    ) -> MemoryRecord:
        """Record an episode's outcome (``success``, ``failure``, ``partial``) on its episodic
        record; returns the record as updated."""
        record: MemoryRecord = self.handle(
            messages.IngestOutcome(
                target_record_id=target_record_id,
                outcome_status=outcome_status,
                source=source,
                timestamp=timestamp,
            )
        )
        return record

    def ingest_working_state(
        self,
        thread_id: str,
        state: str,
        *,
        next_actions: Sequence[str] | None = None,
        open_questions: Sequence[str] | None = None,
        context_summary: str = "",
        active_constraints: Sequence[Any] | None = None,
        sensitivity: str | None = None,
        source: str = "python-client",
        tags: Sequence[str] | None = None,
        scope: str = "",
        timestamp: RequestTime = None,
    ) -> MemoryRecord:
        """A thread's working state as a working record (confidence 1.0, half-life 7 days)."""
        record: MemoryRecord = self.handle(
            messages.IngestWorkingState(
                thread_id=thread_id,
                state=state,
                next_actions=as_list("next_actions", next_actions),
                open_questions=as_list("open_questions", open_questions),
                context_summary=context_summary,
                active_constraints=as_list("active_constraints", active_constraints),
                **self._ingest_fields(sensitivity, source, tags, scope, timestamp),
            )
        )
        return record

    def _ingest_fields(
        self,
        sensitivity: str | None,
        source: str,
        tags: Sequence[str] | None,
        scope: str,
        timestamp: RequestTime,
    ) -> dict[str, Any]:
        return {
            "sensitivity": sensitivity or self._default_sensitivity,
            "source": source,
            "tags": as_list("tags", tags),
            "scope": scope,
            "timestamp": timestamp,
        }

"""Capture steps 1 and 7 (spec §2.4, §8.4): the request validated, and the primary record
drafted by ``source_kind``."""

from __future__ import annotations

from typing import Any

from membrane_es.aggregates.identity import new_record_id
from membrane_es.commands.builders import (
    EVENT,
    TOOL_OUTPUT,
    WORKING_STATE,
    event_record,
    tool_output_record,
    working_record,
)
from membrane_es.commands.capture.common import (
    _first_non_blank,
    _string_field,
    _timestamp,
    _unique_ignoring_case,
    replace,
    text_of,
)
from membrane_es.commands.inputs import (
    check_tag_list,
    check_timestamp,
    json_value,
    plain_text,
)
from membrane_es.commands.messages import CaptureMemory
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.embedding.record_text import content_text
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import (
    MemoryType,
    Sensitivity,
    SourceKind,
    TaskState,
)
from membrane_es.schema.payloads import (
    Constraint,
)
from membrane_es.schema.records import DecayProfile, MemoryRecord
from membrane_es.schema.validation import check_decay, check_flag, check_sensitivity, converted

CAPTURE_SENSITIVITY = Sensitivity.LOW.value  # capture's own default (spec Appendix A.4)

_MEMORY_TYPES = ", ".join(t.value for t in MemoryType)
_TASK_STATES = frozenset(s.value for s in TaskState)


# --- step 1: validation (spec §8.4, in its order) --------------------------------------------


def _validated(cmd: CaptureMemory, uow: UnitOfWork) -> CaptureMemory:
    """The request with every field checked and normalised: plain strings, JSON content,
    the sensitivity resolved and the timestamp a UTC datetime."""
    source = plain_text("source", cmd.source)
    source_kind = plain_text("source_kind", cmd.source_kind)
    reason = plain_text("reason_to_remember", cmd.reason_to_remember)
    summary = plain_text("summary", cmd.summary)
    scope = plain_text("scope", cmd.scope)
    tags = check_tag_list("tags", cmd.tags)
    sensitivity = check_sensitivity("sensitivity", cmd.sensitivity)
    proposed_type = plain_text("proposed_type", cmd.proposed_type or "")
    if proposed_type and proposed_type not in MemoryType.__members__.values():
        raise ValidationError("proposed_type", f"proposed_type must be one of: {_MEMORY_TYPES}")
    content = json_value("content", cmd.content)
    if _blank(content) and not summary.strip() and not reason.strip():
        raise ValidationError(
            "content", "nothing to remember: the content is empty (and no summary is given)"
        )
    context = json_value("context", cmd.context)
    timestamp = check_timestamp(cmd.timestamp)
    decay = _decay_profile(cmd.decay)
    pinned = check_flag("pinned", cmd.pinned)
    return replace(
        cmd,
        source=source,
        source_kind=source_kind,
        reason_to_remember=reason,
        summary=summary,
        scope=scope,
        tags=tags,
        sensitivity=sensitivity or CAPTURE_SENSITIVITY,
        proposed_type=proposed_type,
        content=content,
        context=context,
        timestamp=uow.now() if timestamp is None else timestamp,
        decay=decay,
        pinned=pinned,
    )


def _blank(content: Any) -> bool:
    """Content that holds nothing at all: none, blank text, an empty list or object (the
    reference's check, made in its order)."""
    if isinstance(content, str):
        return not content.strip()
    return content is None or content == [] or content == {}


def _decay_profile(value: Any) -> DecayProfile | None:
    """The primary record's decay profile as given (a :class:`DecayProfile` or a dict of its
    fields), checked; None for the engine's default for its type."""
    if value is None:
        return None
    profile: DecayProfile = converted("decay", value, DecayProfile, from_attributes=True)
    check_decay("decay", profile)
    return profile


# --- step 7: the primary record ------------------------------------------------------------


def _primary_draft(request: CaptureMemory) -> tuple[MemoryRecord, str]:
    """The primary record (without interpretation or relations) and its candidate kind.

    Times are stamped when it is created; policy errors (empty source, no thread id for
    working state, no tool name for a tool output) are raised here.
    """
    content, ts = request.content, _timestamp(request)
    fields = content if isinstance(content, dict) else {}
    common: dict[str, Any] = {
        "source": request.source,
        "timestamp": ts,
        "at": ts,
        "tags": request.tags,
        "scope": request.scope,
        "sensitivity": request.sensitivity,
    }
    capture_context = {
        "capture_content": content,
        "capture_context": request.context,
        "reason_to_remember": request.reason_to_remember,
    }
    if request.source_kind == SourceKind.WORKING_STATE:
        state = fields.get("state")
        record = working_record(
            thread_id=_first_non_blank(
                text_of(fields.get("thread_id")), text_of(fields.get("thread"))
            ),
            state=state if isinstance(state, str) and state in _TASK_STATES else "executing",
            next_actions=string_list(fields.get("next_actions")),
            open_questions=string_list(fields.get("open_questions")),
            context_summary=_first_non_blank(
                request.summary,
                request.reason_to_remember,
                _string_field(fields, "context_summary"),
                _string_field(fields, "summary"),
            ),
            active_constraints=constraint_list(fields.get("active_constraints")),
            **common,
        )
        return record, WORKING_STATE
    if request.source_kind == SourceKind.TOOL_OUTPUT:
        args = fields.get("args")
        record = tool_output_record(
            tool_name=_first_non_blank(
                text_of(fields.get("tool_name")), text_of(fields.get("tool"))
            ),
            args=args if isinstance(args, dict) else {},
            result=fields.get("result"),
            depends_on=string_list(fields.get("depends_on")),
            environment_context=capture_context,
            **common,
        )
        return record, TOOL_OUTPUT
    record = event_record(
        event_kind=request.source_kind or EVENT,
        ref=_first_non_blank(text_of(fields.get("ref")), text_of(fields.get("id")))
        or new_record_id(),
        summary=_first_non_blank(
            request.summary, request.reason_to_remember, content_text(content)
        ),
        environment_context=capture_context,
        **common,
    )
    return record, EVENT


def string_list(value: Any) -> list[str]:
    """A list's items as strings (numbers too), trimmed, blanks dropped, unique ignoring case."""
    items = value if isinstance(value, list) else []
    texts = [text_of(item).strip() for item in items]
    return _unique_ignoring_case(text for text in texts if text)


def constraint_list(value: Any) -> list[Constraint]:
    """A list of objects as typed constraints; ``required`` only for a real ``true``."""
    if not isinstance(value, list):
        return []
    return [
        Constraint(
            type=text_of(item.get("type")),
            key=text_of(item.get("key")),
            value=item.get("value"),
            required=item.get("required") is True,
        )
        for item in value
        if isinstance(item, dict)
    ]

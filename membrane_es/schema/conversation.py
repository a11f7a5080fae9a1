"""Conversation turns: how a captured record says who spoke and which turns it answered.

A capture whose content is an object with a ``speaker`` (a non-blank string) is a turn of a
conversation. Capture notes, in the episodic record's ``environment.context`` under
:data:`SAID_AFTER`, the ids of the turns it was said after (what each other participant last
said before it in the sitting, and its speaker's own turn before that when it was answered:
:mod:`membrane_es.commands.capture.conversation`). Only ids are
kept, never words: the text index searches a turn together with the text of those turns
(:mod:`membrane_es.projections.said_after`), so forgetting an earlier turn takes its words out
of every later turn's search as well.
"""

from __future__ import annotations

from typing import Any

from membrane_es.schema.payloads import EpisodicPayload, Payload
from membrane_es.schema.records import MemoryRecord

SAID_AFTER = "said_after"
"""The key of an episodic record's ``environment.context`` that lists, oldest first, the ids
of the conversation turns the record's turn was said after."""


def speaker_of(content: Any) -> str:
    """The speaker of captured content that is a conversation turn; "" for anything else."""
    if isinstance(content, dict):
        speaker = content.get("speaker")
        if isinstance(speaker, str):
            return speaker.strip()
    return ""


def speaker_of_record(record: MemoryRecord) -> str:
    """Who said a captured conversation turn ("" for any other record)."""
    payload = record.payload
    if not isinstance(payload, EpisodicPayload) or payload.environment is None:
        return ""
    return speaker_of(payload.environment.context.get("capture_content"))


def said_after(record: MemoryRecord | Payload | None) -> list[str]:
    """The ids of the turns a captured conversation turn was said after (see
    :data:`SAID_AFTER`); empty for any other record."""
    payload = record.payload if isinstance(record, MemoryRecord) else record
    if not isinstance(payload, EpisodicPayload) or payload.environment is None:
        return []
    ids = payload.environment.context.get(SAID_AFTER)
    if not isinstance(ids, list):
        return []
    return [item for item in ids if isinstance(item, str) and item]

"""A conversation: the sitting a captured turn belongs to, its turns in order.

Capture notes with each conversation turn the turns it was said after, within a *sitting*:
turns captured into the same scope from the same source, each at most half an hour after the
one before (:mod:`membrane_es.schema.conversation`). This view finds that sitting around a
turn: the turns of its scope and source near its event time, as the reader's trust and
moment show them, cut where half an hour passes without a turn. Each turn shows who spoke
and links to the turns it was said after. A turn above the reader's trust is not in it (its
speaker and source are not the reader's to see).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from membrane_es.engine import Membrane, allows
from membrane_es.errors import ValidationError
from membrane_es.http_api.ui.context import Reading
from membrane_es.http_api.ui.reads import label, shown
from membrane_es.schema.conversation import said_after, speaker_of_record
from membrane_es.schema.payloads import EpisodicPayload
from membrane_es.schema.records import MemoryRecord

# As capture bounds a sitting: half an hour without a turn ends it.
SITTING = timedelta(minutes=30)
# How far either side of the turn to look: a sitting longer than this is shown in part.
REACH = timedelta(hours=12)
MOST_TURNS = 2_000


@dataclass(frozen=True, slots=True)
class Turn:
    record: MemoryRecord
    speaker: str
    text: str
    said_after: list[str]  # ids of the turns it was said after, oldest first


@dataclass(frozen=True, slots=True)
class Conversation:
    anchor: str
    scope: str
    source: str
    turns: list[Turn]
    clipped: bool  # the sitting reaches beyond what is shown

    @property
    def ids(self) -> set[str]:
        return {turn.record.id for turn in self.turns}

    @property
    def speakers(self) -> list[str]:
        return list(dict.fromkeys(turn.speaker for turn in self.turns))


_NEVER = datetime.min.replace(tzinfo=UTC)


def _when(record: MemoryRecord) -> datetime:
    """A turn's event time (a record always has one once stored)."""
    return record.created_at or _NEVER


def said(record: MemoryRecord) -> str:
    """What a turn said: its captured content's text when it has one (``text``, ``content``
    or ``message``), else the record's one-line label."""
    payload = record.payload
    if isinstance(payload, EpisodicPayload) and payload.environment is not None:
        content = payload.environment.context.get("capture_content")
        if isinstance(content, dict):
            for key in ("text", "content", "message"):
                value = content.get(key)
                if isinstance(value, str) and value.strip():
                    return value
    return label(record)


def _source(record: MemoryRecord) -> str:
    sources = record.provenance.sources
    return sources[0].created_by if sources else ""


def conversation(memory: Membrane, reading: Reading, record_id: str) -> Conversation:
    """The sitting of the turn ``record_id`` as the reader sees it at its moment."""
    anchor = shown(memory, reading, record_id)
    if not allows(reading.trust, anchor) or not speaker_of_record(anchor):
        raise ValidationError(
            "record", f"{record_id} is not a conversation turn (captured content with a speaker)"
        )
    around = memory.retrieve(
        "",
        trust=reading.trust,
        memory_types=["episodic"],
        limit=MOST_TURNS + 1,
        as_of=reading.as_of,
        created_after=_when(anchor) - REACH,
        created_before=_when(anchor) + REACH,
    )
    clipped = len(around.records) > MOST_TURNS
    # turns of the sitting's scope and source, in event time (captured order for ties)
    order = {
        rid: place
        for place, rid in enumerate(
            memory.record_ids(trust=reading.trust, memory_types=["episodic"], as_of=reading.as_of)
        )
    }
    candidates = sorted(
        (
            record
            for record in around.records[:MOST_TURNS]
            if allows(reading.trust, record)
            and record.payload is not None
            and speaker_of_record(record)
            and record.scope == anchor.scope
            and _source(record) == _source(anchor)
        ),
        key=lambda record: (_when(record), order.get(record.id, 0)),
    )
    if all(record.id != anchor.id for record in candidates):  # ranked out of the window read
        candidates.append(anchor)
        candidates.sort(key=lambda record: (_when(record), order.get(record.id, 0)))
    at = next(i for i, record in enumerate(candidates) if record.id == anchor.id)
    first = at
    while first > 0 and _when(candidates[first]) - _when(candidates[first - 1]) <= SITTING:
        first -= 1
    last = at
    while (
        last + 1 < len(candidates)
        and _when(candidates[last + 1]) - _when(candidates[last]) <= SITTING
    ):
        last += 1
    turns = [
        Turn(record, speaker_of_record(record), said(record), said_after(record))
        for record in candidates[first : last + 1]
    ]
    return Conversation(anchor.id, anchor.scope, _source(anchor), turns, clipped)

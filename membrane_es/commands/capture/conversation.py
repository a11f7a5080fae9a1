"""Step 7, for a conversation turn: which turns it was said after.

A reply rarely repeats what it answers ("yes, last week — it was so powerful!"), so the turn
alone is a poor document to find it by; the words of the exchange it belongs to are what a
later question uses. Capture notes with each turn (content with a ``speaker``: see
:mod:`membrane_es.schema.conversation`) *which turn every other participant last said before
it in the same sitting*: for each speaker, their latest earlier turn captured into the same
scope from the same source, with an event time at most :data:`SITTING_SECONDS` before this
one's — and the speaker's own latest turn when it was answered (below). In a two-party
conversation: the turn this one answers and the speaker's own turn before that. Their ids,
oldest first, go into the primary record's ``environment.context`` under
:data:`~membrane_es.schema.conversation.SAID_AFTER`; the text index searches the turn with their
text (never its vector: the vector reads what the turn itself says).

A speaker's own earlier turn counts only when someone answered it before this turn: then
this one goes on with the exchange ("How was it?" — "So powerful!" goes on with "I went to
the support group"). A speaker's turns one after another with no one answering in between
are separate messages — an agent noting one thing after another, a user sending a question
about ramen and then one about the budget — and none borrows the words of the one before:
they would make it match words it does not relate to.

Only turns no more sensitive than the new one are noted: their words must not let a reader
who may see this turn find it by words of one they may not see.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from membrane_es.commands.capture.common import _timestamp, replace
from membrane_es.commands.messages import CaptureMemory
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.schema.conversation import SAID_AFTER, speaker_of
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.payloads import EpisodicPayload
from membrane_es.schema.records import MemoryRecord

# A sitting ends after half an hour without a turn: the customary inactivity timeout that
# ends a session (web analytics' 30 minutes). Turns further apart belong to different
# conversations, whose words say nothing about this one.
SITTING_SECONDS = 30 * 60


def with_conversation(
    primary: MemoryRecord, request: CaptureMemory, uow: UnitOfWork
) -> MemoryRecord:
    """The primary record of a conversation turn with the turns it was said after noted in
    its environment context (see above); any other primary record as it is."""
    payload = primary.payload
    if not speaker_of(request.content) or not isinstance(payload, EpisodicPayload):
        return primary
    if payload.environment is None:
        return primary
    earlier = preceding_turns(request, uow)
    if not earlier:
        return primary
    context = {**payload.environment.context, SAID_AFTER: earlier}
    environment = replace(payload.environment, context=context)
    return replace(primary, payload=replace(payload, environment=environment))


def preceding_turns(request: CaptureMemory, uow: UnitOfWork) -> list[str]:
    """The id of each other participant's latest turn before this capture's, in the sitting,
    and of the speaker's own latest one if it was answered since; oldest first."""
    happened = _timestamp(request)
    level = Sensitivity(request.sensitivity).level
    # speaker (casefolded) -> (place in the sitting, their latest earlier turn)
    latest: dict[str, tuple[int, MemoryRecord]] = {}
    sitting_length = timedelta(seconds=SITTING_SECONDS)
    # (a turn in the calendar's first half hour: its sitting starts with the calendar)
    earliest = datetime.min.replace(tzinfo=happened.tzinfo)
    since = happened - sitting_length if happened - earliest > sitting_length else earliest
    # Oldest first, turns of equal event time in the order captured: a session stamped with
    # one time still says who answered whom.
    sitting = uow.episodes_between(request.scope, since, happened)
    for place, record in enumerate(sitting):
        speaker = speaker_of(_captured_content(record))
        if speaker and _source(record) == request.source and record.sensitivity.level <= level:
            latest[speaker.casefold()] = (place, record)
    # The speaker's own latest turn, only when another participant spoke after it.
    own = latest.pop(speaker_of(request.content).casefold(), None)
    earlier = list(latest.values())
    if own is not None and any(place > own[0] for place, _ in earlier):
        earlier.append(own)
    return [record.id for _, record in sorted(earlier, key=lambda item: item[0])]


def _captured_content(record: MemoryRecord) -> object:
    """What a capture was given, as its episodic record keeps it (None for anything else)."""
    payload = record.payload
    if not isinstance(payload, EpisodicPayload) or payload.environment is None:
        return None
    return payload.environment.context.get("capture_content")


def _source(record: MemoryRecord) -> str:
    """Who a captured record came from (its first provenance source's ``created_by``)."""
    sources = record.provenance.sources
    return sources[0].created_by if sources else ""

"""A save hands the recorder one typed value: a stamp of another type is refused, naming it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest
from eventsourcing.persistence import StoredEvent

from membrane_es import Membrane, MembraneError
from membrane_es.stores.event_times import EventTimeBehind
from membrane_es.stores.log_stamp import LOG_STAMP, UNSTAMPED, LogStamp, stamp_of


def test_no_stamp_is_the_empty_stamp() -> None:
    assert stamp_of({}) is UNSTAMPED
    assert stamp_of({"tracking": None}) == LogStamp()


def test_a_stamp_of_another_type_is_refused(tmp_path: Path) -> None:
    moment = datetime(2030, 1, 1, tzinfo=UTC)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        recorder = memory.application.recorder
        event = StoredEvent(uuid4(), 1, "timed", b"state")
        with pytest.raises(MembraneError, match="log_stamp must be a LogStamp, not tuple"):
            recorder.insert_events([event], **{LOG_STAMP: (moment, moment)})
        assert recorder.max_notification_id() is None  # nothing written


def test_the_stamp_reaches_the_recorder(tmp_path: Path) -> None:
    """The log's newest time, recorded from a save's stamp, refuses an earlier write."""
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        memory.create_record(
            {
                "type": "semantic",
                "scope": "project:a",
                "payload": {"kind": "semantic", "subject": "s", "predicate": "is", "object": "o"},
                "provenance": {"sources": [{"kind": "observation", "ref": "o"}]},
            }
        )
        newest = memory.application.last_event_time()
        assert newest is not None
        late = StoredEvent(uuid4(), 1, "timed", b"state")
        with pytest.raises(EventTimeBehind):
            memory.application.recorder.insert_events(
                [late], **{LOG_STAMP: LogStamp(event_times=(newest, newest))}
            )

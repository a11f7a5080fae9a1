"""The msgspec codec: every event and the typed snapshot survive the round trip to bytes,
with and without compression and encryption, and old event versions still load."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import msgspec
import pytest
from eventsourcing.cipher import AESCipher
from eventsourcing.compressor import ZlibCompressor
from eventsourcing.domain import Aggregate, DomainEvent
from eventsourcing.persistence import MapperDeserialisationError, StoredEvent
from eventsourcing.utils import Environment, get_topic, register_topic, resolve_topic

from membrane_es.aggregates import RecordAggregate
from membrane_es.schema import (
    MemoryRecord,
    MemoryType,
    ProvenanceRef,
    ProvenanceSource,
    Relation,
    SemanticPayload,
    Sensitivity,
)
from membrane_es.stores.codec import MsgpackTranscoder, MsgspecMapper
from tests.unit.conftest import START

TICK = timedelta(seconds=1)


def plain() -> MsgspecMapper:
    return MsgspecMapper()


def compressed() -> MsgspecMapper:
    return MsgspecMapper(compressor=ZlibCompressor())


def encrypted() -> MsgspecMapper:
    return MsgspecMapper(cipher=_cipher())


def compressed_and_encrypted() -> MsgspecMapper:
    return MsgspecMapper(compressor=ZlibCompressor(), cipher=_cipher())


def _cipher() -> AESCipher:
    return AESCipher(Environment(env={AESCipher.CIPHER_KEY: AESCipher.create_key(16)}))


MAPPERS: dict[str, Callable[[], MsgspecMapper]] = {
    "plain": plain,
    "zlib": compressed,
    "aes": encrypted,
    "zlib+aes": compressed_and_encrypted,
}


@pytest.fixture(params=sorted(MAPPERS))
def mapper(request: pytest.FixtureRequest) -> MsgspecMapper:
    return MAPPERS[request.param]()


def a_record(record_id: str = "fact-1") -> MemoryRecord:
    return MemoryRecord(
        id=record_id,
        type=MemoryType.SEMANTIC,
        sensitivity=Sensitivity.MEDIUM,
        salience=0.8,
        scope="project:alpha",
        tags=["infra", "ports"],
        created_at=START,
        updated_at=START,
        payload=SemanticPayload(
            subject="api",
            predicate="listens_on",
            object={"port": 8080, "tls": True, "hosts": ["a", "b"]},
            evidence=[ProvenanceRef(source_type="observation", source_id="obs-1", timestamp=START)],
        ),
    )


def aggregate_with_every_event() -> RecordAggregate:
    """A record that went through every kind of change (events still pending)."""
    record = RecordAggregate.create(
        a_record(), actor="system", rationale="Initial creation", at=START
    )
    at = START
    steps: list[Callable[[datetime], None]] = [
        lambda t: record.add_relation(
            Relation(predicate="supports", target_id="fact-0", weight=0.5, created_at=t),
            actor="agent",
            rationale="linked",
            at=t,
        ),
        lambda t: record.reinforce(actor="agent", rationale="helped", at=t),
        lambda t: record.corroborate(
            ProvenanceSource(ref="chat-2", created_by="agent", timestamp=t),
            actor="agent",
            rationale="restated",
            at=t,
        ),
        lambda t: record.penalize(0.25, actor="agent", rationale="misled", at=t),
        lambda t: record.pin(actor="agent", rationale="keep", at=t),
        lambda t: record.unpin(actor="agent", rationale="let go", at=t),
        lambda t: record.contest("fact-0", actor="auditor", rationale="conflict", at=t),
        lambda t: record.fork("fact-2", actor="agent", rationale="dev", at=t),
        lambda t: record.record_outcome("success", actor="runner", rationale="", at=t),
        lambda t: record.supersede("fact-3", actor="agent", rationale="moved", at=t),
        # a second replacement is refused by the command method; the event still decodes
        lambda t: record.trigger_event(
            record.MergedInto, timestamp=t, into_id="fact-4", actor="agent", rationale="dedupe"
        ),
        lambda t: record.retract(actor="agent", rationale="wrong", at=t),
        lambda t: record.forget(actor="dpo", rationale="erasure request", at=t),
    ]
    for step in steps:
        at += TICK
        step(at)
    return record


def event_classes() -> list[type[DomainEvent]]:
    """Every concrete event class the aggregate declares."""
    return sorted(
        (
            value
            for value in vars(RecordAggregate).values()
            if isinstance(value, type)
            and issubclass(value, DomainEvent)
            and value is not RecordAggregate.Event
        ),
        key=lambda cls: cls.__name__,
    )


EVENTS = {type(e).__name__: e for e in aggregate_with_every_event().collect_events()}


def test_the_sample_history_has_an_event_of_every_class() -> None:
    assert sorted(EVENTS) == [cls.__name__ for cls in event_classes()]


# --- events -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_event_round_trips(mapper: MsgspecMapper, name: str) -> None:
    event = EVENTS[name]

    stored = mapper.to_stored_event(event)
    loaded = mapper.to_domain_event(stored)

    assert type(loaded) is type(event)
    assert loaded == event


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_event_keeps_its_topic_and_position(name: str) -> None:
    event = EVENTS[name]

    stored = plain().to_stored_event(event)

    assert stored.topic == get_topic(type(event))
    assert (stored.originator_id, stored.originator_version) == (
        event.originator_id,
        event.originator_version,
    )


def test_created_event_restores_typed_structs() -> None:
    loaded: Any = plain().to_domain_event(plain().to_stored_event(EVENTS["Created"]))

    assert isinstance(loaded.originator_id, UUID)
    assert isinstance(loaded.timestamp, datetime) and loaded.timestamp.tzinfo is not None
    assert isinstance(loaded.record, MemoryRecord)
    assert isinstance(loaded.record.payload, SemanticPayload)
    assert isinstance(loaded.record.payload.evidence[0], ProvenanceRef)
    assert loaded.record.sensitivity is Sensitivity.MEDIUM


def test_loaded_events_rebuild_the_same_record() -> None:
    original = aggregate_with_every_event()
    events = [
        plain().to_domain_event(plain().to_stored_event(e)) for e in original.collect_events()
    ]

    rebuilt: Any = None
    for event in events:
        rebuilt = event.mutate(rebuilt)

    moment = START + timedelta(days=1)
    assert rebuilt.view(moment) == original.view(moment)


def test_encryption_hides_the_content() -> None:
    stored = encrypted().to_stored_event(EVENTS["Created"])

    assert b"listens_on" not in stored.state
    assert b"listens_on" in plain().to_stored_event(EVENTS["Created"]).state


def test_compression_shrinks_a_repetitive_payload() -> None:
    record = msgspec.structs.replace(a_record(), payload=SemanticPayload(object="abc" * 10_000))
    event = RecordAggregate.create(record, actor="a", rationale="r", at=START).collect_events()[0]

    assert (
        len(compressed().to_stored_event(event).state)
        < len(plain().to_stored_event(event).state) // 10
    )


def test_reading_with_the_wrong_key_fails_loudly() -> None:
    stored = encrypted().to_stored_event(EVENTS["Reinforced"])

    with pytest.raises(MapperDeserialisationError, match="Reinforced"):
        encrypted().to_domain_event(stored)


def test_corrupt_state_fails_loudly() -> None:
    stored = plain().to_stored_event(EVENTS["Penalized"])
    broken = dataclasses.replace(stored, state=stored.state[:-3])

    with pytest.raises(MapperDeserialisationError):
        plain().to_domain_event(broken)


# --- schema evolution -------------------------------------------------------------------------


class _NotedV1(Aggregate.Event):
    """How the event class looked when the first events were written."""

    note: str


class Noted(Aggregate.Event):
    """The same event today: a field added, with an upcast for events written before."""

    class_version = 2

    note: str
    tags: list[str]

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["tags"] = ["untagged"]


class Remarked(Aggregate.Event):
    """``Noted`` under the name it had long ago; its old topic must still resolve."""

    note: str


register_topic("tests.unit.test_codec:OldRemark", Remarked)


def stored_as(event: DomainEvent, topic: str) -> StoredEvent:
    return dataclasses.replace(plain().to_stored_event(event), topic=topic)


def test_event_of_an_older_class_version_loads_upcast() -> None:
    old = _NotedV1(originator_id=uuid4(), originator_version=3, timestamp=START, note="hello")

    loaded = plain().to_domain_event(stored_as(old, get_topic(Noted)))

    assert isinstance(loaded, Noted)
    assert (loaded.note, loaded.tags) == ("hello", ["untagged"])
    assert (loaded.originator_id, loaded.originator_version) == (old.originator_id, 3)
    assert loaded.timestamp == START


def test_event_of_the_current_class_version_round_trips(mapper: MsgspecMapper) -> None:
    event = Noted(
        originator_id=uuid4(), originator_version=1, timestamp=START, note="hi", tags=["x"]
    )

    loaded = mapper.to_domain_event(mapper.to_stored_event(event))

    assert loaded == event


def test_current_class_version_is_written_with_the_state() -> None:
    event = Noted(originator_id=uuid4(), originator_version=1, timestamp=START, note="", tags=[])

    state = MsgpackTranscoder().decode(plain().to_stored_event(event).state)

    assert state["class_version"] == 2


def test_renamed_event_class_loads_from_its_old_topic() -> None:
    event = Remarked(originator_id=uuid4(), originator_version=1, timestamp=START, note="n")

    loaded = plain().to_domain_event(stored_as(event, "tests.unit.test_codec:OldRemark"))

    assert loaded == event


# --- the transcoder ---------------------------------------------------------------------------


def test_transcoder_round_trips_builtin_values() -> None:
    value = {"list": [1, 2.5, None, True, "text", b"\x00\xff"], "nested": {"k": [{}]}}
    transcoder = MsgpackTranscoder()

    assert transcoder.decode(transcoder.encode(value)) == value


def test_transcoder_keeps_aware_datetimes() -> None:
    moment = datetime(2025, 6, 1, 12, 30, 15, 123456, tzinfo=UTC)
    transcoder = MsgpackTranscoder()

    assert transcoder.decode(transcoder.encode({"at": moment})) == {"at": moment}


def test_transcoder_encodes_structs_as_plain_maps() -> None:
    relation = Relation(predicate="supports", target_id="fact-0", weight=0.5)
    transcoder = MsgpackTranscoder()

    decoded = transcoder.decode(transcoder.encode(relation))

    assert decoded == {"predicate": "supports", "target_id": "fact-0", "weight": 0.5}


def test_transcoder_writes_uuids_as_strings() -> None:
    key = uuid4()
    transcoder = MsgpackTranscoder()

    assert transcoder.decode(transcoder.encode([key])) == [str(key)]


# --- topics -----------------------------------------------------------------------------------


def test_stored_topics_keep_the_names_logs_were_written_with() -> None:
    """Every log and export names the aggregate and its events as first written; renaming a
    class must not change them (explicit topics)."""
    first = "membrane_es.aggregates.memory_record:MemoryRecord"
    assert get_topic(RecordAggregate) == first
    for cls in event_classes():
        assert get_topic(cls) == f"{first}.{cls.__name__}"
        assert resolve_topic(f"{first}.{cls.__name__}") is cls

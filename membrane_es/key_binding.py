"""Which key store a log belongs to, and which of its records' keys are gone.

Every record's content is sealed under a key kept apart from the log (see
:mod:`membrane_es.stores.key_store`). Lost, that key store would make every record read blank — the
look of a store whose records were all forgotten, but nothing was forgotten. So a log records
the identity of its key store when it is first opened with one, and every later open checks
it: a key store that is missing or belongs to another store is refused
(:class:`~membrane_es.errors.KeyStoreError`), naming the file to restore.

A log written before it recorded its key store is bound on the first open whose key store
holds its keys (a sealed record's content unseals); one whose keys are all absent, with
records not forgotten, is refused the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec
from eventsourcing.utils import get_topic

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.errors import KeyStoreError
from membrane_es.stores.key_store import foreign_key_store

CREATED_TOPIC = get_topic(RecordAggregate.Created)
FORGOTTEN_TOPIC = get_topic(RecordAggregate.Forgotten)
PAGE = 1000  # notifications read at a time


@dataclass(frozen=True)
class KeyCensus:
    """What the key store holds of a log's sealed records."""

    sealed: int  # records whose content is sealed under a key of their own
    forgotten: int  # of those, erased by forget (their keys destroyed on purpose)
    unsealable: int  # of those, not forgotten, whose keys the key store does not hold


def bind_key_store(app: Any, record: bool = True) -> None:
    """Check that ``app``'s key store is its log's, and (``record``) record it in a log that
    names none yet (a new log, or one written before logs named their key store).

    Raises :class:`~membrane_es.errors.KeyStoreError` when the log is bound to another key
    store, or none of its records' keys is in this one. Logs whose recorder keeps no binding
    (in memory, PostgreSQL, whose keys are a table beside the log) are left alone.
    """
    binder, keys = app.abilities.key_binder, app.keys
    if binder is None or keys.identity is None:
        return
    bound = binder.key_store_identity()
    if bound == keys.identity:
        return
    where = str(keys.path)
    if bound is not None:
        raise foreign_key_store(where)
    if app.recorder.max_notification_id() and not _some_key_found(app):
        raise KeyStoreError(
            where,
            f"{where} holds none of this log's keys: it is not the key store the records "
            "were sealed with. Restore the key store backed up with this log",
        )
    if record:
        binder.bind_key_store(keys.identity)


def key_census(app: Any) -> KeyCensus:
    """Count the log's sealed records, those forgotten, and those whose keys are missing
    although they were never forgotten (a lost or partial key store)."""
    missing: set[Any] = set()
    forgotten: set[Any] = set()
    sealed = 0
    for event in _created_and_forgotten(app):
        if event.forgotten:
            forgotten.add(event.originator_id)
        elif event.sealed:
            sealed += 1
            if app.keys.get(event.key_id) is None:
                missing.add(event.originator_id)
    return KeyCensus(sealed, len(forgotten), len(missing - forgotten))


def _some_key_found(app: Any) -> bool:
    """Whether a sealed record's key is in the key store; True as well when the log holds
    no sealed record, or every one was forgotten (nothing the key store could unseal)."""
    missing: set[Any] = set()
    forgotten: set[Any] = set()
    for event in _created_and_forgotten(app):
        if event.forgotten:
            forgotten.add(event.originator_id)
        elif event.sealed:
            if app.keys.get(event.key_id) is not None:
                return True
            missing.add(event.originator_id)
    return not missing - forgotten


class _SealedKey(msgspec.Struct):
    """What a stored ``Created`` event says of its key (every other field is skipped)."""

    key_id: bytes = b""
    sealed: bytes = b""


_decode_key = msgspec.msgpack.Decoder(_SealedKey).decode


@dataclass(frozen=True)
class _Seen:
    """One ``Created`` (its key) or ``Forgotten`` event, as much as the checks need."""

    originator_id: Any
    forgotten: bool
    key_id: bytes = b""
    sealed: bool = False


def _created_and_forgotten(app: Any) -> Iterator[_Seen]:
    """The log's ``Created`` and ``Forgotten`` events in order; a ``Created`` event's key is
    read from its stored bytes without opening its box, when no whole-event cipher or
    compressor wraps them."""
    recorder, mapper = app.recorder, app.mapper
    plain = mapper.cipher is None and mapper.compressor is None
    topics = (CREATED_TOPIC, FORGOTTEN_TOPIC)
    start = 1
    while True:
        page = recorder.select_notifications(start, PAGE, topics=topics)
        if not page:
            return
        for notification in page:
            if notification.topic == FORGOTTEN_TOPIC:
                yield _Seen(notification.originator_id, forgotten=True)
                continue
            stored = (
                _decode_key(notification.state) if plain else mapper.to_domain_event(notification)
            )
            yield _Seen(
                notification.originator_id,
                forgotten=False,
                key_id=stored.key_id,
                sealed=bool(stored.sealed),
            )
        start = page[-1].id + 1

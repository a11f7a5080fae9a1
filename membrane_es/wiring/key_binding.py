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

The other way round, a log that is lost (``data.mdb`` deleted or emptied) must not read as a
new, empty store beside its old key store: a log is bound at its first open, before it can
make a key, so an empty log bound to no key store beside a key store that holds keys is
a log that is gone, and is refused too (:func:`check_log_not_lost`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from eventsourcing.utils import get_topic

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.errors import IntegrityError, KeyStoreError, NotFoundError
from membrane_es.stores.key_store import DoomedKey, foreign_key_store, lost_log

CREATED_TOPIC = get_topic(RecordAggregate.Created)
FORGOTTEN_TOPIC = get_topic(RecordAggregate.Forgotten)
PAGE = 1000  # notifications read at a time


@dataclass(frozen=True)
class KeyCensus:
    """What the key store holds of a log's sealed records."""

    sealed: int  # records whose content is sealed under a key of their own
    forgotten: int  # of those, erased by forget (their keys destroyed on purpose)
    unsealable: int  # of those, not forgotten, whose keys the key store does not hold
    missing: tuple[str, ...] = ()  # the unsealable records' ids, in log order
    held: tuple[str, ...] = ()  # forgotten records whose keys the key store still holds


@dataclass(frozen=True)
class UnfinishedErasures:
    """The erasures a ``forget`` began and did not finish, as the key store's doomed keys
    name them (see :mod:`membrane_es.commands.erasure`)."""

    saved: tuple[DoomedKey, ...] = ()  # forgotten in the log: their keys are left to destroy
    unsaved: tuple[DoomedKey, ...] = ()  # their events never saved: nothing of them erased

    def __bool__(self) -> bool:
        return bool(self.saved or self.unsaved)


def bind_key_store(app: Any, record: bool = True) -> None:
    """Check that ``app``'s key store is its log's, and (``record``) record it in a log that
    names none yet (a new log, or one written before logs named their key store).

    Raises :class:`~membrane_es.errors.KeyStoreError` when the log is bound to another key
    store, none of its records' keys is in this one, or the log is gone (see
    :func:`check_log_not_lost`). Logs whose recorder keeps no binding (in memory,
    PostgreSQL, whose keys are a table beside the log) are left alone.
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
    check_log_not_lost(app)
    if app.recorder.max_notification_id() and not _some_key_found(app):
        raise KeyStoreError(
            where,
            f"{where} holds none of this log's keys: it is not the key store the records "
            "were sealed with. Restore the key store backed up with this log",
        )
    if record:
        binder.bind_key_store(keys.identity)


def check_log_not_lost(app: Any) -> None:
    """Raise :class:`~membrane_es.errors.KeyStoreError` when ``app``'s log holds no event and
    is bound to no key store while its key store holds keys: those keys were made for a log
    (every log is bound at its first open, before it can make one) that is no longer there.
    A new store, and one whose only writes were rolled back (bound, though empty), pass."""
    binder, keys = app.abilities.key_binder, app.keys
    if binder is None or keys.identity is None or binder.key_store_identity() is not None:
        return
    if not app.recorder.max_notification_id() and keys.holds_keys():
        raise lost_log(str(keys.path), app.env.get("LMDB_PATH") or "the store")


def key_census(app: Any) -> KeyCensus:
    """Count the log's sealed records, those forgotten, and those whose keys are missing
    although they were never forgotten (a lost or partial key store, or an erasure an earlier
    release cut short: it destroyed keys before it saved the events); name those, and the
    forgotten records whose keys the key store still holds (an erasure cut short after its
    events were saved, or a key store restored from before it)."""
    missing: dict[Any, str] = {}
    forgotten: dict[Any, None] = {}  # in the order forgotten
    sealed = 0
    for event in _created_and_forgotten(app):
        if event.forgotten:
            forgotten[event.originator_id] = None
        elif event.sealed:
            sealed += 1
            if app.keys.get(event.key_id) is None:
                missing[event.originator_id] = event.record_id
    unsealable = [record_id for key, record_id in missing.items() if key not in forgotten]
    held = []
    for key in forgotten:
        if key in missing:
            continue
        creation = _creation(app, key)
        if creation.sealed and app.keys.holds(creation.key_id):
            held.append(creation.record_id)
    return KeyCensus(sealed, len(forgotten), len(unsealable), tuple(unsealable), tuple(held))


def unfinished_erasures(app: Any) -> UnfinishedErasures:
    """The doomed keys of ``app``'s key store, parted by whether their records are forgotten
    in the log (an erasure cut short after its events were saved, or one under way in
    another process) or not (cut short before: nothing erased)."""
    saved: list[DoomedKey] = []
    unsaved: list[DoomedKey] = []
    for doomed in app.keys.doomed():
        (saved if _forgotten(app, doomed.record_id) else unsaved).append(doomed)
    return UnfinishedErasures(tuple(saved), tuple(unsaved))


def named(record_ids: Sequence[str], most: int = 10) -> str:
    """``record_ids`` for a message: the first ``most``, and how many more."""
    unique = list(dict.fromkeys(record_ids))
    shown = ", ".join(unique[:most])
    return shown if len(unique) <= most else f"{shown} and {len(unique) - most} more"


def _forgotten(app: Any, record_id: str) -> bool:
    """Whether the log holds the record's ``Forgotten`` event (a record it cannot read,
    damaged or unknown, is not taken for forgotten)."""
    try:
        return bool(app.load(record_id).state.forgotten)
    except (NotFoundError, IntegrityError):
        return False


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


class _RecordId(msgspec.Struct):
    """What a stored ``Created`` event says of its record (in the clear): its id."""

    id: str = ""


class _SealedKey(msgspec.Struct):
    """What a stored ``Created`` event says of its key (every other field is skipped)."""

    key_id: bytes = b""
    sealed: bytes = b""
    record: _RecordId = msgspec.field(default_factory=_RecordId)


_decode_key = msgspec.msgpack.Decoder(_SealedKey).decode


@dataclass(frozen=True)
class _Seen:
    """One ``Created`` (its key) or ``Forgotten`` event, as much as the checks need."""

    originator_id: Any
    forgotten: bool
    key_id: bytes = b""
    sealed: bool = False
    record_id: str = ""


def _creation(app: Any, originator_id: Any) -> _Seen:
    """The ``Created`` event of one record, as much as the checks need."""
    (stored,) = app.recorder.select_events(originator_id, limit=1)
    return _seen_created(app.mapper, stored)


def _seen_created(mapper: Any, stored: Any) -> _Seen:
    """A stored ``Created`` event's key and record id, read from its bytes without opening its
    box when no whole-event cipher or compressor wraps them."""
    plain = mapper.cipher is None and mapper.compressor is None
    created = _decode_key(stored.state) if plain else mapper.to_domain_event(stored)
    return _Seen(
        stored.originator_id,
        forgotten=False,
        key_id=created.key_id,
        sealed=bool(created.sealed),
        record_id=created.record.id,
    )


def _created_and_forgotten(app: Any) -> Iterator[_Seen]:
    """The log's ``Created`` and ``Forgotten`` events in order; a ``Created`` event's key is
    read from its stored bytes without opening its box, when no whole-event cipher or
    compressor wraps them."""
    recorder, mapper = app.recorder, app.mapper
    topics = (CREATED_TOPIC, FORGOTTEN_TOPIC)
    start = 1
    while True:
        page = recorder.select_notifications(start, PAGE, topics=topics)
        if not page:
            return
        for notification in page:
            if notification.topic == FORGOTTEN_TOPIC:
                yield _Seen(notification.originator_id, forgotten=True)
            else:
                yield _seen_created(mapper, notification)
        start = page[-1].id + 1

"""The eventsourcing wiring: codec, recorder, repository and record cache behind the engine.

Configuration is explicit: the engine passes an ``env`` mapping; the class-level defaults
select the msgspec codec and the aggregate cache.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.application import (
    AggregateNotFoundError,
    Application,
    Recording,
)

from membrane_es.aggregates.identity import record_key
from membrane_es.aggregates.memory_record import RecordAggregate, redact_state
from membrane_es.aggregates.sealing import ContentSealer, redacted_creation
from membrane_es.errors import MembraneError, NotFoundError
from membrane_es.stores.abilities import Abilities, abilities_of
from membrane_es.stores.codec import MsgspecMapper
from membrane_es.stores.key_store import KeyStore, open_key_store
from membrane_es.stores.log_stamp import LOG_STAMP, LogStamp
from membrane_es.stores.record_numbers import RecordNumberBehind, RecordNumbering
from membrane_es.wiring.key_binding import (
    UnfinishedErasures,
    bind_key_store,
    named,
    unfinished_erasures,
)
from membrane_es.wiring.record_cache import RecordCache

log = logging.getLogger("membrane_es")

APPLICATION_NAME = "memory"
# eventsourcing names the log's table after the application.
EVENTS_TABLE = f"{APPLICATION_NAME}_events"

DEFAULT_ENV: dict[str, str] = {
    "MAPPER_TOPIC": "membrane_es.stores.codec:MsgspecMapper",
    "TRANSCODER_TOPIC": "membrane_es.stores.codec:MsgpackTranscoder",
}

# Recently touched records stay in memory
# (see :class:`~membrane_es.wiring.record_cache.RecordCache`).
CACHE_SIZE = 10_000
# A save whose record numbers another process took first is numbered again and retried at
# once, up to this many times (each refusal means another save got through).
NUMBERING_ATTEMPTS = 64


class MemoryApplication(Application):
    """The event-sourced store of memory records."""

    name = APPLICATION_NAME
    env = DEFAULT_ENV

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        check_keys: bool = True,
        read_only: bool = False,
    ) -> None:
        """With ``check_keys`` False the log's binding to its key store is neither checked
        nor recorded (what ``verify``'s count of keys needs); ``read_only``: checked, but not
        recorded in a log that names no key store yet."""
        super().__init__(env)
        try:
            # What the recorder offers beyond eventsourcing's interface, checked once here:
            # the engine and the read side use this, never the recorder's attributes.
            self.abilities: Abilities = abilities_of(self.recorder)
            if self.snapshots is not None:
                # A snapshot would hold a record's content outside its sealed box, beyond
                # the reach of erasure; replay from the record cache is fast enough.
                raise MembraneError(
                    "snapshotting is not supported: snapshots would keep records' content "
                    "unsealed, beyond the reach of forget()"
                )
            # A PostgreSQL log's key store shares its pool (eventsourcing's datastore hands
            # out a connection for a ``with`` block): no connection of its own to open.
            datastore = getattr(self.factory, "datastore", None)
            connections = getattr(datastore, "get_connection", None)
            # An LMDB log's factory opened its key store already (for the chain's key).
            take: Callable[[], KeyStore | None] | None = getattr(
                self.factory, "take_key_store", None
            )
            taken = take() if take is not None else None
            self.keys: KeyStore = (
                taken if taken is not None else open_key_store(self.env, connections)
            )
        except BaseException:
            self.factory.close()
            raise
        assert isinstance(self.mapper, MsgspecMapper)
        self.mapper.sealer = ContentSealer(self.keys, RecordAggregate.Created)
        self.cache = RecordCache(CACHE_SIZE)
        # Every event up to this log position is reflected in the cache: a load compares it
        # with the log's head (one read) rather than asking the store for newer events of
        # each record it loads.
        self._coherent_through = self.recorder.max_notification_id() or 0
        self._coherence_lock = threading.Lock()
        self.numbering = RecordNumbering()
        if check_keys:
            try:
                bind_key_store(self, record=not read_only)
            except BaseException:
                self.close()
                raise

    def construct_recorder(self) -> Any:
        """eventsourcing's recorder; when it cannot be made (no store where one must be, a
        refused chain key) the factory is closed: a PostgreSQL pool's threads and
        connections would otherwise outlive the failed open."""
        try:
            return super().construct_recorder()
        except BaseException:
            self.factory.close()
            raise

    # --- loading --------------------------------------------------------------------------

    def load(self, record_id: str) -> RecordAggregate:
        """The record's current aggregate (a private copy), or :class:`NotFoundError`."""
        return self._load(record_id, self._keep_cache_coherent())

    def load_many(self, record_ids: Sequence[str]) -> list[RecordAggregate]:
        """:meth:`load` of each record, in order; the log's head is read once for them all
        (a read that returns ten records would otherwise read it ten times)."""
        seen = self._keep_cache_coherent()
        keys = [record_key(record_id) for record_id in record_ids]
        missing = [key for key in dict.fromkeys(keys) if self.cache.get(key) is None]
        loaded = self._load_together(missing, seen) if len(missing) > 1 else {}
        return [
            self._load(record_id, seen) if (found := loaded.get(key)) is None else found.copy()
            for record_id, key in zip(record_ids, keys, strict=True)
        ]

    def _load_together(self, missing: list[UUID], seen: int) -> dict[UUID, RecordAggregate]:
        """Load records the cache lacks in one go: their events read in one transaction
        (where the log can), the keys of their sealed boxes fetched in one lookup; each put
        in the cache too. A record not found is left out (:meth:`_load` raises, naming it)."""
        select_of = getattr(self.recorder, "select_events_of", None)
        if select_of is not None:
            stored = select_of(missing)
        else:
            stored = [self.recorder.select_events(key) for key in missing]
        mapper = self.mapper
        assert isinstance(mapper, MsgspecMapper)  # made so by __init__
        events = mapper.to_domain_events([event for found in stored for event in found])
        at = 0
        loaded: dict[UUID, RecordAggregate] = {}
        for key, found in zip(missing, stored, strict=True):
            if not found:
                continue
            aggregate = _project(None, events[at : at + len(found)])
            at += len(found)
            assert isinstance(aggregate, RecordAggregate)
            loaded[key] = aggregate
        with self._coherence_lock:
            # As in _load: only if no refresh has moved past what these reads saw.
            if seen >= self._coherent_through:
                for aggregate in loaded.values():
                    self.cache.put(aggregate)
        return loaded

    def _load(self, record_id: str, seen: int) -> RecordAggregate:
        """Load through the cache; ``seen``: the log's head, read after the cache was made
        coherent with it (a load from the store reflects at least that)."""
        key = record_key(record_id)
        cached = self.cache.get(key)
        if cached is None:
            try:
                loaded = self.repository.get(key, projector_func=_project)
            except AggregateNotFoundError:
                raise NotFoundError(record_id) from None
            assert isinstance(loaded, RecordAggregate)
            cached = loaded
            with self._coherence_lock:
                # Cache it only if no refresh has moved past what it saw: a refresh meanwhile
                # may already have evicted this record for an event the load did not see.
                if seen >= self._coherent_through:
                    self.cache.put(cached)
        return cached.copy()

    def _keep_cache_coherent(self) -> int:
        """Evict the cached aggregates that events written since the cache was last known
        to be current — by another process sharing the store — have changed. Returns the
        log's head as read."""
        head = self.recorder.max_notification_id() or 0
        if head == self._coherent_through:
            return head
        with self._coherence_lock:
            start = self._coherent_through
            if head <= start:
                return head
            if head - start >= CACHE_SIZE:
                self.cache.clear()
            else:
                for notification in self.recorder.select_notifications(
                    start=start + 1, limit=head - start, stop=head
                ):
                    key = notification.originator_id
                    self.cache.discard(key if isinstance(key, UUID) else UUID(key))
            self._coherent_through = head
        return head

    def _note_recorded(self, recordings: list[Recording[UUID]]) -> None:
        """Advance the cache's coherent position past this process's own events, when
        nothing from elsewhere came between (otherwise the next load reads the gap)."""
        ids = [recording.notification.id for recording in recordings]
        with self._coherence_lock:
            if ids and ids[0] == self._coherent_through + 1 and ids[-1] == ids[0] + len(ids) - 1:
                self._coherent_through = ids[-1]

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """Append the pending events of these aggregates in one atomic write.

        Not the library's ``save``, which would recognise aggregates and events by runtime
        ``Protocol`` checks (they cost more than a durable commit's CPU work), and cannot
        renumber and retry a save another process's records overtook (see
        :mod:`membrane_es.stores.record_numbers`). What it does of the library's is done here
        through public parts (the event store's ``put``, the repository's cache); snapshots
        are refused (see :meth:`__init__`), so there are none to take. ``kwargs`` go to the
        recorder, as the library's do, beside the save's :class:`LogStamp`.
        """
        events: list[Any] = []
        aggregates: dict[UUID, Any] = {}
        for obj in objs:
            events.extend(obj.collect_events())
            aggregates[obj.id] = obj
        # Events carry transaction times and the log must be in time order; one save (a
        # batch) may hold several commands' events for one aggregate, so put them in order.
        # The sort is stable and each aggregate's events are in time order already.
        events.sort(key=_event_time)
        times = (_event_time(events[0]), _event_time(events[-1])) if events else None
        recordings = self._put_numbered(events, times, kwargs)
        repository = self.repository
        if repository.cache is not None and not repository.fastforward:
            for aggregate_id, aggregate in aggregates.items():
                repository.cache.put(aggregate_id, aggregate)
        for aggregate in aggregates.values():
            if isinstance(aggregate, RecordAggregate):
                self.cache.put(aggregate)
        self._note_recorded(recordings)
        return recordings

    def _put_numbered(
        self,
        events: list[Any],
        times: tuple[datetime, datetime] | None,
        kwargs: dict[str, Any],
    ) -> list[Recording[UUID]]:
        """Put the events in the store with their records' numbers; numbered again after the
        log's count and put again if another process created records meanwhile."""
        created = [e for e in events if isinstance(e, RecordAggregate.Created)]
        numbering = self.numbering
        with numbering.lock:
            for _ in range(NUMBERING_ATTEMPTS):
                numbers = numbering.assign(created)
                stamp = LogStamp(event_times=times, record_numbers=numbers)
                try:
                    recordings = self.events.put(
                        events, tracking=None, **kwargs, **{LOG_STAMP: stamp}
                    )
                except RecordNumberBehind as behind:
                    numbering.count = behind.count
                    continue
                numbering.recorded(numbers)
                return recordings
        raise RecordNumberBehind(numbering.count or 0, 0)

    def load_as_of(self, record_id: str, moment: datetime) -> RecordAggregate:
        """The record as it stood at ``moment``: its events up to then, replayed — redacted
        if it has been forgotten since (erasure reaches into the past)."""
        aggregate: RecordAggregate | None = None
        forgotten = False
        event: Any
        for event in self.events.get(record_key(record_id)):
            if isinstance(event, RecordAggregate.Forgotten):
                forgotten = True
            elif event.timestamp <= moment:
                aggregate = event.mutate(aggregate)
        if aggregate is None:
            raise NotFoundError(record_id)
        if forgotten and not aggregate.state.forgotten:
            redact_state(aggregate.state)
        return aggregate

    def load_version(self, key: UUID, version: int) -> RecordAggregate | None:
        """The record's aggregate after its events up to ``version`` (None: it has none),
        read from the store, as a log-order fold met it (a forgotten record's creation
        reads redacted, its key being gone)."""
        if version < 1:
            return None
        aggregate: Any = None
        event: Any
        for event in self.events.get(key, lte=version):
            aggregate = event.mutate(aggregate)
        return aggregate

    def load_at_position(self, record_id: str, position: int) -> tuple[RecordAggregate, datetime]:
        """The record as it stood right after log position ``position`` — its events there or
        before, exactly, however many events share that one's time — and that moment;
        redacted if it has been forgotten since (erasure reaches into the past)."""
        moment, included = self.events_at(position)
        aggregate: RecordAggregate | None = None
        forgotten = False
        event: Any
        key = record_key(record_id)
        for event in self.events.get(key):
            if isinstance(event, RecordAggregate.Forgotten):
                forgotten = True
            if event.timestamp < moment or (
                event.timestamp == moment and (key, event.originator_version) in included
            ):
                aggregate = event.mutate(aggregate)
        if aggregate is None:
            raise NotFoundError(record_id)
        if forgotten and not aggregate.state.forgotten:
            redact_state(aggregate.state)
        return aggregate, moment

    def events_at(self, position: int) -> tuple[datetime, set[tuple[UUID, int]]]:
        """The log time of the last event at or before ``position`` and the events at that
        position or before sharing that time (one write's events may; no two writes' do):
        what a read as of the position includes at its last moment."""
        found = self._notifications_back_from(position)
        if not found:
            raise NotFoundError(f"log position {position}")
        last: Any = self.mapper.to_domain_event(found[-1])
        moment: datetime = last.timestamp
        included: set[tuple[UUID, int]] = set()
        while found:
            for notification in reversed(found):
                event: Any = self.mapper.to_domain_event(notification)
                if event.timestamp != moment:
                    return moment, included
                key = notification.originator_id
                included.add(
                    (key if isinstance(key, UUID) else UUID(key), event.originator_version)
                )
            first = found[0].id
            found = self._notifications_back_from(first - 1) if first > 1 else []
        return moment, included

    def _notifications_back_from(self, position: int) -> list[Any]:
        """A few notifications ending with the last one at or before ``position`` (ids may
        have gaps on PostgreSQL), oldest first; empty when there is none."""
        span = 16
        while position >= 1:
            start = max(1, position - span + 1)
            found = self.recorder.select_notifications(start=start, limit=span, stop=position)
            if found:
                return list(found)
            if start == 1:
                return []
            position, span = start - 1, span * 4
        return []

    def import_unfinished(self) -> bool:
        """Whether an import into this store began and did not end: its log holds only part
        of a file (see :mod:`membrane_es.stores.transfer`). False where the log keeps no mark."""
        marker = self.abilities.import_marker
        return marker is not None and marker.import_unfinished()

    def discard_unfinished_import(self) -> int:
        """Empty a store an import did not finish — the events it wrote, and every key in the
        key store (the store held no event before an import began, so none of them seals
        anything left) — for the import to start over; returns how many events went. A store
        without an unfinished import is left as it is (0)."""
        marker = self.abilities.import_marker
        if marker is None or not marker.import_unfinished():
            return 0
        written = self.recorder.max_notification_id() or 0
        # Keys first: until the log is emptied, its mark stays, so a store interrupted here
        # still refuses to open, and is discarded again.
        self.keys.destroy_all()
        marker.discard_log()
        with self._coherence_lock:
            self.cache.clear()
            self._coherent_through = 0
        return written

    def close(self) -> None:
        try:
            self.keys.close()  # first: it may use the log's connections to clean up
        finally:
            super().close()

    def record_events(self, record_id: str) -> list[Any]:
        """Every event of one record, oldest first (its creation redacted if it has been
        forgotten, whether or not this process still had the key in memory)."""
        events = list(self.events.get(record_key(record_id)))
        if not events:
            raise NotFoundError(record_id)
        if any(isinstance(event, RecordAggregate.Forgotten) for event in events):
            events[0] = redacted_creation(events[0])
        return events

    def exists(self, record_id: str) -> bool:
        has_events = getattr(self.recorder, "has_events", None)  # a key looked up (LMDB)
        if has_events is not None:
            return bool(has_events(record_key(record_id)))
        return bool(self.recorder.select_events(record_key(record_id), limit=1))

    def settle_erasures(self, finish: bool = True) -> UnfinishedErasures:
        """Deal with the erasures a ``forget`` began and did not finish — its process killed,
        its disk full, Ctrl-C — as the key store's doomed keys name them (see
        :mod:`membrane_es.commands.erasure`); returns them as found.

        Where the records are forgotten in the log, their keys are left to destroy: they are
        withheld from this process's reads at once and, with ``finish``, destroyed. Where the
        events were never saved, nothing was erased: the records read as before, and a
        warning names them, to be forgotten again. Opening a store for writing finishes;
        opening it read-only withholds.
        """
        unfinished = unfinished_erasures(self)
        if unfinished.saved:
            key_ids = [doomed.key_id for doomed in unfinished.saved]
            ids = named([doomed.record_id for doomed in unfinished.saved])
            self.keys.withhold(key_ids)
            if finish:
                try:
                    self.keys.destroy(key_ids)
                except Exception as error:  # a full disk, a busy key store, a lost connection
                    # The open goes on: withheld here, the notes stay for the next open (or a
                    # forget) to finish.
                    log.warning("the keys of forgotten records %s not destroyed: %s", ids, error)
                else:
                    log.warning(
                        "a forget cut short after its Forgotten events were saved is finished: "
                        "the keys of %s are destroyed",
                        ids,
                    )
            else:
                log.warning(
                    "the key store still holds the keys of forgotten records %s (a forget was "
                    "cut short): withheld here; opening the store for writing destroys them",
                    ids,
                )
        if unfinished.unsaved:
            log.warning(
                "a forget of %s was cut short before its Forgotten events were saved: nothing "
                "was erased, and it reads as before; run forget again to erase it",
                named([doomed.erasure for doomed in unfinished.unsaved]),
            )
        return unfinished

    def content_key(self, record_id: str) -> bytes | None:
        """The id of the key the record's content is sealed under (from its ``Created``
        event); None if the record was written before per-record keys."""
        stored = self.recorder.select_events(record_key(record_id), limit=1)
        if not stored:
            raise NotFoundError(record_id)
        created: Any = self.mapper.to_domain_event(stored[0])
        return created.key_id if created.sealed else None

    def last_event_time(self) -> datetime | None:
        """The time of the newest event in the log (to keep the clock ahead of it)."""
        last = self.recorder.max_notification_id()
        if not last:
            return None
        (notification,) = self.recorder.select_notifications(start=last, limit=1)
        event: Any = self.mapper.to_domain_event(notification)
        moment: datetime = event.timestamp
        return moment

    def first_event_time(self) -> datetime | None:
        """The time of the oldest event in the log (None: it holds none)."""
        found = self.recorder.select_notifications(start=1, limit=1)
        if not found:
            return None
        event: Any = self.mapper.to_domain_event(found[0])
        moment: datetime = event.timestamp
        return moment

    def position_at(self, moment: datetime) -> int:
        """The log position at ``moment``: the id of the newest notification whose event
        time is at or before it (0 before the first). Event times never go backwards along
        the log (see :mod:`membrane_es.stores.event_times`), so a binary search reads a few dozen
        events, not the whole log; ids may have gaps (PostgreSQL's sequence), which the
        search steps over."""
        known, beyond = 0, (self.recorder.max_notification_id() or 0) + 1
        while beyond - known > 1:
            middle = (known + beyond) // 2
            found = self.recorder.select_notifications(start=middle, limit=1, stop=beyond - 1)
            if not found:  # a gap up to ``beyond``: nothing in [middle, beyond)
                beyond = middle
                continue
            event: Any = self.mapper.to_domain_event(found[0])
            if event.timestamp <= moment:
                known = found[0].id
            else:  # every id from ``middle`` to this one is later (or missing)
                beyond = middle
        return known


def _event_time(event: Any) -> datetime:
    moment: datetime = event.timestamp
    return moment


def _project(aggregate: Any, events: Any) -> Any:
    """A plain fold: the default projector's runtime Protocol check costs more than replay."""
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


__all__ = ["APPLICATION_NAME", "DEFAULT_ENV", "EVENTS_TABLE", "MemoryApplication"]

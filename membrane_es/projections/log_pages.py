"""The notification log as the read model reads it: pages of decoded domain events, in order.

Two ways to read a page, giving the same events in the same order:

* a recorder that reads the log as rows (:class:`~membrane_es.stores.abilities.ReadsLogRows`:
  the LMDB persistence module) hands over raw
  columns (ids, topics, state bytes) and each state is decoded straight into its event
  class: no ``Notification`` or ``UUID`` object per row, which cost as much as the decode;
* any other recorder (POPO, SQLite, PostgreSQL) gives eventsourcing's ``Notification``
  objects from ``select_notifications``, decoded the same way.

Decoding is msgspec's typed decode with one decoder per topic when the mapper is the plain
msgspec codec (no cipher, no compression) and the event class has no upcasters; otherwise the
mapper's own ``to_domain_event``. Events are decoded lazily, one at a time as the caller
consumes them, so a page's events are made and freed one by one, in cache.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast

from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import resolve_topic

from membrane_es.stores.abilities import Abilities, LogRows
from membrane_es.stores.codec import MsgspecMapper

StateDecoder = Callable[[bytes], Any]


class NotificationSource(Protocol):
    """Where the read model reads the log from (an eventsourcing application, and what its
    recorder offers beyond eventsourcing's interface)."""

    @property
    def recorder(self) -> Any: ...

    @property
    def mapper(self) -> Any: ...

    @property
    def abilities(self) -> Abilities: ...


@dataclass(frozen=True, slots=True)
class Page:
    """``count`` events of the log in order (decoded as ``events`` is iterated), the last
    being notification ``last_id``; an empty page has ``last_id`` 0."""

    events: Iterator[Any]
    count: int
    last_id: int


class LogReader:
    """Reads one application's log in pages, through the fastest read its recorder offers."""

    def __init__(self, source: NotificationSource) -> None:
        self._recorder = source.recorder
        self._mapper = source.mapper
        self._row_reader = source.abilities.row_reader
        self._typed = _typed_decoders(self._mapper)
        self.decode = _event_decoder(self._mapper, self._typed)

    def page(self, start: int, limit: int) -> Page:
        """Up to ``limit`` events from notification ``start`` on."""
        if self._row_reader is not None:
            rows = self._row_reader.read_log_rows(start, limit)
            count = len(rows)
            return Page(self._row_events(rows), count, rows.ids[-1] if count else 0)
        notifications = self._recorder.select_notifications(start=start, limit=limit)
        count = len(notifications)
        return Page(map(self.decode, notifications), count, notifications[-1].id if count else 0)

    def numbered(self, start: int, limit: int) -> tuple[list[int], Iterator[Any]]:
        """Up to ``limit`` events from notification ``start`` on and their positions (the
        change feed's read: the same events as :meth:`page`, each with its position)."""
        if self._row_reader is not None:
            rows = self._row_reader.read_log_rows(start, limit)
            return list(rows.ids), self._row_events(rows)
        notifications = self._recorder.select_notifications(start=start, limit=limit)
        return [n.id for n in notifications], map(self.decode, notifications)

    def _row_events(self, rows: LogRows) -> Iterator[Any]:
        decoders = {topic: self._typed(topic) for topic in dict.fromkeys(rows.topics)}
        if None in decoders.values():
            return map(self._row_event, itertools.repeat(rows), range(len(rows)))
        fast = cast("dict[str, StateDecoder]", decoders)
        if len(fast) == 1:  # a page of one event type (most of a rebuild's): no lookups
            (decoder,) = fast.values()
            return map(decoder, rows.states)
        # Each row's decoder by its topic, called on its state: all in C, no frame per row.
        return map(operator.call, map(fast.__getitem__, rows.topics), rows.states)

    def _row_event(self, rows: LogRows, index: int) -> Any:
        stored = StoredEvent(
            originator_id=rows.originator_id(index),
            originator_version=rows.originator_version(index),
            topic=rows.topics[index],
            state=rows.states[index],
        )
        return self.decode(stored)


def _typed_decoders(mapper: Any) -> Callable[[str], StateDecoder | None]:
    """A function from topic to a decoder of that topic's state bytes, or to None where the
    mapper's own path is needed (a cipher or compressor, or an event class that upcasts)."""
    plain = (
        isinstance(mapper, MsgspecMapper) and mapper.cipher is None and mapper.compressor is None
    )
    decoders: dict[str, StateDecoder | None] = {}

    def typed(topic: str) -> StateDecoder | None:
        try:
            return decoders[topic]
        except KeyError:
            pass
        decoder: StateDecoder | None = None
        if plain:
            cls = resolve_topic(topic)
            if getattr(cls, "class_version", 1) <= 1:
                decoder = mapper.state_decoder(cls)
        decoders[topic] = decoder
        return decoder

    return typed


def _event_decoder(
    mapper: Any, typed: Callable[[str], StateDecoder | None]
) -> Callable[[StoredEvent], Any]:
    def decode(stored: StoredEvent) -> Any:
        decoder = typed(stored.topic)
        return mapper.to_domain_event(stored) if decoder is None else decoder(stored.state)

    return decode


def event_decoder(mapper: Any) -> Callable[[StoredEvent], Any]:
    """A function from notification (or any stored event) to domain event, decoding as the
    read model does."""
    return _event_decoder(mapper, _typed_decoders(mapper))

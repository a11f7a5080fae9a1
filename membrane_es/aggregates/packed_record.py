"""A record aggregate packed into one value the garbage collector does not track.

A live :class:`~membrane_es.aggregates.memory_record.RecordAggregate` is a dozen tracked
objects (the aggregate, its lists, its payload). A reader that keeps many records between
their events (the change feed keeps every record it has met, up to a bound) would add them
all to what each full collection walks, and such collections come the more often the more
is kept. Packed, a record is its version, times and its state's MessagePack (the state is
a msgspec Struct, so it round-trips exactly): untracked, a fraction of the memory, and
unpacked in a few microseconds when its next event comes.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec

from .memory_record import RecordAggregate, RecordState

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(RecordState).decode


class PackedRecord(msgspec.Struct, frozen=True, gc=False):
    """One aggregate's version, times and encoded state (no container: never tracked)."""

    version: int
    created_on: datetime
    modified_on: datetime
    state: bytes


def pack(aggregate: RecordAggregate) -> PackedRecord:
    return PackedRecord(
        aggregate.version, aggregate.created_on, aggregate.modified_on, _encode(aggregate.state)
    )


def pack_state(version: int, created_on: datetime, state: RecordState) -> PackedRecord:
    """:func:`pack` of the aggregate a ``Created`` event at ``created_on`` makes, from its
    state alone (the change feed's creations: no aggregate made)."""
    return PackedRecord(version, created_on, created_on, _encode(state))


def unpack(key: UUID, packed: PackedRecord) -> RecordAggregate:
    """The aggregate :func:`pack` was given (an independent copy: nothing is shared)."""
    aggregate = RecordAggregate.__new__(RecordAggregate)
    aggregate.__base_init__(key, packed.version, packed.created_on)
    aggregate.modified_on = packed.modified_on
    aggregate.state = _decode(packed.state)
    return aggregate

"""Events and snapshots ⇄ bytes with msgspec MessagePack: typed, compact, no JSON on the hot path.

Select it with ``MAPPER_TOPIC=membrane_es.stores.codec:MsgspecMapper`` and
``TRANSCODER_TOPIC=membrane_es.stores.codec:MsgpackTranscoder``. eventsourcing's compressor and
cipher still apply (compress, then encrypt), configured as usual.

An event is stored as the MessagePack of all its fields and decoded in one typed pass into
its class, restoring UUIDs, datetimes and nested Structs from the class annotations.

Schema evolution follows eventsourcing's convention: a changed event class declares
``class_version = N`` and static ``upcast_vK_vK+1(state: dict)`` methods. Its events take the
slow path (untyped decode, upcast chain, then typed conversion); every other class keeps the
one-pass decode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any, Protocol

import msgspec
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import (
    Cipher,
    Compressor,
    Mapper,
    MapperDeserialisationError,
    StoredEvent,
    Transcoder,
)
from eventsourcing.utils import get_topic, resolve_topic

from membrane_es.errors import MembraneError

_encoder = msgspec.msgpack.Encoder()
_untyped = msgspec.msgpack.Decoder()


class MsgpackTranscoder(Transcoder):
    """msgspec MessagePack for any builtin value, Struct or dataclass (untyped decode)."""

    def encode(self, obj: Any) -> bytes:
        return _encoder.encode(obj)

    def decode(self, data: bytes) -> Any:
        return _untyped.decode(data)


class MsgspecMapper(Mapper[Any]):
    """Maps domain events and snapshots to stored events with msgspec, typed both ways."""

    def __init__(
        self,
        transcoder: Transcoder | None = None,
        compressor: Compressor | None = None,
        cipher: Cipher | None = None,
    ) -> None:
        super().__init__(transcoder or MsgpackTranscoder(), compressor, cipher)
        # Seals some events' content under per-record keys (set by the application).
        self.sealer: Sealer | None = None

    def to_stored_event(self, domain_event: DomainEventProtocol[Any]) -> StoredEvent:
        cls = type(domain_event)
        state = vars(domain_event)
        sealer = self.sealer
        if sealer is not None and sealer.seals(cls):
            state = sealer.seal_state(state)
        class_version = getattr(cls, "class_version", 1)
        if class_version > 1:
            state = {**state, "class_version": class_version}
        data = _encoder.encode(state)
        if self.compressor:
            data = self.compressor.compress(data)
        if self.cipher:
            data = self.cipher.encrypt(data)
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=get_topic(cls),
            state=data,
        )

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[Any]:
        cls = resolve_topic(stored_event.topic)
        data = stored_event.state
        try:
            if self.cipher:
                data = self.cipher.decrypt(data)
            if self.compressor:
                data = self.compressor.decompress(data)
            if getattr(cls, "class_version", 1) > 1:
                event = _decode_upcasting(cls, data)
            else:
                event = _typed_decoder(cls)(data)
            sealer = self.sealer
            if sealer is not None and sealer.seals(cls):
                event = sealer.unseal(event)
            return event
        except MembraneError:
            raise
        except Exception as exc:
            msg = (
                f"Failed to deserialise state of stored event with topic "
                f"'{stored_event.topic}', originator_id '{stored_event.originator_id}' "
                f"and originator_version {stored_event.originator_version}: {exc}"
            )
            raise MapperDeserialisationError(msg) from exc

    def to_domain_events(self, stored_events: Sequence[StoredEvent]) -> list[Any]:
        """:meth:`to_domain_event` of each, the keys their sealed boxes need fetched together
        first (a read of several records scattered over the store: a search's results)."""
        sealer = self.sealer
        if sealer is not None and len(stored_events) > 1 and not (self.cipher or self.compressor):
            try:
                sealer.prefetch(
                    [s.state for s in stored_events if sealer.seals(resolve_topic(s.topic))]
                )
            except (msgspec.DecodeError, ValueError):
                pass  # a damaged event: its own decode below reports it, naming it
        return [self.to_domain_event(stored) for stored in stored_events]

    def state_decoder(self, cls: Any) -> Callable[[bytes], Any]:
        """A function from an event's stored state to the event, for a class with no
        upcasters when this mapper has no cipher or compressor (the read model's fast path):
        the typed decode, and the content opened where this class is sealed."""
        decode: Callable[[bytes], Any] = _typed_decoder(cls)
        sealer = self.sealer
        if sealer is None or not sealer.seals(cls):
            return decode
        unseal = sealer.unseal
        return lambda data: unseal(decode(data))


class Sealer(Protocol):
    """Seals the content of some event classes in their stored form (see
    :mod:`membrane_es.aggregates.sealing`)."""

    def seals(self, cls: type[Any]) -> bool: ...

    def seal_state(self, state: dict[str, Any]) -> dict[str, Any]: ...

    def unseal(self, event: Any) -> Any: ...

    def prefetch(self, states: Iterable[bytes]) -> None: ...


@cache
def _typed_decoder(cls: type[Any]) -> Callable[[bytes], Any]:
    """One reusable decoder per event class (building one costs far more than decoding)."""
    return msgspec.msgpack.Decoder(cls).decode


def _decode_upcasting(cls: type[Any], data: bytes) -> Any:
    """Decode an event written by any earlier version of its class."""
    state: dict[str, Any] = _untyped.decode(data)
    version = state.pop("class_version", 1)
    while version < cls.class_version:
        getattr(cls, f"upcast_v{version}_v{version + 1}")(state)
        version += 1
    return msgspec.convert(state, cls, strict=False)

"""The content envelope: a record's content sealed under its own key in the log.

A ``Created`` event carries everything a record *is*: payload, tags, provenance,
interpretation, imported audit entries, the creation rationale and the vector. In the log that
content is one AES-256-GCM box under the record's data key
(:mod:`membrane_es.stores.key_store`); what stays in the clear is the record's structure —
id, type, sensitivity, scope, confidence, salience, times, lifecycle, relations — which the
views and the trust rules need even once the content is gone, and the key's id.

The codec seals when it writes an event and opens the box when it reads one, so the rest of
the engine sees whole events. A box whose key was destroyed opens to the *redacted* record:
the structure, with no content. Events written before per-record keys carry no box and read
as they were written.

The envelope is applied on top of (inside) eventsourcing's own whole-event cipher, when one is
configured: that one protects the log with a single key; this one makes each record erasable.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import msgspec
from cryptography.exceptions import InvalidTag

from membrane_es.embedding.vectors import erased, halved, vector_bytes, widened
from membrane_es.errors import IntegrityError
from membrane_es.schema.payloads import Payload
from membrane_es.schema.records import (
    AuditEntry,
    Embedding,
    Interpretation,
    MemoryRecord,
    Provenance,
)
from membrane_es.stores.key_store import KeyStore

NONCE_BYTES = 12


class SealedContent(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a ``Created`` event keeps in its box."""

    tags: list[str] = msgspec.field(default_factory=list)
    provenance: Provenance = msgspec.field(default_factory=Provenance)
    payload: Payload | None = None
    interpretation: Interpretation | None = None
    audit_log: list[AuditEntry] = msgspec.field(default_factory=list)
    rationale: str = ""
    embedding: Embedding | None = None  # as boxes written before ``vector`` kept it
    vector: bytes = b""  # float32, as boxes written before ``half`` kept it
    passages: bytes = b""  # float32, as boxes written before ``half_passages`` kept them
    half: bytes = b""  # the vector as float16 (its model and length stay in the clear)
    half_passages: bytes = b""  # the vectors of a long text's further passages, float16


class _StoredVector(msgspec.Struct):
    """What a stored ``Created`` event says of its vector (every other field is skipped)."""

    embedding: Embedding | None = None
    key_id: bytes = b""
    sealed: bytes = b""


class _StoredKey(msgspec.Struct):
    """The id of the key a stored ``Created`` event's box is sealed under (every other field
    is skipped)."""

    key_id: bytes = b""


class _BoxedVector(msgspec.Struct):
    """What a box says of its vector (every other field is skipped)."""

    vector: bytes = b""
    embedding: Embedding | None = None
    half: bytes = b""


_encode = msgspec.msgpack.Encoder().encode
_decode_content = msgspec.msgpack.Decoder(SealedContent).decode
_decode_stored_vector = msgspec.msgpack.Decoder(_StoredVector).decode
_decode_boxed_vector = msgspec.msgpack.Decoder(_BoxedVector).decode
_decode_stored_key = msgspec.msgpack.Decoder(_StoredKey).decode


def structure_of(record: MemoryRecord) -> MemoryRecord:
    """The record without its content: what stays readable once it is forgotten."""
    return msgspec.structs.replace(
        record,
        tags=[],
        provenance=Provenance(),
        payload=None,
        interpretation=None,
        audit_log=[],
    )


def redacted_creation(event: Any) -> Any:
    """A ``Created`` event as it reads once its key is gone."""
    redacted = object.__new__(type(event))
    redacted.__dict__.update(event.__dict__)
    redacted.__dict__.update(
        record=structure_of(event.record), rationale="", embedding=erased(event.embedding)
    )
    return redacted


class ContentSealer:
    """Seals and opens ``Created`` events with keys from ``keys``."""

    def __init__(self, keys: KeyStore, created: type[Any]) -> None:
        self.keys = keys
        self._created = created

    def seals(self, cls: type[Any]) -> bool:
        return cls is self._created

    def prefetch(self, states: Iterable[bytes]) -> None:
        """Fetch together the keys that the boxes of these stored ``Created`` events' states
        are sealed under, ahead of opening them one by one (each would otherwise be a
        lookup of its own)."""
        ids = [_decode_stored_key(state).key_id for state in states]
        self.keys.prefetch([key_id for key_id in ids if key_id])

    def seal_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The stored form of a ``Created`` event's fields: content boxed under a new key."""
        record: MemoryRecord = state["record"]
        key_id, _ = self.keys.issue()
        cipher = self.keys.cipher(key_id)
        assert cipher is not None  # just issued
        content = SealedContent(
            tags=record.tags,
            provenance=record.provenance,
            payload=record.payload,
            interpretation=record.interpretation,
            audit_log=record.audit_log,
            rationale=state["rationale"],
            half=b"" if state["embedding"] is None else halved(state["embedding"].vector),
            half_passages=(
                b"" if state["embedding"] is None else halved(state["embedding"].passages)
            ),
        )
        nonce = os.urandom(NONCE_BYTES)
        box = nonce + cipher.encrypt(nonce, _encode(content), key_id)
        return {
            **state,
            "record": structure_of(record),
            "rationale": "",
            "embedding": erased(state["embedding"]),
            "key_id": key_id,
            "sealed": box,
        }

    def unseal(self, event: Any) -> Any:
        """The event with its content back in place (redacted if its key is gone). The
        event is one just decoded, which nothing else holds: it is completed in place."""
        box: bytes = event.sealed
        if not box:
            return event  # written before per-record keys: stored as it reads
        plain = self._opened(box, event.key_id, event.originator_id, event.originator_version)
        if plain is None:
            return event  # forgotten: the structure is all there is
        content = _decode_content(plain)
        record = event.record
        record.tags = content.tags
        record.provenance = content.provenance
        record.payload = content.payload
        record.interpretation = content.interpretation
        record.audit_log = content.audit_log
        fields = event.__dict__
        fields["rationale"] = content.rationale
        if content.half:
            fields["embedding"] = Embedding(
                model=event.embedding.model,
                vector=widened(content.half),
                passages=widened(content.half_passages),
            )
        elif content.vector:
            fields["embedding"] = Embedding(
                model=event.embedding.model, vector=content.vector, passages=content.passages
            )
        elif content.embedding is not None:
            fields["embedding"] = content.embedding
        return event

    def vector_of(self, state: bytes) -> bytes | None:
        """The vector bytes of a ``Created`` event's stored ``state`` (zeros if its record
        was forgotten; None if it has none), decoding nothing else: what a checkpoint load
        reads of each record."""
        stored = _decode_stored_vector(state)
        embedding = stored.embedding
        if embedding is None:
            return None
        if not stored.sealed:
            return vector_bytes(embedding)  # written before per-record keys
        plain = self._opened(stored.sealed, stored.key_id, None, 1)  # the caller names it
        if plain is None:
            return vector_bytes(embedding)  # forgotten: zeros
        boxed = _decode_boxed_vector(plain)
        if boxed.half:
            return widened(boxed.half)
        if boxed.vector:
            return boxed.vector
        return None if boxed.embedding is None else vector_bytes(boxed.embedding)

    def _opened(self, box: bytes, key_id: bytes, originator_id: Any, version: int) -> bytes | None:
        """The plain content of ``box`` (None once its key is destroyed)."""
        cipher = self.keys.cipher(key_id)
        if cipher is None:
            return None
        try:
            plain: bytes = cipher.decrypt(box[:NONCE_BYTES], box[NONCE_BYTES:], key_id)
        except InvalidTag:
            raise SealedContentError(originator_id, version) from None
        return plain


class SealedContentError(IntegrityError):
    """A box did not open under its key: the event or the key was altered."""

    def __init__(self, originator_id: Any, version: int) -> None:
        super().__init__(
            f"the sealed content of record {originator_id} (version {version}) does not open "
            "under its key: the event or the key store was altered"
        )

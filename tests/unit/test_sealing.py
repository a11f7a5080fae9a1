"""The content box: the vector is sealed as half-precision bytes (its model and length stay in
the clear), and boxes written when the box held the vector at full precision, or the whole
embedding, still open to the same event."""

from __future__ import annotations

import os
from types import SimpleNamespace

import msgspec
import numpy as np
import pytest

from membrane_es.aggregates.sealing import NONCE_BYTES, ContentSealer, SealedContent
from membrane_es.embedding.vectors import erased, halved, pack
from membrane_es.schema.records import Embedding, MemoryRecord
from membrane_es.stores.key_store import SqliteKeyStore
from tests.unit.builders import semantic


def _record() -> MemoryRecord:
    return msgspec.convert({**semantic(), "id": "r1", "tags": ["t"]}, MemoryRecord, strict=False)


class Created(SimpleNamespace):
    """Stands for a ``Created`` event class: the sealer only needs its instances' fields."""


def _state(embedding: Embedding) -> dict[str, object]:
    return {"record": _record(), "rationale": "because", "embedding": embedding}


def _event(stored: dict[str, object]) -> Created:
    return Created(originator_id="o", originator_version=1, **stored)


def test_a_vector_is_boxed_at_half_precision_and_opens_whole() -> None:
    keys = SqliteKeyStore(None)
    sealer = ContentSealer(keys, Created)
    embedding = pack("m", np.array([0.1234567, -0.5, 0.25, 0.8]))
    stored = sealer.seal_state(_state(embedding))
    assert stored["embedding"] == erased(embedding)  # model and length in the clear
    key_id, box = stored["key_id"], stored["sealed"]
    assert isinstance(key_id, bytes) and isinstance(box, bytes)
    cipher = keys.cipher(key_id)
    assert cipher is not None
    plain = cipher.decrypt(box[:NONCE_BYTES], box[NONCE_BYTES:], key_id)
    content = msgspec.msgpack.decode(plain, type=SealedContent)
    assert content.half == halved(embedding.vector) and len(content.half) == 2 * 4
    assert not content.vector and content.embedding is None

    opened = sealer.unseal(_event(stored))
    assert opened.embedding == embedding
    assert opened.rationale == "because"
    assert opened.record == _record()


@pytest.mark.parametrize("whole", [False, True], ids=["vector at full precision", "embedding"])
def test_a_box_written_by_an_earlier_version_still_opens(whole: bool) -> None:
    keys = SqliteKeyStore(None)
    sealer = ContentSealer(keys, Created)
    embedding = Embedding(model="m", vector=bytes(range(16)))  # any float32 bytes
    key_id, _ = keys.issue()
    cipher = keys.cipher(key_id)
    assert cipher is not None
    old = (
        SealedContent(rationale="then", embedding=embedding)
        if whole
        else SealedContent(rationale="then", vector=embedding.vector)
    )
    nonce = os.urandom(NONCE_BYTES)
    box = nonce + cipher.encrypt(nonce, msgspec.msgpack.encode(old), key_id)
    stored = {
        "record": msgspec.structs.replace(_record(), tags=[], payload=None),
        "rationale": "",
        "embedding": erased(embedding),
        "key_id": key_id,
        "sealed": box,
    }
    opened = sealer.unseal(_event(stored))
    assert opened.embedding == embedding
    assert opened.rationale == "then"

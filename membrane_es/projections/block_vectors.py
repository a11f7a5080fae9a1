"""The vectors of checkpointed embedding blocks, read back from the log.

A checkpoint keeps which rows each scope's block holds, not their vectors: every vector is in
the log already (in its record's ``Created`` event), and a second copy in the checkpoint
doubled what a store takes on disk. Loading a checkpoint reads the ``Created`` event of each
record a block holds, by its aggregate id, and puts the vector in its place. A record
forgotten since reads as its redacted event, whose vector is zeros, as the block holds it.

Each event is read as any event is (checked against the log's chain), and only its vector is
decoded and opened where the mapper is the plain msgspec codec (:meth:`ContentSealer.vector_of
<membrane_es.aggregates.sealing.ContentSealer.vector_of>`); elsewhere the event is decoded
whole. Only these events are read: damage elsewhere in the log shows where it is read, as it
did when the checkpoint held the vectors.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import numpy as np
import numpy.typing as npt

from membrane_es.aggregates.identity import record_key
from membrane_es.aggregates.sealing import SealedContentError
from membrane_es.codec import MsgspecMapper
from membrane_es.embedding.vectors import vector_bytes
from membrane_es.errors import IntegrityError
from membrane_es.projections.log_pages import NotificationSource

Array = npt.NDArray[Any]
CHUNK = 2048  # creation events read at a time


def block_vectors(
    log: NotificationSource, ids: list[str], block_rows: dict[int, Array], dimensions: int
) -> dict[int, Array]:
    """Each block's matrix (its rows' vectors, in its row order); ``ids``: the record id of
    each table row."""
    mapper = log.mapper
    sealer: Any = getattr(mapper, "sealer", None)
    lean = (
        isinstance(mapper, MsgspecMapper)
        and mapper.cipher is None
        and mapper.compressor is None
        and sealer is not None
    )
    width = 4 * dimensions
    zeros = bytes(width)
    # Every block's rows, read in row (creation) order: records' keys were issued in that
    # order, so the key store reads them ahead rather than one lookup each.
    owner = {row: scope for scope, rows in block_rows.items() for row in rows.tolist()}
    order = sorted(owner)
    parts: dict[int, list[bytes]] = {scope: [] for scope in block_rows}
    for first in range(0, len(order), CHUNK):
        chunk = order[first : first + CHUNK]
        keys = [record_key(ids[row]) for row in chunk]
        for row, vector in zip(chunk, _vectors(log, keys, lean), strict=True):
            parts[owner[row]].append(
                vector if vector is not None and len(vector) == width else zeros
            )
    matrices = {}
    for scope, vectors in parts.items():
        data = b"".join(vectors)
        matrices[scope] = np.frombuffer(data, dtype="<f4").reshape(len(vectors), dimensions)
    return matrices


def _vectors(log: NotificationSource, keys: list[UUID], lean: bool) -> list[bytes | None]:
    """The vector bytes of each record's creation (None: it has none)."""
    mapper: Any = log.mapper
    select_states = getattr(log.recorder, "select_states", None)
    if lean and select_states is not None:  # one read of the chunk (LMDB)
        vector_of = mapper.sealer.vector_of
        vectors = []
        for key, state in zip(keys, select_states(keys, 1), strict=True):
            try:
                vectors.append(vector_of(state))
            except SealedContentError:
                raise SealedContentError(key, 1) from None
        return vectors
    found: list[bytes | None] = []
    for key in keys:
        created = log.recorder.select_events(key, lte=1)
        if not created:
            raise IntegrityError(f"record {key} has no creation event in the log")
        embedding = mapper.to_domain_event(created[0]).embedding
        found.append(None if embedding is None else vector_bytes(embedding))
    return found

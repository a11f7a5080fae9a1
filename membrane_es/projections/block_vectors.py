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
did when the checkpoint held the vectors. A store that cannot read events by key in bulk
(PostgreSQL) selects the log's creation events by topic instead, a page at a time, and keeps
those of the records the blocks hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
from eventsourcing.utils import get_topic

from membrane_es.aggregates.identity import record_key
from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.aggregates.sealing import SealedContentError
from membrane_es.embedding.vectors import vector_bytes
from membrane_es.errors import IntegrityError
from membrane_es.projections.log_pages import NotificationSource, event_decoder
from membrane_es.stores.abilities import SelectsStates
from membrane_es.stores.codec import MsgspecMapper

Array = npt.NDArray[Any]
CHUNK = 2048  # creation events read by key at a time
PAGE = 2000  # creation events selected by topic at a time
CREATED = get_topic(RecordAggregate.Created)


def block_vectors(
    log: NotificationSource,
    position: int,
    ids: list[str],
    block_rows: dict[int, Array],
    dimensions: int,
    after: int = 0,
) -> dict[int, Array]:
    """Each block's matrix (its rows' vectors, in its row order); ``ids``: the record id of
    each table row; ``position``: the last notification the checkpoint reflects; ``after``:
    a notification every one of these records was created after (where the log is scanned
    for their creations, it is scanned from there)."""
    width = 4 * dimensions
    zeros = bytes(width)
    owner = {row: scope for scope, rows in block_rows.items() for row in rows.tolist()}
    # Read in row (creation) order: records' keys were issued in that order, so the key
    # store reads them ahead rather than one lookup each.
    order = sorted(owner)
    vectors: Iterable[bytes | None]
    state_reader = log.abilities.state_reader
    if state_reader is not None and _lean(log.mapper):
        vectors = _creation_vectors(log.mapper, state_reader, [ids[row] for row in order])
    else:
        vectors = _logged_vectors(log, position, [ids[row] for row in order], after)
    parts: dict[int, list[bytes]] = {scope: [] for scope in block_rows}
    for row, vector in zip(order, vectors, strict=True):
        parts[owner[row]].append(vector if vector is not None and len(vector) == width else zeros)
    matrices = {}
    for scope, held in parts.items():
        data = b"".join(held)
        matrices[scope] = np.frombuffer(data, dtype="<f4").reshape(len(held), dimensions)
    return matrices


def reads_by_key(log: NotificationSource) -> bool:
    """Whether vectors are read from ``log`` by their records' keys (else by scanning its
    creation events: a block or all of them cost about the same)."""
    return log.abilities.state_reader is not None and _lean(log.mapper)


def _lean(mapper: Any) -> bool:
    """Whether a stored state can be opened for its vector alone (the plain msgspec codec)."""
    return (
        isinstance(mapper, MsgspecMapper)
        and mapper.cipher is None
        and mapper.compressor is None
        and mapper.sealer is not None
    )


def _creation_vectors(
    mapper: Any, state_reader: SelectsStates, record_ids: list[str]
) -> Iterator[bytes | None]:
    """Each record's vector, its creation read by key a chunk at a time (the LMDB store)."""
    vector_of = mapper.sealer.vector_of
    for first in range(0, len(record_ids), CHUNK):
        keys = [record_key(record_id) for record_id in record_ids[first : first + CHUNK]]
        for key, state in zip(keys, state_reader.select_states(keys, 1), strict=True):
            try:
                yield vector_of(state)
            except SealedContentError:
                raise SealedContentError(key, 1) from None


def _logged_vectors(
    log: NotificationSource, position: int, record_ids: list[str], after: int = 0
) -> list[bytes | None]:
    """Each record's vector, from the log's creation events after ``after`` up to
    ``position``, a page at a time (a store that selects notifications by topic:
    PostgreSQL, for one)."""
    wanted = dict.fromkeys(record_ids)
    decode = event_decoder(log.mapper)
    found = 0
    start = after + 1
    while start <= position and found < len(wanted):
        notes = log.recorder.select_notifications(
            start=start, limit=PAGE, stop=position, topics=(CREATED,)
        )
        if not notes:
            break
        for note in notes:
            event = decode(note)
            record_id = event.record.id
            if record_id in wanted and wanted[record_id] is None:
                embedding = event.embedding
                wanted[record_id] = b"" if embedding is None else vector_bytes(embedding)
                found += 1
        start = notes[-1].id + 1
    if found < len(wanted):
        missing = next(record_id for record_id, vector in wanted.items() if vector is None)
        raise IntegrityError(f"record {missing} has no creation event in the log")
    return [wanted[record_id] for record_id in record_ids]

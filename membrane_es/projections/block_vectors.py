"""The vectors of checkpointed embedding blocks, read back from the log.

A checkpoint keeps which rows each scope's block holds, not their vectors: every vector is in
the log already (in its record's ``Created`` event), and a second copy in the checkpoint
doubled what a store takes on disk. Loading a checkpoint reads the ``Created`` events up to
its position, in log order — the k-th of them made table row k — and puts the vector of each
row a block holds at its place there. A record forgotten since reads as its redacted event,
whose vector is zeros, as the block holds it.

Where the log offers raw rows and the mapper is the plain msgspec codec (the LMDB store), only
the vector of each such event is decoded and opened (:meth:`ContentSealer.vector_of
<membrane_es.aggregates.sealing.ContentSealer.vector_of>`); elsewhere each ``Created`` event is
decoded whole. Every row read is checked against the log's chain by the recorder, as any read
is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
from eventsourcing.utils import get_topic

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.aggregates.sealing import SealedContentError
from membrane_es.codec import MsgspecMapper
from membrane_es.embedding.vectors import vector_bytes
from membrane_es.errors import IntegrityError
from membrane_es.projections.log_pages import LogReader, NotificationSource

Array = npt.NDArray[Any]
PAGE = 2000  # log rows read at a time
CREATED = get_topic(RecordAggregate.Created)


def block_vectors(
    log: NotificationSource,
    position: int,
    rows: int,
    block_rows: dict[int, Array],
    dimensions: int,
) -> dict[int, Array]:
    """Each block's matrix (its rows' vectors, in its row order), from the log up to
    ``position``, whose ``Created`` events made the table's ``rows`` rows."""
    block_of = np.full(rows, -1, dtype=np.int64)
    for scope, held in block_rows.items():
        block_of[held] = scope
    wanted = block_of.tolist()
    # A block's rows ascend, and rows are made in log order: each block's vectors arrive in
    # its own order, so they are gathered as bytes and made a matrix once.
    parts: dict[int, list[bytes]] = {scope: [] for scope in block_rows}
    width = 4 * dimensions
    zeros = bytes(width)
    row = 0
    for vector in _vectors(log, position, wanted):
        if row >= rows:
            break
        scope = wanted[row]
        if scope >= 0:
            parts[scope].append(vector if vector is not None and len(vector) == width else zeros)
        row += 1
    if row != rows:
        raise IntegrityError(
            f"the log up to notification {position} holds {row} records, the checkpoint {rows}"
        )
    return {
        scope: np.frombuffer(b"".join(chunks), dtype="<f4").reshape(len(chunks), dimensions)
        for scope, chunks in parts.items()
    }


def _vectors(log: NotificationSource, position: int, wanted: list[int]) -> Iterator[bytes | None]:
    """For each ``Created`` event of the log's first ``position`` notifications, in order, its
    vector's bytes — or None where it has none, or where ``wanted`` (by the event's place
    among them) is negative and it is not decoded."""
    mapper = log.mapper
    read_rows = getattr(log.recorder, "read_log_rows", None)
    sealer = getattr(mapper, "sealer", None)
    plain = isinstance(mapper, MsgspecMapper) and mapper.cipher is None
    if read_rows is None or sealer is None or not plain or mapper.compressor is not None:
        reader = LogReader(log)
        start = 1
        while start <= position:
            page = reader.page(start, min(PAGE, position - start + 1), topic=CREATED)
            if not page.last_id:
                return
            for event in page.events:
                yield None if event.embedding is None else vector_bytes(event.embedding)
            start = page.last_id + 1
        return
    vector_of = sealer.vector_of
    count = len(wanted)
    made = 0
    start = 1
    while start <= position:
        page = read_rows(start, min(PAGE, position - start + 1))
        if not page.ids:
            return
        for index, topic in enumerate(page.topics):
            if topic != CREATED:
                continue
            if made < count and wanted[made] >= 0:
                try:
                    yield vector_of(page.states[index])
                except SealedContentError:
                    raise SealedContentError(page.originator_id(index), 1) from None
            else:
                yield None
            made += 1
        start = page.ids[-1] + 1

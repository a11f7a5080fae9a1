"""The vectors of checkpointed embedding blocks, read back from the log.

A checkpoint keeps which rows each scope's block holds, not their vectors: every vector is in
the log already (in its record's ``Created`` event), and a second copy in the checkpoint
doubled what a store takes on disk. Loading a checkpoint reads the ``Created`` events up to
its position, in log order, and puts each vector at its row's place in its block. A record
forgotten since reads as its redacted event, whose vector is zeros — as the block holds it.

Only ``Created`` events are decoded; every row read is still checked against the log's
chain by the recorder, as any read is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
from eventsourcing.utils import get_topic

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.embedding.vectors import vector_bytes
from membrane_es.projections.log_pages import LogReader, NotificationSource

Array = npt.NDArray[Any]
PAGE = 2000  # log rows read at a time
CREATED = get_topic(RecordAggregate.Created)


def block_vectors(
    source: NotificationSource,
    position: int,
    row_of: dict[str, int],
    block_rows: dict[int, Array],
    dimensions: int,
) -> dict[int, Array]:
    """Each block's matrix (its rows' vectors, in its row order), from the log up to
    ``position``. ``row_of``: the table row of each record id."""
    matrices = {
        scope: np.zeros((len(rows), dimensions), "<f4") for scope, rows in block_rows.items()
    }
    if not matrices:
        return matrices
    size = 1 + max((int(rows.max()) for rows in block_rows.values() if len(rows)), default=0)
    block_of = np.full(size, -1, dtype=np.int64)
    place_of = np.zeros(size, dtype=np.int64)
    for scope, rows in block_rows.items():
        block_of[rows] = scope
        place_of[rows] = np.arange(len(rows))
    width = 4 * dimensions
    for event in _creations(source, position):
        embedding = event.embedding
        if embedding is None:
            continue
        row = row_of.get(event.record.id, size)
        if row >= size or block_of[row] < 0:
            continue  # not in a block: a vector of another width, skipped when applied
        data = vector_bytes(embedding)
        if len(data) == width:
            matrices[int(block_of[row])][place_of[row]] = np.frombuffer(data, dtype="<f4")
    return matrices


def _creations(source: NotificationSource, position: int) -> Iterator[Any]:
    """The ``Created`` events of the log's first ``position`` notifications, in order."""
    reader = LogReader(source)
    start = 1
    while start <= position:
        page = reader.page(start, min(PAGE, position - start + 1), topic=CREATED)
        if not page.last_id:
            return
        yield from page.events
        start = page.last_id + 1

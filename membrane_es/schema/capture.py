"""What a capture returns (spec §2.4, SDK ``CaptureMemoryResult``).

A capture writes one primary record, possibly some entities and a derived semantic fact, and
the edges that join them; all of it in one atomic write.
"""

from __future__ import annotations

import msgspec

from membrane_es.schema.records import GraphEdge, MemoryRecord


class CaptureMemoryResult(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The outcome of one capture.

    ``primary_record``: the record made from the content (episodic, or working for working
    state), with its interpretation and outgoing relations; ``created_records``: the entities
    the capture created, then the derived semantic record if there is one; ``edges``: every
    edge written, forward and inverse, in the order they were made; ``resolved_records``:
    the existing fact the derived one restated (resolution on write reinforced it instead of
    storing a duplicate), marked ``reinforced``.
    """

    primary_record: MemoryRecord
    created_records: list[MemoryRecord] = msgspec.field(default_factory=list)
    edges: list[GraphEdge] = msgspec.field(default_factory=list)
    resolved_records: list[MemoryRecord] = msgspec.field(default_factory=list)

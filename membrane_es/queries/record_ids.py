"""Which records a reader may read in full, by id, without loading any of them.

A listing for callers that keep their own structure in record ids and scopes (an adapter
that files a framework's objects under deterministic ids): the ids of the records the trust
context admits in full, of the asked types, active unless ``include_retracted``, in the
order they were created — now, or as the store stood at ``as_of``. Records the trust would
see only redacted are left out: their content is not the caller's to read.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from membrane_es.projections.read_model import ReadModel
from membrane_es.queries.candidates import Filters, find
from membrane_es.queries.snapshot import Snapshot, consistently
from membrane_es.schema.records import TrustContext
from membrane_es.schema.validation import (
    check_flag,
    check_memory_types,
    check_moment,
    check_trust,
)


def record_ids(
    views: ReadModel,
    now: datetime,
    *,
    trust: TrustContext | None,
    memory_types: Iterable[str] | None = None,
    as_of: datetime | None = None,
    include_retracted: bool = False,
) -> list[str]:
    checked = check_trust(trust)
    filters = Filters(
        types=frozenset(check_memory_types("memory_types", memory_types)),
        include_retracted=check_flag("include_retracted", include_retracted),
    )
    moment = None if as_of is None else check_moment("as_of", as_of)

    def read(snapshot: Snapshot) -> list[str]:
        found = find(snapshot, checked, filters)
        ids = snapshot.table.ids
        return [ids[row] for row in found.rows[~found.redacted].tolist()]

    return consistently(views, now, moment, read)

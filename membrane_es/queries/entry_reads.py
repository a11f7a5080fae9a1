"""The entries view as the entries API's writes read it
(:class:`~membrane_es.commands.unit_of_work.EntryReads`): each read under the view's lock,
on the view as it is when asked (the engine catches it up with the log first)."""

from __future__ import annotations

from collections.abc import Callable

from membrane_es.projections.entries import EntryIndex
from membrane_es.queries import entries as queries
from membrane_es.schema.entries import Entry
from membrane_es.schema.records import TrustContext

# The column of a revision row (:func:`~membrane_es.queries.entries.current_revision`)
# holding its record id, and the one holding its ``valid_from``.
_RECORD_ID, _VALID_FROM = 2, 10


class EntryViewReads:
    """Reads of the entries view that ``index`` returns, caught up, at each call."""

    def __init__(self, index: Callable[[], EntryIndex]) -> None:
        self._index = index

    def current_revision(self, entry_id: int, trust: TrustContext | None) -> tuple[str, int] | None:
        index = self._index()
        with index.lock:
            row = queries.current_revision(index, entry_id, trust)
        return None if row is None else (str(row[_RECORD_ID]), int(row[_VALID_FROM]))

    def latest_revision(self, entry_id: int, trust: TrustContext | None) -> str | None:
        index = self._index()
        with index.lock:
            return queries.latest_revision(index, entry_id, trust)

    def revision_records(self, entry_id: int) -> list[str]:
        index = self._index()
        with index.lock:
            return queries.revision_records(index, entry_id)

    def revision_reach(self, entry_id: int, *, every: bool) -> list[tuple[str, str]]:
        index = self._index()
        with index.lock:
            return queries.revision_reach(index, entry_id, every=every)

    def entry(self, entry_id: int, trust: TrustContext | None, tenant: int | str) -> Entry | None:
        index = self._index()
        with index.lock:
            return queries.get_entry(index, entry_id, trust, tenant)

    def relation_id(
        self, source_id: int, target_id: int, relation: str, trust: TrustContext | None
    ) -> int | None:
        index = self._index()
        with index.lock:
            found = queries.relations(
                index, 0, trust, source_id=source_id, target_id=target_id, relation=relation
            )
        return found[0].id if found else None

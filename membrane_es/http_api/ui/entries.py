"""The entries view: the tenant's entries (the entries API's notes), newest first, with
their numbers and types, as ``GET /v1/memory/entries`` lists them for the same key.

Pages follow on by the entries API's own cursor (``before_updated_at``: the last entry's
``updated_at``), so a page is one indexed read however deep it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from membrane_es.engine import EntryQuery, Membrane
from membrane_es.http_api.ui.context import Reading
from membrane_es.schema.entries import ENTRY_TYPES, Entry

ENTRIES_PAGE = 50


def tenant_id(tenant: str) -> int | str:
    """The tenant as the entries API names it: a number where its name is one (the default
    tenant is 0), else the name."""
    if not tenant:
        return 0
    return int(tenant) if tenant.isascii() and tenant.isdigit() else tenant


@dataclass(frozen=True, slots=True)
class EntriesPage:
    tenant: str  # the tenant's name as keys name it ("" for the default tenant)
    entries: list[Entry]
    kind: str
    q: str
    before: int | None  # the cursor this page was read from
    next_before: int | None  # the cursor of the page after it (None: this is the last)


def entries(
    memory: Membrane, reading: Reading, *, kind: str = "", q: str = "", before: int | None = None
) -> EntriesPage:
    """A page of the tenant's entries at the reader's moment: browsed newest first (or
    searched, with ``q``)."""
    as_of = None if reading.as_of is None else int(reading.as_of.timestamp())
    query = EntryQuery(
        q=q,
        types=(kind,) if kind else (),
        as_of=as_of,
        before_updated_at=None if q else before,
        limit=ENTRIES_PAGE + 1,
    )
    found = memory.list_entries(
        query, trust=reading.trust, tenant=tenant_id(reading.caller.tenant)
    ).entries
    more = len(found) > ENTRIES_PAGE and not q
    shown = found[:ENTRIES_PAGE]
    after = shown[-1].updated_at if more and shown else None
    return EntriesPage(reading.caller.tenant, shown, kind, q, before, after)


__all__ = ["ENTRY_TYPES", "EntriesPage", "entries"]

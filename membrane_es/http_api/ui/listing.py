"""The records table: every record the reader may see at its moment, filtered by scope,
type and state, oldest or newest first, a page at a time.

The filters are answered from the engine's id listings (:meth:`Membrane.record_ids`), which
load no record: the ids the reader's trust admits in full, those one level up admits (the
reader sees them redacted), active or with the retracted ones too, and narrowed to a scope.
Only the records shown are loaded, and those out of the active listing, to tell superseded,
retracted and erased apart. A record the reader sees redacted is listed only while it is
active, as a search lists it, with no state beyond that: whether it was retracted is its
content's story, not the reader's to read.
"""

from __future__ import annotations

from dataclasses import dataclass

from membrane_es.engine import Membrane, allows, visible
from membrane_es.http_api.ui.context import Reading
from membrane_es.http_api.ui.reads import FULL_TRUST, label, state_of
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import MemoryRecord, TrustContext

RECORDS_PAGE = 50
STATES = ("active", "retracted", "superseded", "erased")  # "active" includes contested
# A scope no record can have (scopes are trimmed): narrowing to it leaves the unscoped records.
_NO_SCOPE = "\x00"


@dataclass(frozen=True, slots=True)
class Row:
    record: MemoryRecord
    state: str  # one of STATES, "contested" (active, disputed), or "redacted"
    label: str

    @property
    def redacted(self) -> bool:
        return self.state == "redacted"


@dataclass(frozen=True, slots=True)
class RecordsPage:
    rows: list[Row]
    total: int
    page: int
    pages: int
    has_next: bool

    @property
    def beyond(self) -> bool:
        return not self.rows and self.page > 1


def _raised(trust: TrustContext) -> TrustContext:
    """The trust one level up: what it admits in full, ``trust`` sees at least redacted."""
    levels = list(Sensitivity)
    at = levels.index(Sensitivity(trust.max_sensitivity))
    level = levels[min(at + 1, len(levels) - 1)]
    return TrustContext(max_sensitivity=level, authenticated=True, scopes=list(trust.scopes))


def _narrowed(trust: TrustContext, scope: str) -> TrustContext | None:
    """``trust`` narrowed to one scope (None: the reader's own scopes leave it out)."""
    if trust.scopes and scope not in trust.scopes:
        return None
    return TrustContext(max_sensitivity=trust.max_sensitivity, authenticated=True, scopes=[scope])


def _ids(
    memory: Membrane,
    reading: Reading,
    trust: TrustContext,
    scope: str,
    types: list[str],
    *,
    retracted: bool,
) -> list[str]:
    """The ids ``trust`` admits in full at the reader's moment (in one scope when given)."""

    def listed(given: TrustContext) -> list[str]:
        return memory.record_ids(
            trust=given,
            memory_types=types or None,
            as_of=reading.as_of,
            include_retracted=retracted,
        )

    if not scope:
        return listed(trust)
    narrowed = _narrowed(trust, scope)
    if narrowed is None:
        return []
    unscoped = set(listed(TrustContext(max_sensitivity=trust.max_sensitivity, scopes=[_NO_SCOPE])))
    return [record_id for record_id in listed(narrowed) if record_id not in unscoped]


def browse(
    memory: Membrane,
    reading: Reading,
    *,
    scope: str = "",
    types: list[str] | None = None,
    state: str = "",
    newest: bool = False,
    page: int = 1,
) -> RecordsPage:
    """Page ``page`` of the records the reader may see, filtered and ordered."""
    types = types or []
    trust = reading.trust
    full_all = _ids(memory, reading, trust, scope, types, retracted=True)
    full_active = set(_ids(memory, reading, trust, scope, types, retracted=False))
    redacted: list[str] = []
    if _raised(trust).max_sensitivity != trust.max_sensitivity:  # at the top: none redacted
        seen_active = _ids(memory, reading, _raised(trust), scope, types, retracted=False)
        full = set(full_all)
        redacted = [record_id for record_id in seen_active if record_id not in full]
    # the records out of the active listing: read to tell their state
    states: dict[str, str] = {}
    if state not in ("", "active"):
        for record_id in full_all:
            if record_id not in full_active:
                states[record_id] = _state(memory, reading, record_id)
    if state == "active":
        chosen = [record_id for record_id in full_all if record_id in full_active]
        chosen += redacted
    elif state:
        chosen = [record_id for record_id in full_all if states.get(record_id) == state]
    else:
        chosen = full_all + redacted if redacted else full_all
    if redacted and chosen:
        # creation order: the redacted ids' places among all the reader may see
        places = {
            record_id: place
            for place, record_id in enumerate(
                memory.record_ids(trust=_raised(trust), as_of=reading.as_of, include_retracted=True)
            )
        }
        chosen.sort(key=lambda record_id: places.get(record_id, 0))
    if newest:
        chosen.reverse()
    start = (page - 1) * RECORDS_PAGE
    picked = chosen[start : start + RECORDS_PAGE]
    rows = [_row(memory, reading, record_id, full_active, states) for record_id in picked]
    pages = max(1, -(-len(chosen) // RECORDS_PAGE))
    return RecordsPage(
        [row for row in rows if row is not None],
        len(chosen),
        page,
        pages,
        len(chosen) > start + RECORDS_PAGE,
    )


def _state(memory: Membrane, reading: Reading, record_id: str) -> str:
    """The state of a record out of the active listing (read at full trust: the reader
    may read it in full, or it would not be asked)."""
    record = memory.retrieve_by_id(record_id, trust=FULL_TRUST, as_of=reading.as_of)
    state = state_of(record, erased=record.payload is None)
    return "retracted" if state in ("active", "contested") else state


def _row(
    memory: Membrane,
    reading: Reading,
    record_id: str,
    active: set[str],
    states: dict[str, str],
) -> Row | None:
    whole = memory.retrieve_by_id(record_id, trust=FULL_TRUST, as_of=reading.as_of)
    seen = visible(reading.trust, whole)
    if seen is None:
        return None
    if not allows(reading.trust, whole):
        return Row(seen, "redacted", "")
    if record_id in active:
        return Row(seen, state_of(seen, erased=False), label(seen))  # active or contested
    state = states.get(record_id) or _state(memory, reading, record_id)
    return Row(seen, state, label(seen))


def matching(memory: Membrane, reading: Reading, prefix: str) -> list[str]:
    """The ids the reader may see that start with ``prefix`` (the "go to id" box)."""
    prefix = prefix.strip().lower()
    if not prefix:
        return []
    seen = memory.record_ids(
        trust=_raised(reading.trust), as_of=reading.as_of, include_retracted=True
    )
    full = set(memory.record_ids(trust=reading.trust, as_of=reading.as_of, include_retracted=True))
    active = set(memory.record_ids(trust=_raised(reading.trust), as_of=reading.as_of))
    return [
        record_id
        for record_id in seen
        if record_id.startswith(prefix) and (record_id in full or record_id in active)
    ]

"""The change feed: the log's events, in log order, as changes a reader may see.

:class:`ChangeFolder` is handed each event with its log position and keeps, per record, the
aggregate its events rebuild so far, packed (:mod:`membrane_es.aggregates.packed_record`:
a feed over a large log keeps many, and packed they add nothing to what the garbage
collector walks). A change's fields are its record compared with the version before it
(:mod:`membrane_es.queries.field_diff`, the inspector's diff); a creation's are all of its
fields, taken in one walk. A record first met after its creation (a feed resumed past it)
is rebuilt from its events up to the version before, read from the store.

Trust is applied as reads apply it (:mod:`membrane_es.queries.trust`), per record — its
sensitivity and scope are fixed at creation: a record the reader may read in full gives
whole changes; one exactly one level above its ceiling gives changes without content (the
record redacted; no fields, actor or rationale); any other, none. A record whose key is
destroyed decodes without content at every position, so erased content never reaches a
change: its ``Forgotten`` change says that, and when, it was erased.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, Protocol
from uuid import UUID

import msgspec

from membrane_es.aggregates.memory_record import (
    RecordAggregate,
    creation_state,
    state_salience,
    viewed_payload,
    viewed_provenance,
)
from membrane_es.aggregates.packed_record import PackedRecord, pack, pack_state, unpack
from membrane_es.queries.created_fields import added_fields
from membrane_es.queries.field_diff import Refs, record_refs, refs_differences
from membrane_es.queries.trust import Visibility, record_visibility, redact
from membrane_es.schema.changes import Change, FieldChange
from membrane_es.schema.records import MemoryRecord, TrustContext
from membrane_es.timekeeping.decay import salience_at

# How many records' aggregates the fold keeps; one met again after it was let go is rebuilt
# from the store (a few reads), so a feed over a large log stays within bounded memory.
FOLD_RECORDS = 50_000

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_OPERATIONS: dict[type[Any], str] = {}


def operation_of(event: Any) -> str:
    """The event class's name in snake case (``Superseded`` → ``superseded``,
    ``RelationAdded`` → ``relation_added``): every kind of event names itself."""
    cls = type(event)
    name = _OPERATIONS.get(cls)
    if name is None:
        name = _OPERATIONS[cls] = _CAMEL.sub("_", cls.__name__).lower()
    return name


_CREATED = RecordAggregate.Created
_CREATED_OPERATION = _CAMEL.sub("_", _CREATED.__name__).lower()  # operation_of a creation
_RECORD_EVENTS = (RecordAggregate.Created, RecordAggregate.Event)


class VersionLoader(Protocol):
    def load_version(self, key: UUID, version: int) -> RecordAggregate | None:
        """The record's aggregate after its events up to ``version`` (None: none)."""
        ...


class _Folded(msgspec.Struct, gc=False):
    """What the fold keeps of one record: what the reader may see of it, and the record as
    its last event left it, packed (:mod:`~membrane_es.aggregates.packed_record`: nothing
    the garbage collector walks, however many records are kept; None when nothing of it
    is shown)."""

    visibility: Visibility
    packed: PackedRecord | None


class ChangeFolder:
    """Turns events, handed in log order, into the changes ``trust`` may see."""

    def __init__(self, loader: VersionLoader, trust: TrustContext) -> None:
        self._loader = loader
        self._trust = trust
        # By the number of the record's key (an int: a UUID is one more object to track).
        self._records: OrderedDict[int, _Folded] = OrderedDict()
        # What the reader may see of a record, by its sensitivity and scope (fixed at its
        # creation): worked out once per pair, not once per record.
        self._visibility: dict[tuple[str, str], Visibility] = {}

    def change(self, position: int, event: Any) -> Change | None:
        """The change event ``position`` makes, or None where the reader sees nothing of it
        (or it is no record's event)."""
        if type(event) is _CREATED:  # most of a log: the walk of its own, below
            return self._created(position, event)
        if not isinstance(event, _RECORD_EVENTS):
            return None
        key: UUID = event.originator_id
        folded = self._folded(key, event)
        if folded is None or folded.visibility is Visibility.NONE:
            return None  # nothing of it is shown: not even its state is kept
        redacted = folded.visibility is Visibility.REDACTED
        at = event.timestamp
        before: Refs | None = None
        aggregate: RecordAggregate
        if isinstance(event, _CREATED):  # a subclass of the creation
            aggregate = RecordAggregate.from_created(event)
        elif folded.packed is None:
            return None  # never expected: a record is packed as its first event is applied
        else:
            aggregate = unpack(key, folded.packed)
            if not redacted:  # the last version, as its own change showed it
                before = _viewed_refs(aggregate)
            mutated: Any = event.mutate(aggregate)
            aggregate = mutated
        folded.packed = pack(aggregate)
        record = aggregate.view(at)
        fields: list[FieldChange]
        if redacted:
            fields = []
        elif before is None:
            fields = added_fields(record)
        else:
            fields = [
                FieldChange(
                    path=path,
                    kind="added" if was is None else "removed" if now is None else "changed",
                    before=was,
                    after=now,
                )
                for path, was, now in refs_differences(before, record_refs(record))
            ]
        return self._made(position, event, aggregate, record, redacted, fields)

    def _created(self, position: int, event: Any) -> Change | None:
        """:meth:`change` of a record's creation: what most of a log is, so it goes the
        shortest way — nothing before it to view or compare, every field added
        (:mod:`~membrane_es.queries.created_fields`), no aggregate made (its state is built,
        packed and viewed as the aggregate's would be), what :meth:`_folded` and
        :meth:`_made` do written out in place."""
        records = self._records
        number = event.originator_id.int
        content = event.record
        folded = records.get(number)
        if folded is None:
            seen = (content.sensitivity, content.scope)
            visibility = self._visibility.get(seen)
            if visibility is None:
                visibility = self._visibility[seen] = record_visibility(self._trust, *seen)
            folded = records[number] = _Folded(visibility, None)
            if len(records) > FOLD_RECORDS:
                records.popitem(last=False)
        else:
            records.move_to_end(number)
            visibility = folded.visibility
        if visibility is Visibility.NONE:
            return None
        at = event.timestamp
        state = creation_state(content, event.actor, event.rationale, at)
        folded.packed = pack_state(event.originator_version, at, state)
        # The record viewed at its creation (view_state, written out for a new state: its
        # payload and provenance as written, no status, outcome or source added since).
        # Packed already, the state is let go: the record takes its lists, not copies.
        lifecycle = content.lifecycle
        if lifecycle.last_reinforced_at is not state.last_reinforced_at:
            lifecycle = msgspec.structs.replace(lifecycle, last_reinforced_at=at)
        created = content.created_at or at
        record = msgspec.structs.replace(
            content,
            salience=salience_at(
                state.salience_base,
                state.salience_anchor,
                created,
                lifecycle.decay,
                at,
                pinned=state.pinned,
            ),
            created_at=created,
            updated_at=state.updated_at,
            lifecycle=lifecycle,
            relations=state.relations,
            audit_log=state.audit,
        )
        redacted = visibility is Visibility.REDACTED
        return Change(
            position=position,
            log_time=at,
            event_time=record.created_at,
            record_id=record.id,
            version=event.originator_version,
            type=str(record.type),
            scope=record.scope,
            sensitivity=str(record.sensitivity),
            operation=_CREATED_OPERATION,
            action=event.action,
            actor="" if redacted else event.actor,
            rationale="" if redacted else event.rationale,
            redacted=redacted,
            erased=record.payload is None,  # a new state is never forgotten
            fields=[] if redacted else added_fields(record),
            record=redact(record) if redacted else record,
        )

    @staticmethod
    def _made(
        position: int,
        event: Any,
        aggregate: RecordAggregate,
        record: MemoryRecord,
        redacted: bool,
        fields: list[FieldChange],
    ) -> Change:
        return Change(
            position=position,
            log_time=event.timestamp,
            event_time=record.created_at,
            record_id=record.id,
            version=event.originator_version,
            type=str(record.type),
            scope=record.scope,
            sensitivity=str(record.sensitivity),
            operation=operation_of(event),
            action=event.action,
            # Who and why are the audit, which a redacted read withholds.
            actor="" if redacted else event.actor,
            rationale="" if redacted else event.audit_rationale(),
            redacted=redacted,
            erased=aggregate.state.forgotten or record.payload is None,
            fields=fields,
            record=redact(record) if redacted else record,
        )

    def _folded(self, key: UUID, event: Any) -> _Folded | None:
        records = self._records
        number = key.int
        folded = records.get(number)
        if folded is not None:
            records.move_to_end(number)
            return folded
        aggregate: RecordAggregate | None = None
        if isinstance(event, RecordAggregate.Created):
            record = event.record
        else:
            aggregate = self._loader.load_version(key, event.originator_version - 1)
            if aggregate is None:
                return None  # its earlier events are not in the store: nothing to show
            record = aggregate.state.content
        seen = (record.sensitivity, record.scope)
        visibility = self._visibility.get(seen)
        if visibility is None:
            visibility = self._visibility[seen] = record_visibility(self._trust, *seen)
        packed = None  # a created record's is packed once its event is applied
        if aggregate is not None and visibility is not Visibility.NONE:
            packed = pack(aggregate)
        folded = records[number] = _Folded(visibility, packed)
        if len(records) > FOLD_RECORDS:
            records.popitem(last=False)
        return folded


def _viewed_refs(aggregate: RecordAggregate) -> Refs:
    """:func:`~membrane_es.queries.field_diff.record_refs` of the aggregate's record viewed
    at its last event, without viewing it whole (what the diff compares, nothing more). The
    relations are copied: the next event may change the list in place."""
    state = aggregate.state
    content = state.content
    return (
        viewed_payload(state),
        content.tags,
        list(state.relations),
        viewed_provenance(state),
        content.scope,
        content.confidence,
        state_salience(state, aggregate.created_on, aggregate.modified_on),
        state.pinned,
        state.last_reinforced_at,
    )

"""The facade's entries API (seed 003): Arbiter-style memory entries over the same records.

An entry is a memory record (the mapping is in :mod:`membrane_es.schema.entries`): creating
one creates a semantic record, revising one supersedes its record, invalidating one retracts
it. So ``history``, ``verify``, audit and ``as_of`` apply to entries as to every record, and
a record written any other way (capture, gRPC) is an entry too.

Every write takes an optional ``writer``, the :class:`~membrane_es.ceiling.Caller` whose key
asks for it: a write may only touch entries (and create scopes) within that key's ceiling,
as :meth:`~membrane_es.ceiling.Caller.may_write` says. An entry the key cannot see (its
``trust``) is not found; one it can see but may not write, an unscoped entry for a key
limited to some conversations, is a :class:`~membrane_es.errors.CeilingError`. Without a
``writer`` (the Python API, an unauthenticated server) nothing is refused on that ground.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from membrane_es.ceiling import Caller
from membrane_es.commands import messages
from membrane_es.engine.forgetting import Forgetting
from membrane_es.engine.reads import Reads
from membrane_es.engine.revisions import Revisions
from membrane_es.errors import (
    CeilingError,
    ConflictError,
    DuplicateRelationError,
    EntryNotFoundError,
    ForgottenError,
    ValidationError,
)
from membrane_es.projections.entries import EntryIndex
from membrane_es.queries import entries as queries
from membrane_es.queries.entries import EntryPage, EntryQuery, SearchAdvisor
from membrane_es.schema import entries as checks
from membrane_es.schema.entries import (
    ARTIFACT_REF,
    DELETE_RATIONALE,
    MAX_INTEGER,
    Entry,
    EntryPatch,
    EntryRelation,
    NewEntry,
    conversation_scope,
    epoch,
)
from membrane_es.schema.enums import MemoryType, ProvenanceKind, Sensitivity
from membrane_es.schema.payloads import SemanticPayload, Validity
from membrane_es.schema.records import (
    MemoryRecord,
    Provenance,
    ProvenanceSource,
    TrustContext,
)
from membrane_es.schema.rfc3339 import parse_moment
from membrane_es.schema.validation import check_flag, check_limit, check_moment

ENTRY_ACTOR = "entries-api"
_FULL_TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER)
_MILLISECONDS_FROM = 10**12  # a created_at above this is in milliseconds (as Arbiter reads it)
_INDEX_LOCK = threading.Lock()
# A create with supersedes_ids is one batch; one that another process overtook is run again.
BATCH_ATTEMPTS = 16


class Entries(Revisions, Reads, Forgetting):
    """Create, revise, invalidate, delete, relate and read entries."""

    @property
    def entries_view(self) -> EntryIndex:
        """The entries view, caught up with the log (built the first time: from then on it
        is part of the read views, checkpointed with them)."""
        views = self._views
        # Caught up with the log even where a follower applies other processes' writes (as
        # entries reads always were: another process's write is found at once).
        views.catch_up(self._app)
        index = views.entries
        if index is None:
            with _INDEX_LOCK:
                index = views.entries
                if index is None:
                    index = views.entries = EntryIndex()
        # As far as the other views, never past them: a checkpoint of the views holds it.
        index.catch_up(self._app, until=views.position)
        return index

    # --- reads ----------------------------------------------------------------------------

    def list_entries(
        self,
        query: EntryQuery | None = None,
        *,
        trust: TrustContext | None = None,
        tenant: int | str = 0,
        advisor: SearchAdvisor | None = None,
    ) -> EntryPage:
        """Browse (no ``q``) or search entries; see :mod:`membrane_es.queries.entries`."""
        query = checks.check_entry_query(
            "query", EntryQuery() if query is None else query, EntryQuery
        )
        trust, advisor = checks.check_reader(trust, tenant), _check_advisor(advisor)
        index = self.entries_view
        with index.lock:
            return queries.list_entries(
                index, query or EntryQuery(), trust, tenant, epoch(self._clock.peek()), advisor
            )

    def get_entry(
        self, entry_id: int, *, trust: TrustContext | None = None, tenant: int | str = 0
    ) -> Entry:
        """One active entry; :class:`EntryNotFoundError` if absent, deleted or invalidated."""
        entry_id, trust = checks.check_entry_call(entry_id, trust, tenant)
        index = self.entries_view
        with index.lock:
            entry = queries.get_entry(index, entry_id, trust, tenant)
        if entry is None:
            raise EntryNotFoundError(entry_id)
        return entry

    def entry_relations(
        self,
        *,
        trust: TrustContext | None = None,
        tenant: int | str = 0,
        source_id: int | None = None,
        target_id: int | None = None,
        relation: str = "",
        among: Sequence[int] | None = None,
        limit: int = 1000,
    ) -> list[EntryRelation]:
        trust = checks.check_reader(trust, tenant)
        source_id = checks.check_optional_id("source_id", source_id)
        target_id = checks.check_optional_id("target_id", target_id)
        relation = checks.check_relation_kind("relation", relation, optional=True)
        among = checks.check_entry_ids("among", among)
        limit = check_limit("limit", limit, low=1, high=MAX_INTEGER)
        index = self.entries_view
        with index.lock:
            return queries.relations(
                index,
                tenant,
                trust,
                source_id=source_id,
                target_id=target_id,
                relation=relation,
                among=among,
                limit=limit,
            )

    # --- writes ---------------------------------------------------------------------------

    def create_entry(
        self,
        entry: NewEntry,
        *,
        actor: str = ENTRY_ACTOR,
        trust: TrustContext | None = None,
        tenant: int | str = 0,
        writer: Caller | None = None,
    ) -> Entry:
        """Write a new entry; with ``supersedes_ids``, invalidate those entries and relate
        the new one to each by ``supersedes``, all in one atomic write."""
        entry, trust = checks.check_new_entry("entry", entry), checks.check_reader(trust, tenant)
        scope = conversation_scope(entry.conversation_id)
        writer = _checked_writer(writer)
        if writer is not None and not writer.may_write("low", scope):  # entries are written low
            raise CeilingError("conversation_id", "outside the scopes this key may write")
        record = entry_record(entry)
        if not entry.supersedes_ids:  # one command: retried by the engine if overtaken
            created = self.create_record(record, actor=actor, rationale="entry created")
            return self._entry_of_record(created.id, trust, tenant)
        for attempt in range(1, BATCH_ATTEMPTS + 1):
            try:
                with self._write_lock:
                    olds = [
                        self._current_record(entry_id, trust, field="supersedes_ids")
                        for entry_id in dict.fromkeys(entry.supersedes_ids)
                    ]
                    for entry_id in dict.fromkeys(entry.supersedes_ids):
                        self._check_writer(entry_id, writer, field="supersedes_ids")
                    with self.batch():
                        created = self.create_record(record, actor=actor, rationale="entry created")
                        for old in olds:
                            self.retract(old, actor, f"superseded by entry record {created.id}")
                            self.add_relation(created.id, "supersedes", old, actor=actor)
                break
            except ConflictError:
                # Another process wrote first (a later time, or one of the old entries):
                # nothing of this was written; check the old entries again and retry.
                if attempt == BATCH_ATTEMPTS:
                    raise
        return self._entry_of_record(created.id, trust, tenant)

    def revise_entry(
        self,
        entry_id: int,
        patch: EntryPatch,
        *,
        actor: str = ENTRY_ACTOR,
        trust: TrustContext | None = None,
        tenant: int | str = 0,
        writer: Caller | None = None,
    ) -> Entry:
        """A new revision of an active entry (Membrane's supersede: nothing is overwritten).

        A patch that changes no field is refused (:class:`ValidationError` on ``body``) and
        writes nothing: a revision equal to the current one would only add noise to the log."""
        entry_id, trust = checks.check_entry_call(entry_id, trust, tenant)
        patch = checks.check_entry_patch("patch", patch)
        writer = _checked_writer(writer)
        if all(value is msgspec.UNSET for value in msgspec.structs.astuple(patch)):
            raise ValidationError("body", "no field to change: the patch is empty")
        with self._write_lock:
            record_id = self._current_record(entry_id, trust)
            self._check_writer(entry_id, writer)
            current = self.get_entry(entry_id, trust=trust, tenant=tenant)
            old = self.retrieve_by_id(record_id, trust=_FULL_TRUST)
            revised = NewEntry(
                type=_pick(patch.type, current.type),
                title=_pick(patch.title, current.title),
                content=_pick(patch.content, current.content),
                source=_pick(patch.source, current.source),
                tags=_pick(patch.tags, current.tags),
                artifact_id=_pick(patch.artifact_id, current.artifact_id),
                conversation_id=current.conversation_id,
            )
            if _unchanged(revised, current):
                raise ValidationError("body", "no field to change: the patch equals the entry")
            record = msgspec.structs.replace(
                entry_record(revised), sensitivity=old.sensitivity, scope=old.scope
            )
            new = self.supersede(record_id, record, actor, "entry revised")
        return self._entry_of_record(new.id, trust, tenant)

    def invalidate_entry(
        self,
        entry_id: int,
        *,
        when: datetime | int | str | None = None,
        actor: str = ENTRY_ACTOR,
        trust: TrustContext | None = None,
        writer: Caller | None = None,
    ) -> None:
        """End an active entry's validity (Membrane's retract); a second call finds no
        active entry and raises :class:`EntryNotFoundError`.

        :param when: the moment its validity ended, if not now (Arbiter's replayed
            invalidation): epoch seconds, an RFC 3339 moment with its offset, or an aware
            datetime; not before the entry's ``valid_from``. It becomes the entry's
            ``valid_to``, which ``as_of`` reads honour; the invalidation itself is recorded
            now, so active reads drop the entry at once either way."""
        entry_id, trust = checks.check_entry_call(entry_id, trust)
        writer = _checked_writer(writer)
        until = None if when is None else moment_of("when", when)
        with self._write_lock:
            index = self.entries_view
            with index.lock:
                row = queries.current_revision(index, entry_id, trust)
            if row is None:
                raise EntryNotFoundError(entry_id)
            self._check_writer(entry_id, writer)
            if until is not None and epoch(until) < row[10]:
                raise ValidationError("when", f"before the entry's valid_from ({row[10]})")
            self.retract(str(row[2]), actor, "entry invalidated", valid_until=until)

    def delete_entry(
        self,
        entry_id: int,
        *,
        erase: bool = False,
        actor: str = ENTRY_ACTOR,
        trust: TrustContext | None = None,
        writer: Caller | None = None,
    ) -> None:
        """Hide an entry from every entries read, past ones included (a retraction with the
        ``deleted`` mark). Its events stay in the log:
        ``history`` and the record reads still show them.

        With ``erase``, every revision's content is forgotten instead (see
        :meth:`~membrane_es.engine.forgetting.Forgetting.forget`): the log keeps only that the
        entry existed and was erased, by whom and when."""
        entry_id, trust = checks.check_entry_call(entry_id, trust)
        erase = check_flag("erase", erase)
        writer = _checked_writer(writer)
        with self._write_lock:
            index = self.entries_view
            with index.lock:
                found = queries.latest_revision(index, entry_id, trust)
                revisions = queries.revision_records(index, entry_id)
            if found is None:
                raise EntryNotFoundError(entry_id)
            # Erasure forgets every revision, so the key must reach every one.
            self._check_writer(entry_id, writer, every_revision=erase)
            if not erase:
                self.handle(
                    messages.Retract(
                        record_id=found, actor=actor, rationale=DELETE_RATIONALE, deleted=True
                    )
                )
                return
            for record_id in revisions:
                try:
                    self.forget(record_id, actor, DELETE_RATIONALE)
                except ForgottenError:
                    pass  # taken with an earlier revision's erasure

    def relate_entries(
        self,
        source_id: int,
        target_id: int,
        relation: str,
        *,
        actor: str = ENTRY_ACTOR,
        trust: TrustContext | None = None,
        tenant: int | str = 0,
        writer: Caller | None = None,
    ) -> EntryRelation:
        """A directed relation between two entries of this store (no self loops; one per
        (source, target, relation): a repeat raises :class:`DuplicateRelationError`)."""
        source_id = checks.check_entry_id("source_id", source_id)
        target_id = checks.check_entry_id("target_id", target_id)
        relation = checks.check_relation_kind("relation", relation)
        trust = checks.check_reader(trust, tenant)
        writer = _checked_writer(writer)
        if source_id == target_id:
            raise ValidationError("target_id", "self-loops not allowed")
        with self._write_lock:
            index = self.entries_view
            with index.lock:
                source = queries.latest_revision(index, source_id, trust)
                target = queries.latest_revision(index, target_id, trust)
            if source is None:
                raise ValidationError("source_id", f"entry {source_id} not found")
            if target is None:
                raise ValidationError("target_id", f"entry {target_id} not found")
            # The edge changes what both entries read as (their relations): both must be the
            # key's to write.
            self._check_writer(source_id, writer, field="source_id")
            self._check_writer(target_id, writer, field="target_id")
            existing = self.entry_relations(
                trust=trust, source_id=source_id, target_id=target_id, relation=relation
            )
            if existing:
                raise DuplicateRelationError(existing[0].id)
            self.add_relation(source, relation, target, actor=actor)
            (made,) = self.entry_relations(
                trust=trust,
                tenant=tenant,
                source_id=source_id,
                target_id=target_id,
                relation=relation,
            )
        return made

    # --- helpers --------------------------------------------------------------------------

    def _current_record(self, entry_id: int, trust: TrustContext | None, field: str = "") -> str:
        index = self.entries_view
        with index.lock:
            row = queries.current_revision(index, entry_id, trust)
        if row is None:
            if field:
                raise ValidationError(field, f"entry {entry_id} not found or not active")
            raise EntryNotFoundError(entry_id)
        return str(row[2])

    def _check_writer(
        self,
        entry_id: int,
        writer: Caller | None,
        *,
        field: str = "",
        every_revision: bool = False,
    ) -> None:
        """Refuse a write to an entry (one the caller can see) that ``writer``'s key may not
        write: its latest revision, or with ``every_revision`` any of them (``writer`` checked
        by the caller: see :func:`_checked_writer`)."""
        if writer is None or writer.unrestricted:
            return
        index = self.entries_view
        with index.lock:
            reach = queries.revision_reach(index, entry_id, every=every_revision)
        if not all(writer.may_write(sensitivity, scope) for sensitivity, scope in reach):
            raise CeilingError(
                field or "entry", f"entry {entry_id} is outside the scopes this key may write"
            )

    def _entry_of_record(self, record_id: str, trust: TrustContext | None, tenant: Any) -> Entry:
        index = self.entries_view
        with index.lock:
            entry_id = queries.entry_of_record(index, record_id)
        return self.get_entry(entry_id, trust=trust, tenant=tenant)


def _check_advisor(advisor: Any) -> SearchAdvisor | None:
    if advisor is not None and not (
        callable(getattr(advisor, "paraphrase", None))
        and callable(getattr(advisor, "rerank", None))
    ):
        raise ValidationError("advisor", "must be a SearchAdvisor (paraphrase and rerank)")
    return advisor


def _unchanged(revised: NewEntry, current: Entry) -> bool:
    """Whether a revision would read exactly as the entry does now (tags as stored: once
    each, in order)."""
    return (
        revised.type == current.type
        and revised.title == current.title
        and revised.content == current.content
        and revised.source == current.source
        and list(dict.fromkeys(revised.tags)) == current.tags
        and revised.artifact_id == current.artifact_id
    )


def _pick(value: Any, default: Any) -> Any:
    return default if value is msgspec.UNSET else value


def moment_of(field: str, value: datetime | int | str) -> datetime:
    """A moment given as epoch seconds (at least 0), RFC 3339 text with its offset, or an
    aware datetime; anything else is a :class:`ValidationError` naming ``field``."""
    if isinstance(value, bool):
        raise ValidationError(field, "a moment: epoch seconds or RFC 3339 text")
    if isinstance(value, int):
        if not 0 <= value <= MAX_INTEGER:
            raise ValidationError(field, f"{value} is not a moment (epoch seconds >= 0)")
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise ValidationError(field, f"{value} is not a moment") from None
    if isinstance(value, str):
        moment = parse_moment(value, field)
        assert moment is not None
        return check_moment(field, moment)
    if isinstance(value, datetime):
        return check_moment(field, value)
    raise ValidationError(field, "a moment: epoch seconds or RFC 3339 text")


def entry_time(value: int) -> datetime:
    """An entry's ``created_at`` override (seconds, or milliseconds above 10¹²)."""
    seconds = value / 1000 if value > _MILLISECONDS_FROM else value
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise ValidationError("created_at", f"{value} is not a moment") from None


def entry_record(entry: NewEntry) -> MemoryRecord:
    """The semantic record an entry is stored as (see :mod:`membrane_es.schema.entries`)."""
    validity = Validity()
    if entry.created_at is not None:
        validity = Validity(mode="timeboxed", start=entry_time(entry.created_at))
    sources = [ProvenanceSource(kind=ProvenanceKind.EVENT, ref="memory-entries")]
    if entry.artifact_id:
        sources.append(
            ProvenanceSource(kind=ProvenanceKind.ARTIFACT, ref=f"{ARTIFACT_REF}{entry.artifact_id}")
        )
    return MemoryRecord(
        type=MemoryType.SEMANTIC,
        scope=conversation_scope(entry.conversation_id),
        tags=list(dict.fromkeys(entry.tags)),  # a record's tags are distinct
        payload=SemanticPayload(
            subject=entry.title, predicate=entry.type, object=entry.content, validity=validity
        ),
        provenance=Provenance(sources=sources, created_by=entry.source),
    )


def _checked_writer(writer: object) -> Caller | None:
    """``writer`` as given, once it is known to be a caller (or None)."""
    if writer is not None and not isinstance(writer, Caller):
        raise ValidationError("writer", f"must be a Caller or None, not {type(writer).__name__}")
    return writer

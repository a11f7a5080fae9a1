"""The facade's entries API (seed 003): Arbiter-style memory entries over the same records.

An entry is a memory record (the mapping is in :mod:`membrane_es.schema.entries`): creating
one creates a semantic record, revising one supersedes its record, invalidating one retracts
it; each write is one command (:mod:`membrane_es.commands.entries`), run and retried as
every command is. So ``history``, ``verify``, audit and ``as_of`` apply to entries as to
every record, and a record written any other way (capture, gRPC) is an entry too.

Every write takes an optional ``writer``, the :class:`~membrane_es.access.ceiling.Caller` whose key
asks for it: a write may only touch entries (and create scopes) within that key's ceiling,
as :meth:`~membrane_es.access.ceiling.Caller.may_write` says. An entry the key cannot see (its
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

from membrane_es.access.ceiling import Caller
from membrane_es.commands import messages
from membrane_es.commands.entries import entry_record
from membrane_es.engine.core import EngineCore
from membrane_es.engine.event_store_unit_of_work import EventStoreUnitOfWork
from membrane_es.errors import CeilingError, EntryNotFoundError, ValidationError
from membrane_es.projections.entries import EntryIndex
from membrane_es.queries import entries as queries
from membrane_es.queries.entries import EntryPage, EntryQuery, SearchAdvisor
from membrane_es.queries.entry_reads import EntryViewReads
from membrane_es.schema import entries as checks
from membrane_es.schema.entries import (
    MAX_INTEGER,
    Entry,
    EntryPatch,
    EntryRelation,
    NewEntry,
    conversation_scope,
    epoch,
)
from membrane_es.schema.records import TrustContext
from membrane_es.schema.rfc3339 import parse_moment
from membrane_es.schema.validation import check_flag, check_limit, check_moment

ENTRY_ACTOR = "entries-api"
_INDEX_LOCK = threading.Lock()


class Entries(EngineCore):
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

    # --- writes: one command each (membrane_es.commands.entries) ---------------------------

    def _unit_of_work(self) -> EventStoreUnitOfWork:
        uow = super()._unit_of_work()
        uow.entry_reads = EntryViewReads(lambda: self.entries_view)
        return uow

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
        record_id: str = self.handle(
            messages.CreateEntry(
                record=entry_record(entry),
                supersedes=tuple(entry.supersedes_ids),
                trust=trust,
                writer=writer,
                actor=actor,
            )
        )
        return self._entry_of_record(record_id, trust, tenant)

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
        record_id: str = self.handle(
            messages.ReviseEntry(
                entry_id=entry_id,
                patch=patch,
                trust=trust,
                tenant=tenant,
                writer=writer,
                actor=actor,
            )
        )
        return self._entry_of_record(record_id, trust, tenant)

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
        self.handle(
            messages.InvalidateEntry(
                entry_id=entry_id, valid_until=until, trust=trust, writer=writer, actor=actor
            )
        )

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
        ``deleted`` mark). Its events stay in the log: ``history`` and the record reads still
        show them.

        With ``erase``, every revision's content is forgotten instead (see
        :meth:`~membrane_es.engine.forgetting.Forgetting.forget`): the log keeps only that the
        entry existed and was erased, by whom and when."""
        entry_id, trust = checks.check_entry_call(entry_id, trust)
        erase = check_flag("erase", erase)
        writer = _checked_writer(writer)
        self.handle(
            messages.DeleteEntry(
                entry_id=entry_id, erase=erase, trust=trust, writer=writer, actor=actor
            )
        )

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
        with self._write_lock:  # the edge read back is this write's
            self.handle(
                messages.RelateEntries(
                    source_id=source_id,
                    target_id=target_id,
                    relation=relation,
                    trust=trust,
                    writer=writer,
                    actor=actor,
                )
            )
            (made,) = self.entry_relations(
                trust=trust,
                tenant=tenant,
                source_id=source_id,
                target_id=target_id,
                relation=relation,
            )
        return made

    # --- helpers --------------------------------------------------------------------------

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


def _checked_writer(writer: object) -> Caller | None:
    """``writer`` as given, once it is known to be a caller (or None)."""
    if writer is not None and not isinstance(writer, Caller):
        raise ValidationError("writer", f"must be a Caller or None, not {type(writer).__name__}")
    return writer

"""The entries vocabulary: Arbiter's memory entries and relations as JSON shapes, and how a
memory record reads as an entry.

An entry is a memory record (DESIGN §2), so this module only *reads* records as entries; it
never stores anything of its own. The mapping:

=====================  ==================================================================
entry field            where it lives in the record
=====================  ==================================================================
``id``                 the ``number`` written in the ``Created`` event of the entry's first
                       record: its place among the store's (the tenant's) records, taken
                       under the lock that orders the log (see
                       :mod:`membrane_es.stores.record_numbers`); events from before numbers read
                       as their place, the same number. Unique, increasing, never reused,
                       but not dense: every record takes a number, so ids skip the ones
                       that revisions (each a new record) and other records took
``record_id``          the record holding the entry's current revision (its UUID)
``type``               a semantic record's ``predicate`` when it is one of the six entry
                       types; otherwise by memory type (semantic, entity → reference;
                       episodic, working → context; competence → learning; plan_graph →
                       project)
``title``              a semantic record's ``subject`` (an entity id capture put there read
                       as the entity's name); otherwise the record's trigger text
``content``            a semantic record's ``object`` (text); otherwise its search text
``source``             ``provenance.created_by``
``tags``               ``tags``
``conversation_id``    scope ``conversation:<n>``; any other scope reads as unscoped (null)
``artifact_id``        a provenance source of kind ``artifact`` with ref ``artifact:<n>``
``valid_from``         a semantic record's ``validity.start`` (a backfilled ``created_at``),
                       else the moment the record was written
``valid_to``           when the entry's validity ended: the ``valid_until`` of the
                       retraction that invalidated it (``/invalidate``'s ``when``), else
                       that retraction's time (also a supersede by ``supersedes_ids``, a
                       merge, a delete); null while the entry is active
``created_at``         ``valid_from`` of the entry's first record
``updated_at``         the moment the entry's current revision was written (its first
                       revision: ``created_at``)
=====================  ==================================================================

A revision (``PATCH``) is Membrane's *supersede*: a new record replaces the old one, which is
retracted, and the new record continues the old one's entry (same ``id``). Invalidation is
*retract*. ``DELETE`` is a retraction marked ``deleted`` (its rationale
:data:`DELETE_RATIONALE`): the entry is then hidden from every entries read, past ones
included, while its events stay in the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from membrane_es.errors import ValidationError
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.records import TrustContext
from membrane_es.schema.validation import (
    MAX_IDS,
    as_list,
    check_limit,
    check_struct,
    check_text,
    check_trust,
)

Q = TypeVar("Q", bound=msgspec.Struct)

ENTRY_TYPES = ("user", "feedback", "project", "reference", "learning", "context")
RELATION_KINDS = ("relates_to", "refines", "contradicts", "supersedes", "supports")
# The rationale of a DELETE's retraction: what its audit entry says, and what marked a
# deletion in events written before retractions said so themselves.
DELETE_RATIONALE = "entry deleted"
CONVERSATION_SCOPE = "conversation:"
ARTIFACT_REF = "artifact:"

TITLE_MAX = 200
CONTENT_MAX = 65_536
SOURCE_MAX = 200
TAGS_MAX = 32
TAG_MAX = 64

# How a record that was not written as an entry reads as one.
TYPE_OF_MEMORY = {
    MemoryType.SEMANTIC: "reference",
    MemoryType.ENTITY: "reference",
    MemoryType.EPISODIC: "context",
    MemoryType.WORKING: "context",
    MemoryType.COMPETENCE: "learning",
    MemoryType.PLAN_GRAPH: "project",
}

Title = Annotated[str, msgspec.Meta(min_length=1, max_length=TITLE_MAX)]
Content = Annotated[str, msgspec.Meta(max_length=CONTENT_MAX)]
Source = Annotated[str, msgspec.Meta(max_length=SOURCE_MAX)]
Tag = Annotated[str, msgspec.Meta(min_length=1, max_length=TAG_MAX)]
Tags = Annotated[list[Tag], msgspec.Meta(max_length=TAGS_MAX)]
MAX_INTEGER = 2**63 - 1  # ids and times are SQLite (64-bit) integers
Epoch = Annotated[int, msgspec.Meta(ge=0, le=MAX_INTEGER)]
PositiveId = Annotated[int, msgspec.Meta(ge=0, le=MAX_INTEGER)]
EntryId = Annotated[int, msgspec.Meta(ge=-MAX_INTEGER, le=MAX_INTEGER)]
EntryType = Literal["user", "feedback", "project", "reference", "learning", "context"]
RelationKind = Literal["relates_to", "refines", "contradicts", "supersedes", "supports"]


class NewEntry(msgspec.Struct, kw_only=True, frozen=True):
    """``POST /v1/memory/entries``: a new entry (``conversation_id`` 0 or null: unscoped;
    ``created_at``: a backfill, in seconds or milliseconds, that also sets ``valid_from``)."""

    type: EntryType
    title: Title
    content: Content = ""
    source: Source = ""
    tags: Tags = msgspec.field(default_factory=list)
    artifact_id: PositiveId | None = None
    conversation_id: PositiveId | None = None
    created_at: Epoch | None = None
    supersedes_ids: list[EntryId] = msgspec.field(default_factory=list)


class EntryPatch(msgspec.Struct, kw_only=True, frozen=True):
    """``PATCH /v1/memory/entries/{id}``: the fields a revision changes (absent: kept;
    ``artifact_id: null``: cleared)."""

    type: EntryType | msgspec.UnsetType = msgspec.UNSET
    title: Title | msgspec.UnsetType = msgspec.UNSET
    content: Content | msgspec.UnsetType = msgspec.UNSET
    source: Source | msgspec.UnsetType = msgspec.UNSET
    tags: Tags | msgspec.UnsetType = msgspec.UNSET
    artifact_id: PositiveId | None | msgspec.UnsetType = msgspec.UNSET


class NewRelation(msgspec.Struct, kw_only=True, frozen=True):
    """``POST /v1/memory/relations``."""

    source_id: EntryId
    target_id: EntryId
    relation: RelationKind


class EntryFields(msgspec.Struct, frozen=True, kw_only=True):
    """What a record says as an entry (its content only; ids and times come from the log)."""

    type: str
    title: str
    content: str
    source: str
    tags: list[str]
    conversation_id: int | None
    artifact_id: int | None
    valid_from: int | None  # None: the moment the record was written


# --- checks of what Python callers pass (HTTP requests are decoded into the same shapes) -----


def check_entry_id(field: str, value: Any) -> int:
    """An entry id: an integer of at most 64 bits (ids are positive; others find nothing)."""
    return check_limit(field, value, low=-MAX_INTEGER, high=MAX_INTEGER)


def check_optional_id(field: str, value: Any) -> int | None:
    return None if value is None else check_entry_id(field, value)


def check_entry_ids(field: str, values: Sequence[int] | None) -> list[int] | None:
    if values is None:
        return None
    ids = as_list(field, values)
    if len(ids) > MAX_IDS:
        raise ValidationError(field, f"too many ids: {len(ids)} (max {MAX_IDS})")
    return [check_entry_id(f"{field}[{i}]", value) for i, value in enumerate(ids)]


def check_relation_kind(field: str, value: Any, *, optional: bool = False) -> str:
    """One of the relation kinds (with ``optional``, also "": any)."""
    if not (isinstance(value, str) and (value in RELATION_KINDS or (optional and not value))):
        raise ValidationError(field, f"must be one of: {', '.join(RELATION_KINDS)}")
    return value


def check_reader(trust: Any, tenant: Any) -> TrustContext | None:
    """An entries call's trust (None: no limit) and tenant id (an integer or text, echoed in
    what it returns)."""
    if isinstance(tenant, bool) or not isinstance(tenant, int | str):
        raise ValidationError("tenant", "must be an integer or text")
    if isinstance(tenant, int):
        check_entry_id("tenant", tenant)
    else:
        check_text("tenant", tenant)
    return None if trust is None else check_trust(trust)


def check_entry_call(entry_id: Any, trust: Any, tenant: Any = 0) -> tuple[int, TrustContext | None]:
    """The entry id, trust and tenant of a call on one entry."""
    return check_entry_id("entry_id", entry_id), check_reader(trust, tenant)


def check_new_entry(field: str, value: Any) -> NewEntry:
    entry = check_struct(field, value, NewEntry)
    _check_title(f"{field}.title", entry.title)
    return entry


def check_entry_patch(field: str, value: Any) -> EntryPatch:
    patch = check_struct(field, value, EntryPatch)
    if isinstance(patch.title, str):
        _check_title(f"{field}.title", patch.title)
    return patch


def _check_title(field: str, title: str) -> None:
    """A title names the entry: it has words (it is stored as given, spaces and all)."""
    if not title.strip():
        raise ValidationError(field, "must not be blank")


Limit = Annotated[int, msgspec.Meta(ge=1, le=MAX_INTEGER)]


class _QueryShape(msgspec.Struct, kw_only=True):
    """What the fields of an entries query (:class:`~membrane_es.queries.entries.EntryQuery`,
    which the HTTP layer builds from checked parameters) may hold, by name. A field this does
    not name is not checked here."""

    q: str = ""
    types: tuple[EntryType, ...] = ()
    tag: str = ""
    conversation_id: PositiveId | None = None
    graduated: bool = False
    intent: bool = True
    as_of: Epoch | None = None
    since: Epoch | None = None
    before_updated_at: Epoch | None = None
    limit: Limit = 1
    decay: bool = False
    expand: str = ""
    rerank: str = ""
    rerank_fine: str = ""
    explain: bool = False


def check_entry_query(field: str, value: Any, kind: type[Q]) -> Q:
    """An entries query made in Python: a ``kind`` whose fields hold what they may."""
    return check_struct(field, value, kind, _QueryShape)


def conversation_scope(conversation_id: int | None) -> str:
    """The record scope of an entry pinned to a conversation ("" for an unscoped one)."""
    return f"{CONVERSATION_SCOPE}{conversation_id}" if conversation_id else ""


def epoch(moment: datetime) -> int:
    """Whole epoch seconds (the entries API's time unit), rounded down."""
    return int(moment.timestamp() // 1)


# --- the wire shapes ----------------------------------------------------------------------


class Entry(msgspec.Struct, kw_only=True):
    """One entry as the entries API returns it (Arbiter's shape plus ``record_id``)."""

    id: int
    tenant_id: int | str
    type: str
    title: str
    content: str
    source: str
    tags: list[str]
    artifact_id: int | None
    conversation_id: int | None
    valid_from: int
    valid_to: int | None
    created_at: int
    updated_at: int
    record_id: str


class EntryRelation(msgspec.Struct, kw_only=True):
    """A directed, typed edge between two entries."""

    id: int
    tenant_id: int | str
    source_id: int
    target_id: int
    relation: str
    created_at: int


class Artifact(msgspec.Struct, kw_only=True):
    """The artifact an entry links to (membrane_es keeps no artifact catalogue: its id)."""

    id: int


class HydratedEntry(Entry, kw_only=True):
    """``GET /v1/memory/entries/{id}``: the entry, its artifact and its relations."""

    artifact: Artifact | None = None
    relations: list[EntryRelation] = msgspec.field(default_factory=list)

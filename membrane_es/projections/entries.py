"""The entries view: every record read as an Arbiter memory entry, in SQLite with FTS5.

The same engine as the record text index (:mod:`membrane_es.projections.text_index`), with the
tokenizer the entries API specifies: Porter stemming over ``unicode61`` with diacritics
removed, and four columns (title, content, tags, source) so BM25 can weigh them 10/4/8/2.

Append-only like every content index: one row per *record* (a revision of an entry), never
updated except to note when it stopped being the entry's current revision (``ended``) and
why (``revised``, ``invalidated``, ``deleted``), and, when the entry is invalidated, the
end of its validity (``valid_to``: the moment of the invalidation, or the one it names). A
forgotten (erased) record's text is removed outright, and its entry leaves every read. So
the entries as they stood at any past moment are one query (``as_of``: the revision current
then, if the entry's validity window covers that moment).

It follows the notification log with its own position (:meth:`EntryIndex.catch_up`), and
can be rebuilt from the log at any time; it holds nothing the log does not. It is built the
first time entries are read, and from then on checkpointed with the other read views
(:meth:`EntryIndex.save`, :meth:`EntryIndex.load`: a file in the sealed checkpoint), so a
restart follows the log only from where the checkpoint left it.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import msgspec

from membrane_es.aggregates.identity import record_key
from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.embedding.record_text import search_text, subject_name, trigger_text
from membrane_es.projections.folding import fold
from membrane_es.projections.log_pages import LogReader, NotificationSource
from membrane_es.projections.tokens import TOKENIZER
from membrane_es.schema.entries import (
    ARTIFACT_REF,
    CONVERSATION_SCOPE,
    ENTRY_TYPES,
    RELATION_KINDS,
    TITLE_MAX,
    TYPE_OF_MEMORY,
    EntryFields,
    epoch,
)
from membrane_es.schema.enums import ProvenanceKind, Sensitivity
from membrane_es.schema.payloads import SemanticPayload
from membrane_es.schema.records import MemoryRecord, Relation

PAGE = 500
# The layout of a saved entries view (SQLite's user_version): a checkpoint of another layout
# is not loaded, and the view is built from the log instead. Format 2: an entry's title as it
# was given (format 1 trimmed its spaces); format 3: words in every language (folded text,
# the word index's tokenizer: membrane_es.projections.folding).
SAVED_FORMAT = 3
_STATE = msgspec.json.Encoder()
SENSITIVITY_RANK = {level.value: rank for rank, level in enumerate(Sensitivity)}
_TAGS_JSON = msgspec.json.Encoder()

_SCHEMA = f"""
CREATE VIRTUAL TABLE fts USING fts5(title, content, tags, source, tokenize="{TOKENIZER}");
CREATE TABLE rev (
    row INTEGER PRIMARY KEY,      -- also the fts rowid
    entry INTEGER NOT NULL,
    record_key TEXT NOT NULL UNIQUE, -- the aggregate id (what events name)
    record_id TEXT NOT NULL,
    type TEXT NOT NULL,
    title TEXT NOT NULL,
    content TEXT NOT NULL,
    source TEXT NOT NULL,
    tags TEXT NOT NULL,           -- the JSON array, as the tag filter matches it
    conversation INTEGER,
    artifact INTEGER,
    valid_from INTEGER NOT NULL,
    created_at INTEGER NOT NULL,  -- the entry's
    updated_at INTEGER NOT NULL,  -- this revision's
    recorded INTEGER NOT NULL,    -- when this revision was written (epoch seconds)
    ended INTEGER,                -- when it stopped being current
    end_kind TEXT,                -- revised | invalidated | deleted
    valid_to INTEGER,             -- when the entry stopped being valid (invalidated, deleted)
    first INTEGER NOT NULL,       -- 1: the entry's first revision
    hidden INTEGER NOT NULL DEFAULT 0, -- the entry was deleted: no read shows any revision
    sensitivity INTEGER NOT NULL,
    scope TEXT NOT NULL
);
CREATE INDEX rev_current ON rev(end_kind, updated_at, row);
CREATE INDEX rev_entry ON rev(entry, row);
CREATE TABLE rel (
    id INTEGER PRIMARY KEY,
    source_record TEXT NOT NULL,  -- aggregate ids
    target_record TEXT NOT NULL,
    relation TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX rel_source ON rel(source_record);
CREATE INDEX rel_target ON rel(target_record);
CREATE TABLE state (one INTEGER PRIMARY KEY CHECK (one = 1), body TEXT NOT NULL);
"""


class _SavedState(msgspec.Struct, frozen=True):
    """What a saved view knows beyond its tables."""

    position: int
    creations: int
    relations: int
    rows: int
    continues: dict[str, tuple[int, int]]


def _derived_title(text: str, record: MemoryRecord) -> str:
    """The title of a record not written as an entry: its text, trimmed to a title's length,
    or its type and id when it has no words."""
    return text.strip()[:TITLE_MAX] or f"{record.type.value} {record.id}"


def entry_fields(record: MemoryRecord) -> EntryFields:
    """A record read as an entry (the mapping is in :mod:`membrane_es.schema.entries`)."""
    payload = record.payload
    valid_from: int | None = None
    if isinstance(payload, SemanticPayload):
        if payload.validity.start is not None:
            valid_from = epoch(payload.validity.start)
        if payload.predicate in ENTRY_TYPES and isinstance(payload.object, str):
            # written as an entry: its title reads back exactly as it was given
            kind, title, content = payload.predicate, payload.subject, payload.object
        else:  # a fact: its subject, an entity id capture put there read as its name
            kind, title, content = "reference", subject_name(record), search_text(record)
            title = _derived_title(title, record)
    else:
        kind = TYPE_OF_MEMORY.get(record.type, "context")
        content = search_text(record)
        title = _derived_title(trigger_text(record) or content, record)
    return EntryFields(
        type=kind,
        title=title,
        content=content,
        source=record.provenance.created_by,
        tags=list(record.tags),
        conversation_id=_number_after(CONVERSATION_SCOPE, record.scope),
        artifact_id=next(
            (
                number
                for source in record.provenance.sources
                if source.kind is ProvenanceKind.ARTIFACT
                and (number := _number_after(ARTIFACT_REF, source.ref)) is not None
            ),
            None,
        ),
        valid_from=valid_from,
    )


def _number_after(prefix: str, text: str) -> int | None:
    if text.startswith(prefix):
        digits = text[len(prefix) :]
        if digits.isascii() and digits.isdigit() and len(digits) < 19:
            return int(digits)
    return None


class EntryIndex:
    """Entries, their revisions and relations, and the log position they reflect."""

    def __init__(self, saved: bytes | None = None) -> None:
        """An empty view, or (``saved``) the bytes of a file :meth:`save` wrote."""
        self.db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        try:
            if saved is None:
                self.db.executescript(_SCHEMA)
            else:
                self.db.deserialize(saved)  # schema and rows as saved: nothing made to drop
            # An erased record's text is overwritten, so no saved copy of the view holds it.
            self.db.execute("PRAGMA secure_delete = ON")
        except BaseException:
            self.db.close()
            raise
        self.lock = threading.RLock()
        self.position = 0
        self._creations = 0  # Created events seen (an unnumbered one's number is its place)
        self._relations = 0
        # A supersede's new record continues the old one's entry; the Superseded event may
        # come before the new record's Created event (same write), so it waits here.
        self._continues: dict[str, tuple[int, int]] = {}
        self._rows = 0  # rows written (the last row's number)
        # New rows not written yet: a page's creations go in with one statement per table,
        # written before any other event is applied (it may name them).
        self._new_revisions: list[tuple[Any, ...]] = []
        self._new_documents: list[tuple[int, str, str, str, str]] = []
        # A page erased text: its terms leave the index's segments (merged anew) before the
        # page commits, so neither memory nor a saved copy keeps them.
        self._erased = False

    # --- following the log ----------------------------------------------------------------

    def catch_up(self, source: NotificationSource, until: int | None = None) -> None:
        """Apply every notification after :attr:`position` (up to ``until``, if given), a
        page per transaction."""
        with self.lock:
            reader = LogReader(source)
            while True:
                limit = PAGE if until is None else min(PAGE, until - self.position)
                if limit <= 0:
                    return
                page = reader.page(self.position + 1, limit)
                if not page.count:
                    return
                self.db.execute("BEGIN")
                rows = self._rows
                try:
                    for event in page.events:
                        self.apply(event)
                    self._write_new_rows()
                    if self._erased:
                        self.db.execute("INSERT INTO fts(fts) VALUES ('optimize')")
                except BaseException:
                    self.db.execute("ROLLBACK")
                    self._rows = rows
                    self._new_revisions.clear()
                    self._new_documents.clear()
                    raise
                finally:
                    self._erased = False
                self.db.execute("COMMIT")
                self.position = page.last_id
                if page.count < limit:
                    return

    def apply(self, event: Any) -> None:
        """Reflect one event (rows it creates are written by :meth:`_write_new_rows`)."""
        if isinstance(event, RecordAggregate.Created):
            self._created(event.record, epoch(event.timestamp), event.number)
            return
        if self._new_revisions and isinstance(event, RecordAggregate.Event):
            self._write_new_rows()
        if isinstance(event, RecordAggregate.Superseded):
            self._superseded(event)
        elif isinstance(event, RecordAggregate.Retracted):
            kind = "deleted" if event.deleted else "invalidated"
            until = event.valid_until
            valid_to = None if until is None else epoch(until)
            self._end(str(event.originator_id), epoch(event.timestamp), kind, valid_to)
        elif isinstance(event, RecordAggregate.MergedInto):
            self._end(str(event.originator_id), epoch(event.timestamp), "invalidated")
        elif isinstance(event, RecordAggregate.Forgotten):
            self._forgotten(str(event.originator_id), epoch(event.timestamp))
        elif isinstance(event, RecordAggregate.RelationAdded):
            self._related(str(event.originator_id), event.relation, epoch(event.timestamp))

    def _created(self, record: MemoryRecord, at: int, number: int) -> None:
        self._creations += 1
        fields = entry_fields(record)
        key = str(record_key(record.id))
        continued = self._continues.pop(key, None)
        if continued is None:
            # The record's number (events from before numbers: its position among the
            # log's creations, which is the number it would have been given).
            entry = number or self._creations
            created_at = at if fields.valid_from is None else fields.valid_from
            updated_at = created_at
        else:
            entry, created_at = continued
            updated_at = at
        first = continued is None
        if first:
            valid_from = created_at
        else:
            self._write_new_rows()
            valid_from = self._valid_from(entry)
        tags = _TAGS_JSON.encode(fields.tags).decode()
        self._rows += 1
        row = self._rows
        self._new_revisions.append(
            (
                row,
                entry,
                key,
                record.id,
                fields.type,
                fields.title,
                fields.content,
                fields.source,
                tags,
                fields.conversation_id,
                fields.artifact_id,
                valid_from,
                created_at,
                updated_at,
                at,
                int(first),
                SENSITIVITY_RANK[record.sensitivity.value],
                record.scope,
            )
        )
        self._new_documents.append(
            (
                row,
                fold(fields.title),
                fold(fields.content),
                fold(" ".join(fields.tags)),
                fold(fields.source),
            )
        )
        for relation in record.relations:
            self._related(key, relation, at)

    def _write_new_rows(self) -> None:
        if not self._new_revisions:
            return
        self.db.executemany(
            "INSERT INTO rev(row, entry, record_key, record_id, type, title, content, source,"
            " tags, conversation, artifact, valid_from, created_at, updated_at, recorded,"
            " first, sensitivity, scope)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self._new_revisions,
        )
        self.db.executemany(
            "INSERT INTO fts(rowid, title, content, tags, source) VALUES (?, ?, ?, ?, ?)",
            self._new_documents,
        )
        self._new_revisions.clear()
        self._new_documents.clear()

    def _valid_from(self, entry: int) -> int:
        (valid_from,) = self.db.execute(
            "SELECT valid_from FROM rev WHERE entry = ? ORDER BY row LIMIT 1", (entry,)
        ).fetchone()
        return int(valid_from)

    def _superseded(self, event: Any) -> None:
        old_id = str(event.originator_id)
        at = epoch(event.timestamp)
        found = self.db.execute(
            "SELECT entry, created_at FROM rev WHERE record_key = ?", (old_id,)
        ).fetchone()
        if found is None:
            return
        entry, created_at = found
        self._end(old_id, at, "revised")
        new_key = str(record_key(event.by_id))
        new = self.db.execute("SELECT row FROM rev WHERE record_key = ?", (new_key,))
        row = new.fetchone()
        if row is None:  # the new record's Created event comes next
            self._continues[new_key] = (entry, created_at)
            return
        # The new record came first and was taken for an entry of its own: it continues
        # the old one instead (its own id is never used again).
        self.db.execute(
            "UPDATE rev SET entry = ?, created_at = ?, valid_from = ? WHERE row = ?",
            (entry, created_at, self._valid_from(entry), row[0]),
        )

    def _end(self, key: str, at: int, kind: str, valid_to: int | None = None) -> None:
        """The record stops being its entry's current revision at ``at``; unless it was
        revised, the entry's validity ends too (at ``valid_to``, else ``at``)."""
        ended = self.db.execute(
            "UPDATE rev SET ended = ?, end_kind = ? WHERE record_key = ? AND ended IS NULL",
            (at, kind, key),
        ).rowcount
        if ended and kind != "revised":
            # On every revision so far: the one current at a past moment reports it.
            self.db.execute(
                "UPDATE rev SET valid_to = ? WHERE valid_to IS NULL"
                " AND entry = (SELECT entry FROM rev WHERE record_key = ?)",
                (at if valid_to is None else valid_to, key),
            )
        if kind == "deleted":
            self.db.execute(
                "UPDATE rev SET hidden = 1"
                " WHERE entry = (SELECT entry FROM rev WHERE record_key = ?)",
                (key,),
            )

    def _forgotten(self, key: str, at: int) -> None:
        """An erased record: its text leaves the view, and its entry leaves every read."""
        found = self.db.execute("SELECT row FROM rev WHERE record_key = ?", (key,)).fetchone()
        if found is None:
            return
        self._end(key, at, "deleted")
        self.db.execute(
            "UPDATE rev SET title = '', content = '', source = '', tags = '[]' WHERE row = ?",
            found,
        )
        self.db.execute("DELETE FROM fts WHERE rowid = ?", found)
        self._erased = True

    def _related(self, source_key: str, relation: Relation, at: int) -> None:
        if relation.predicate not in RELATION_KINDS:
            return
        self._relations += 1
        self.db.execute(
            "INSERT INTO rel(id, source_record, target_record, relation, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                self._relations,
                source_key,
                str(record_key(relation.target_id)),
                relation.predicate,
                at,
            ),
        )

    # --- checkpoints ------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write the view and the log position it reflects to the file ``path``."""
        with self.lock:
            state = _SavedState(
                self.position, self._creations, self._relations, self._rows, self._continues
            )
            self.db.execute(
                "INSERT OR REPLACE INTO state(one, body) VALUES (1, ?)",
                (_STATE.encode(state).decode(),),
            )
            target = sqlite3.connect(path)
            try:
                self.db.backup(target)
                target.execute(f"PRAGMA user_version = {SAVED_FORMAT}")
                target.commit()
            finally:
                target.close()

    @classmethod
    def load(cls, path: Path) -> EntryIndex | None:
        """The view saved in ``path``; None if it was saved in another layout."""
        index = cls(path.read_bytes())
        (saved_format,) = index.db.execute("PRAGMA user_version").fetchone()
        if saved_format != SAVED_FORMAT:
            index.close()
            return None
        (body,) = index.db.execute("SELECT body FROM state").fetchone()
        state = msgspec.json.decode(body, type=_SavedState)
        index.position, index._creations = state.position, state.creations
        index._relations, index._rows = state.relations, state.rows
        index._continues = dict(state.continues)
        return index

    def close(self) -> None:
        self.db.close()

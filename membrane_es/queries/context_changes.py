"""What changed, said on a context line, from the history the store already keeps.

A model told ``Dana city: Lisbon`` and ``Dana city: Faro`` side by side cannot know which is
true now. Every revision is an event with its links, so a line says it briefly, in
parentheses before its ref:

- a fact that replaced another (``supersede``; the new fact's ``revision.supersedes`` or a
  ``supersedes`` relation): ``Dana city: Faro (since 2026-11-29; was Lisbon)`` — *since* is
  the fact's validity start, else the moment it was recorded; *was* the old object (the old
  fact whole when its subject or predicate differ);
- another record that replaced one: ``(revised 2026-11-29)``;
- a fact itself replaced or retracted, when a read packs it at all: ``(superseded
  2026-11-30; now Faro)`` — following the chain of replacements to the current value —
  or ``(retracted)``;
- an episode whose derived fact (capture's ``derived_semantic`` link) was since replaced or
  retracted: the same note as that fact's, ``(superseded 2026-11-30; now 220 USD)``;
- of two facts still both active with the same subject and predicate and different objects
  (a predicate the store does not know to be single-valued keeps both), the older is marked
  ``(older; newer: Faro)`` when the newer is among the candidates too.

Every lookup goes through the caller's trust: a record the caller may not read in full is
treated as absent, so a note never shows words the caller could not read.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from membrane_es.queries.context_words import Namer, fact_object, fact_words, no_names
from membrane_es.schema.payloads import SemanticPayload
from membrane_es.schema.records import MemoryRecord

Lookup = Callable[[str], MemoryRecord | None]
"""A record id -> the record as of the read's moment, or None when the caller may not read
it in full (or it does not exist)."""

SUPERSEDES = "supersedes"
DERIVED = "derived_semantic"
MAX_CHAIN = 16  # replacements followed to the current value (a cycle cannot loop forever)
WAS_CHARACTERS = 80  # the most of an old value a note repeats


def day(moment: datetime | None) -> str:
    return moment.astimezone(UTC).date().isoformat() if moment is not None else ""


def change_note(record: MemoryRecord, lookup: Lookup, name: Namer = no_names) -> str:
    """The note for ``record``'s line ("" when nothing changed)."""
    payload = record.payload
    if isinstance(payload, SemanticPayload):
        revision = payload.revision
        if revision is not None and (revision.superseded_by or revision.status == "retracted"):
            return replaced_note(revision.superseded_by, lookup, name)
        replaced = (revision.supersedes if revision is not None else "") or _related(
            record, SUPERSEDES
        )
        if replaced:
            since = day(payload.validity.start or record.created_at)
            was = _was(lookup(replaced), record, name)
            return f"since {since}; was {was}" if was else f"since {since}"
        return ""
    if _related(record, SUPERSEDES):
        return f"revised {day(record.created_at)}"
    for relation in record.relations:
        if relation.predicate != DERIVED:
            continue
        fact = lookup(relation.target_id)
        payload = fact.payload if fact is not None else None
        revision = payload.revision if isinstance(payload, SemanticPayload) else None
        if revision is not None and (revision.superseded_by or revision.status == "retracted"):
            return replaced_note(revision.superseded_by, lookup, name)
    return ""


def replaced_note(by: str, lookup: Lookup, name: Namer) -> str:
    """``superseded <day>; now <value>`` following ``by``'s own replacements to the current
    record; ``retracted`` when nothing replaced it; ``superseded`` when the caller may not
    read what did."""
    if not by:
        return "retracted"
    current = lookup(by)
    if current is None:
        return "superseded"
    when = day(current.created_at)
    for _ in range(MAX_CHAIN):
        payload = current.payload
        revision = payload.revision if isinstance(payload, SemanticPayload) else None
        following = lookup(revision.superseded_by) if revision and revision.superseded_by else None
        if following is None:
            break
        current = following
    value = fact_object(current, name) or _short(fact_words(current, name))
    return f"superseded {when}; now {_short(value)}" if value else f"superseded {when}"


def _was(old: MemoryRecord | None, new: MemoryRecord, name: Namer) -> str:
    if old is None:
        return ""
    before, after = old.payload, new.payload
    if (
        isinstance(before, SemanticPayload)
        and isinstance(after, SemanticPayload)
        and (before.subject, before.predicate) == (after.subject, after.predicate)
    ):
        return _short(fact_object(old, name))
    return _short(fact_words(old, name))


def _related(record: MemoryRecord, predicate: str) -> str:
    return next((r.target_id for r in record.relations if r.predicate == predicate), "")


def _short(text: str) -> str:
    return text if len(text) <= WAS_CHARACTERS else text[: WAS_CHARACTERS - 1].rstrip() + "…"


def older_notes(facts: list[tuple[tuple[str, str], str, datetime, str]]) -> dict[str, str]:
    """Notes for facts still active beside a newer one with the same subject and predicate
    and another object: ``facts`` as ``((subject, predicate), object, recorded at, id)``;
    the answer maps an older fact's id to ``older; newer: <object>``."""
    newest: dict[tuple[str, str], tuple[datetime, str, str]] = {}
    for key, value, at, record_id in facts:
        if key not in newest or (at, record_id) > newest[key][:2]:
            newest[key] = (at, record_id, value)
    notes = {}
    for key, value, _, record_id in facts:
        _, newest_id, newest_value = newest[key]
        if record_id != newest_id and value.casefold() != newest_value.casefold():
            notes[record_id] = f"older; newer: {_short(newest_value)}"
    return notes

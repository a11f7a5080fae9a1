"""Records as an agent reads them: what a memory says, not how it is kept.

A full record carries its words up to three times (timeline summary, captured content, the
interpretation's summary) beside lifecycle, audit and provenance: thousands of characters a
model pays for and rarely needs. The compact form keeps ``id``, ``type``, ``text`` (the words,
as a context line has them), ``at`` (event time) and, where the read ranked it, ``score``;
``who`` when a conversation turn names its speaker; ``redacted`` when the reader may not see
its content. The full record stays one read away (``get`` with ``detail``).

Every compact answer is bounded, here and nowhere else, so no surface can forget to be:

- a record's ``text`` is cut at :data:`TEXT_CHARACTERS` (at a space when there is one near)
  and ends with a marker saying how much is left out and how to read it —
  ``… [1,046,552 more characters: get 1b2c…]`` — beside ``"more_characters": 1046552``;
  ``get`` answers the record's whole text (:func:`whole`);
- an answer's records (``retrieve``'s ``records``, ``retrieve_graph``'s ``nodes``,
  ``list``'s ``records``) stop before their JSON would pass :data:`ANSWER_CHARACTERS` (the
  first is always kept); the answer then says how many were left out, ``"omitted": 12``,
  with a ``"note"`` on how to see them, and keeps only the explanations and edges of the
  records it holds.

So a compact answer stays under about ``ANSWER_CHARACTERS`` + ``TEXT_CHARACTERS`` characters
whatever the store holds (a context is bounded by its own token budget).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from membrane_es.queries.context_words import speaker_of, words_of
from membrane_es.schema.capture import CaptureMemoryResult
from membrane_es.schema.records import MemoryRecord
from membrane_es.schema.results import (
    ContextResult,
    ExplainedRetrieveGraphResult,
    ExplainedRetrieveResult,
    RetrieveGraphResult,
    RetrieveResult,
    SelectionResult,
)
from membrane_es.schema.timestamps import rfc3339

Json = dict[str, Any]
SCORE_DIGITS = 3
TEXT_CHARACTERS = 2_000  # of one record's text in a compact answer (about 500 tokens)
ANSWER_CHARACTERS = 40_000  # of a compact answer's records, as JSON (about 10,000 tokens)
WORD_SEARCH = 80  # how far back from the cut a space is looked for


def record(item: MemoryRecord, score: float | None = None, *, cap: bool = True) -> Json:
    """One record, compactly; its text cut at :data:`TEXT_CHARACTERS` unless ``cap`` is
    False."""
    out: Json = {"id": item.id, "type": str(item.type)}
    who = speaker_of(item)
    if who:
        out["who"] = who
    words = words_of(item)
    text, more = cut(words, item.id) if cap else (words, 0)
    out["text"] = text
    if more:
        out["more_characters"] = more
    out["at"] = rfc3339(item.created_at)  # exact: a moment to read as_of
    if score is not None:
        out["score"] = round(score, SCORE_DIGITS)
    if not words and item.payload is None:
        out["redacted"] = True
    if item.resolution is not None:  # a write's answer: what resolution on write did
        out["resolution"] = msgspec.to_builtins(item.resolution)
    return out


def whole(item: MemoryRecord) -> Json:
    """One record compactly with its whole text (``get``: where a cut text says to look)."""
    return record(item, cap=False)


def cut(text: str, record_id: str, limit: int = TEXT_CHARACTERS) -> tuple[str, int]:
    """``text`` within ``limit`` characters, with a marker saying how much more there is and
    how to read it; and how many characters were left out (0: none)."""
    if len(text) <= limit:
        return text, 0
    end = limit
    space = text.rfind(" ", limit - WORD_SEARCH, limit)
    if space > 0:
        end = space
    head = text[:end].rstrip()
    more = len(text) - len(head)
    return f"{head} … [{more:,} more characters: get {record_id}]", more


def records(
    items: Sequence[MemoryRecord], scores: Sequence[float | None] | None = None
) -> list[Json]:
    """Records compactly, each text cut (see :func:`bounded` for the answer's bound)."""
    if scores is None:
        return [record(item) for item in items]
    return [record(item, score) for item, score in zip(items, scores, strict=True)]


def bounded(
    items: list[Json], limit: int = ANSWER_CHARACTERS, beside: dict[str, Any] | None = None
) -> tuple[list[Json], int]:
    """The first of ``items`` whose JSON — with what the answer holds ``beside`` each, by
    id (its explanation) — fits in ``limit`` characters (at least one), and how many were
    left out."""
    size = 0
    for place, item in enumerate(items):
        size += len(msgspec.json.encode(item)) + 1
        if beside is not None and item["id"] in beside:
            size += len(msgspec.json.encode(beside[item["id"]])) + 1
        if size > limit and place > 0:
            return items[:place], len(items) - place
    return items, 0


def _note_omitted(out: Json, omitted: int, what: str) -> None:
    if omitted:
        out["omitted"] = omitted
        out["note"] = (
            f"{omitted} more {what} left out to keep this answer under "
            f"{ANSWER_CHARACTERS:,} characters: ask for fewer (a lower limit, narrower "
            "filters) or get ID for one"
        )


def listed(items: Sequence[MemoryRecord]) -> Json:
    """A list of records, bounded: ``records``, and ``omitted`` / ``note`` when cut."""
    kept, omitted = bounded(records(items))
    out: Json = {"records": kept}
    _note_omitted(out, omitted, "records")
    return out


def retrieved(result: RetrieveResult, explain: bool = False) -> Json:
    """A ranked read: its records with their scores (a read made with ``explain``), the
    selector's verdict as ids, and with ``explain`` the explanations themselves."""
    scores = None
    if isinstance(result, ExplainedRetrieveResult):
        scores = [explanation.score for explanation in result.explanations]
    explained = explain and isinstance(result, ExplainedRetrieveResult)
    beside = _explanations(result) if explained else None
    kept, omitted = bounded(records(result.records, scores), beside=beside)
    out: Json = {"records": kept}
    _note_omitted(out, omitted, "records")
    if result.selection is not None:
        out["selection"] = selection(result.selection)
    if explain and isinstance(result, ExplainedRetrieveResult):
        held = {item["id"] for item in kept}
        out["explanations"] = msgspec.to_builtins(
            [e for e in result.explanations if e.record_id in held]
        )
        if result.searched_toward:
            out["searched_toward"] = result.searched_toward
    return out


def graph(result: RetrieveGraphResult, explain: bool = False) -> Json:
    """A neighbourhood: nodes (each with its hop, 0 for a root, and a root's score when the
    read was explained) and edges as ``[source, predicate, target]``; with ``explain`` the
    roots' explanations."""
    scores: dict[str, float | None] = {}
    if isinstance(result, ExplainedRetrieveGraphResult):
        scores = {e.record_id: e.score for e in result.explanations}
    nodes = []
    for node in result.nodes:
        item = record(node.record, scores.get(node.record.id))
        item["hop"] = node.hop
        nodes.append(item)
    explained = explain and isinstance(result, ExplainedRetrieveGraphResult)
    kept, omitted = bounded(nodes, beside=_explanations(result) if explained else None)
    held = {item["id"] for item in kept}
    out: Json = {
        "nodes": kept,
        "edges": [
            [edge.source_id, edge.predicate, edge.target_id]
            for edge in result.edges
            if edge.source_id in held and edge.target_id in held
        ],
    }
    _note_omitted(out, omitted, "nodes (and their edges)")
    if result.selection is not None:
        out["selection"] = selection(result.selection)
    if explain and isinstance(result, ExplainedRetrieveGraphResult):
        out["explanations"] = msgspec.to_builtins(
            [e for e in result.explanations if e.record_id in held]
        )
        if result.searched_toward:
            out["searched_toward"] = result.searched_toward
    return out


def _explanations(result: RetrieveResult | RetrieveGraphResult) -> dict[str, Any]:
    explanations = getattr(result, "explanations", None) or []
    return {e.record_id: msgspec.to_builtins(e) for e in explanations}


def selection(result: SelectionResult) -> Json:
    return {
        "selected": [item.id for item in result.selected],
        "confidence": round(result.confidence, SCORE_DIGITS),
        "needs_more": result.needs_more,
    }


def captured(result: CaptureMemoryResult) -> Json:
    """A capture: the primary record under ``record`` (as every answer holding one record
    has it), the ids of the records it made beside it under ``created``, and under
    ``resolved`` each derived fact that reinforced or superseded what was known."""
    out: Json = {
        "record": record(result.primary_record),
        "created": [item.id for item in result.created_records],
    }
    resolutions = [
        {"id": item.id, **msgspec.to_builtins(item.resolution)}
        for item in (*result.created_records, *result.resolved_records)
        if item.resolution is not None and item.resolution.outcome != "created"
    ]
    if resolutions:  # a derived fact reinforced, or superseding, what was known
        out["resolved"] = resolutions
    return out


def context(result: ContextResult) -> Json:
    """A context: its text, the ids it holds, and its size against the budget."""
    return {
        "text": result.text,
        "ids": result.ids,
        "tokens": result.tokens,
        "budget_tokens": result.budget_tokens,
    }

"""Records as an agent reads them: what a memory says, not how it is kept.

A full record carries its words up to three times (timeline summary, captured content, the
interpretation's summary) beside lifecycle, audit and provenance: thousands of characters a
model pays for and rarely needs. The compact form keeps ``id``, ``type``, ``text`` (the words,
as a context line has them), ``at`` (event time) and, where the read ranked it, ``score``;
``who`` when a conversation turn names its speaker; ``redacted`` when the reader may not see
its content. The full record stays one read away (``get`` with ``detail``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from membrane_es.queries.context import speaker_of, words_of
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


def record(item: MemoryRecord, score: float | None = None) -> Json:
    """One record, compactly."""
    out: Json = {"id": item.id, "type": str(item.type)}
    who = speaker_of(item)
    if who:
        out["who"] = who
    words = words_of(item)
    out["text"] = words
    out["at"] = rfc3339(item.created_at)  # exact: a moment to read as_of
    if score is not None:
        out["score"] = round(score, SCORE_DIGITS)
    if not words and item.payload is None:
        out["redacted"] = True
    if item.resolution is not None:  # a write's answer: what resolution on write did
        out["resolution"] = msgspec.to_builtins(item.resolution)
    return out


def records(
    items: Sequence[MemoryRecord], scores: Sequence[float | None] | None = None
) -> list[Json]:
    if scores is None:
        return [record(item) for item in items]
    return [record(item, score) for item, score in zip(items, scores, strict=True)]


def retrieved(result: RetrieveResult, explain: bool = False) -> Json:
    """A ranked read: its records with their scores (a read made with ``explain``), the
    selector's verdict as ids, and with ``explain`` the explanations themselves."""
    scores = None
    if isinstance(result, ExplainedRetrieveResult):
        scores = [explanation.score for explanation in result.explanations]
    out: Json = {"records": records(result.records, scores)}
    if result.selection is not None:
        out["selection"] = selection(result.selection)
    if explain and isinstance(result, ExplainedRetrieveResult):
        out["explanations"] = msgspec.to_builtins(result.explanations)
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
    out: Json = {
        "nodes": nodes,
        "edges": [[edge.source_id, edge.predicate, edge.target_id] for edge in result.edges],
    }
    if result.selection is not None:
        out["selection"] = selection(result.selection)
    if explain and isinstance(result, ExplainedRetrieveGraphResult):
        out["explanations"] = msgspec.to_builtins(result.explanations)
        if result.searched_toward:
            out["searched_toward"] = result.searched_toward
    return out


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

"""The semantic-extraction hook of consolidation (spec §5.5 "LLM semantic extractor", §5.7).

An engine's consolidation may be given an :class:`Extractor` (an LLM, rules, anything): it
reads an episode's text (:func:`~membrane_es.commands.consolidation.episodic_content`) and
returns the memorable facts in it as subject–predicate–object triples. A triple may be a
:class:`Triple`, a mapping with those keys, or a 3-sequence. Whatever the extractor raises
counts the episode as skipped (it is offered again on the next run).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import msgspec


class Triple(msgspec.Struct, frozen=True, kw_only=True):
    """One fact an extractor found: ``subject`` ``predicate`` ``object``."""

    subject: str
    predicate: str
    object: str


TripleLike = Triple | Mapping[str, Any] | Sequence[Any]


class Extractor(Protocol):
    """Finds the memorable facts in an episode's text."""

    def extract(self, content: str) -> Iterable[TripleLike]: ...


def clean_triples(found: Iterable[TripleLike] | None) -> list[Triple]:
    """The triples trimmed, those with a blank (or non-text) part dropped, exact duplicates
    dropped; the order kept."""
    unique: dict[Triple, None] = {}
    for item in found or ():
        triple = _as_triple(item)
        if triple is not None:
            unique.setdefault(triple, None)
    return list(unique)


def _as_triple(item: TripleLike) -> Triple | None:
    if isinstance(item, Triple):
        parts: Sequence[Any] = (item.subject, item.predicate, item.object)
    elif isinstance(item, Mapping):
        parts = (item.get("subject"), item.get("predicate"), item.get("object"))
    elif isinstance(item, Sequence) and not isinstance(item, str | bytes) and len(item) == 3:
        parts = tuple(item)
    else:
        return None
    if not all(isinstance(part, str) and part.strip() for part in parts):
        return None
    subject, predicate, obj = (str(part).strip() for part in parts)
    return Triple(subject=subject, predicate=predicate, object=obj)

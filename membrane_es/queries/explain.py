"""Why each record placed where it did: the evidence of a ranked read, per record.

``retrieve(..., explain=True)`` and ``retrieve_graph(..., explain=True)`` return, beside the
records, one :class:`~membrane_es.schema.results.Explanation` per ranked record (per root for
a graph): the cosine similarity with the query vector and the vector evidence it gave, the
lexical evidence (BM25 as the fraction of a full match), the time evidence (whether it
happened in a period the descriptor names), the conversation turns whose words its lexical
score counted beside its own, the relevance they combine to, the
salience at the moment the read answered for, a graph root's boost, the score it was ordered
by, and whether the caller's trust returned it in full or redacted. A read ``as_of`` T
explains itself as of T: every figure is the one that read used.

A record returned redacted is explained by its rank, its salience (metadata the redacted copy
shows anyway) and ``trust: redacted`` alone: its score and every part of it are withheld
(None), so a reader cannot probe what a record above its trust is about by asking questions
and reading how well each one matched; nor by its rank, which its content does not set
(:func:`membrane_es.queries.ranking.redacted_last`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.queries.snapshot import Snapshot
from membrane_es.schema.results import Explanation

Array = npt.NDArray[Any]


@dataclass(frozen=True)
class Evidence:
    """What a ranking knew of each candidate it kept, aligned with its ranked rows: cosine
    similarity (NaN: none), vector evidence, lexical evidence, relevance (None: the read had
    no evidence and ordered by salience), the score it was ordered by, and time evidence
    (None: the descriptor named no period)."""

    similarity: Array | None
    vector: Array | None
    lexical: Array | None
    relevance: Array | None
    score: Array
    timing: Array | None = None
    passage: Array | None = None  # the passage of a long text its similarity is of (0: none)
    speaker: Array | None = None  # 1: said by someone the descriptor names (None: it names none)


@dataclass(frozen=True)
class Placed:
    """One ranked record: its row, whether it is returned redacted, and its salience."""

    row: int
    redacted: bool
    salience: float


def explain_rows(
    placed: list[Placed],
    evidence: Evidence | None,
    positions: dict[int, int],
    ids: list[str],
    moment: datetime,
    boosts: dict[int, float] | None = None,
    searched_with: dict[int, list[str]] | None = None,
) -> list[Explanation]:
    """An explanation per placed record, in their order; ``positions`` maps a row to its
    index in ``evidence`` (a row without one — an entity a graph root joined by name — had
    no evidence of its own); ``boosts`` maps a graph root's row to its boost, already added
    to its score; ``searched_with`` maps a row to the ids of the turns whose words its
    lexical score counted."""
    out = []
    for rank, item in enumerate(placed, start=1):
        boost = 0.0 if item.redacted else (boosts or {}).get(item.row, 0.0)
        at = positions.get(item.row)
        score: float | None = boost
        similarity = vector = lexical = relevance = timing = None
        passage = speaker = None
        if item.redacted:
            score = None  # withheld, and every part of it: see the module's docstring
        elif evidence is not None and at is not None:
            score = boost + float(evidence.score[at])
            similarity = _value(evidence.similarity, at)
            vector = _value(evidence.vector, at)
            lexical = _value(evidence.lexical, at)
            relevance = _value(evidence.relevance, at)
            timing = _value(evidence.timing, at)
            speaker = _value(evidence.speaker, at)
            if evidence.passage is not None and evidence.passage[at] > 0:
                passage = int(evidence.passage[at])
        out.append(
            Explanation(
                record_id=ids[item.row],
                rank=rank,
                score=score,
                vector_similarity=similarity,
                vector_score=vector,
                lexical_score=lexical,
                time_score=timing,
                passage=passage,
                speaker_score=speaker,
                searched_with=(searched_with or {}).get(item.row, []),
                relevance=relevance,
                salience=item.salience,
                boost=boost,
                trust="redacted" if item.redacted else "full",
                moment=moment,
            )
        )
    return out


def _value(values: Array | None, at: int) -> float | None:
    if values is None:
        return None
    value = float(values[at])
    return None if np.isnan(value) else value


def turns_searched_with(
    snapshot: Snapshot, evidence: Evidence | None, placed: list[Placed]
) -> dict[int, list[str]]:
    """For each placed record returned in full, the ids of the turns it was said after that
    existed at the snapshot's moment and were not erased: the words its lexical score
    counted beside its own (none when the read had no lexical evidence; a record returned
    redacted had none either)."""
    if evidence is None or evidence.lexical is None:
        return {}
    rows = np.array([item.row for item in placed if not item.redacted], dtype=np.int64)
    if not len(rows):
        return {}
    text, ids = snapshot.views.text, snapshot.table.ids
    places, earlier = text.said_after.earlier_of(rows)
    kept = (earlier < snapshot.size) & (text.own_lengths(earlier) >= 0)
    found: dict[int, list[str]] = {}
    for place, row in zip(places[kept].tolist(), earlier[kept].tolist(), strict=True):
        found.setdefault(int(rows[place]), []).append(ids[row])
    return found

"""How retrieval orders records: relevance evidence blended with salience, deterministically.

Without a task descriptor (and without a query vector) records are ordered by salience, as
in the reference. With one, each candidate gets

    score = relevance · (EVIDENCE_WEIGHT + SALIENCE_WEIGHT · min(salience, 1))

the reference's split (spec §3.3: 0.7 vector + 0.3 salience) applied as a discount rather
than a sum: a memory that has faded completely keeps 70 % of what its match with the task is
worth, and a record that does not match the task at all scores 0 however salient it is. In the
reference's sum, salience alone is worth 0.3 — as much as 43 % of a full match — so in a store
that lives for months a fresh record sharing nothing with the task outranks the old one that
answers it; here salience orders records whose evidence is close, and orders records without
evidence (as the tie-break), but cannot buy a place with no evidence at all. *Relevance* is
widened from vector rank alone to every kind of evidence the engine holds for the descriptor:

* **vector**: cosine similarity between the query vector (the caller's, or the engine's
  embedder reading the descriptor) and the record's stored vector, relative to the best
  candidate's (divided by it; negative counts as none). Models differ widely in how high
  their cosines go, so the best match counts 1 whatever the model, as in the reference,
  whose vector score is relative too (1 − rank / N);
* **lexical**: BM25 of the descriptor's words against the record's search text, as the
  fraction of a full match (:func:`membrane_es.queries.lexical.coverage`): comparable across
  stores, so a record sharing one common word with the task gets little, not the full
  credit of "best lexical match". A record shorter than average can pass a full match; the
  fractions are then divided by the best candidate's instead (:func:`lexical_evidence`),
  which bounds them by 1 without clipping: clipping would tie every record at or past a full
  match, and a turn whose own words match would tie one that merely holds them among the
  longer text of its conversational context.

* **time**: when the descriptor names a period ("on 1 February, 2023", "in October 2023",
  "last week": :mod:`membrane_es.queries.periods`), 1 for a record whose event time is
  within it and 0 otherwise: a question that says when is answered by what happened then.

* **speaker**: when the descriptor names a participant of a captured conversation
  ("Where has Melanie camped?", or a chat's role by person:
  :mod:`membrane_es.projections.speakers`), 1 for the turns that participant said and 0
  otherwise: a question about what someone did is answered by what they said, not by what
  others said to them.

Time, speaker and saying when are evidence *about* an answer, not of one: what Melanie said
last week answers "where did Melanie camp last week?" only as far as it is about camping.
Each is therefore worth what the record's match in meaning and words is worth (the content
signals' average, in [0, 1]): a turn of the named speaker, in the named week, that shares
nothing with the question gains nothing from either, and among turns that match the
question equally, the one said by the person it names, when it names, comes first. Without
a content signal (no embedder, no word of the task searched) they count as they are.

The signals present are averaged with the shares below (a signal is present when at least
one candidate has some of that evidence; time, speaker or saying when that every candidate
has, beside a content signal, tells none from another and is left out). So without an
embedder relevance is the lexical evidence alone, a descriptor that names no period (or a
period nothing happened in) gets no time evidence; a record the task gives no evidence for
scores 0, and ``retrieve`` leaves it out (graph roots fall back to salience order when
nothing matches). The weights are fixed by construction — the reference's split, and equal
shares for each kind of evidence — not fitted to any dataset.

A record returned redacted (one level above the caller's trust) has no content evidence: its
words, meaning and speaker are not the caller's to see, so they neither place it nor decide
whether a task lists it (only its event time, which the redacted copy shows, can). Where a
task ranks, it comes after every record the caller reads in full, redacted ones ordered
among themselves by the tie-breaks alone (:func:`redacted_last`): a reader who asks question
after question learns nothing of a hidden record from where it ranks.

Ties, wherever an order is produced, are broken by salience (higher first), then creation
time (newer first), then id (ascending), so equal inputs give the same order every time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]

EVIDENCE_WEIGHT = 0.7  # spec §3.3 hybrid: the share of "how well it matches the task"
SALIENCE_WEIGHT = 0.3  # ... and of "how important it still is": the most fading takes away
VECTOR_SHARE = 0.5  # within relevance: semantic similarity
LEXICAL_SHARE = 0.5  # ... and shared words
TIME_SHARE = 0.5  # ... and happening when the task says
SPEAKER_SHARE = 0.5  # ... and said by someone the task names
DATED_SHARE = 0.5  # ... and saying when, for a task that asks when


def relative(scores: Array) -> Array:
    """Scores divided by the best one (negative scores count as 0); all zeros if none is > 0."""
    positive = np.maximum(np.nan_to_num(scores, nan=0.0), 0.0)
    best = positive.max(initial=0.0)
    return positive / best if best > 0 else np.zeros_like(positive)


def lexical_evidence(coverage: Array) -> Array:
    """Lexical coverage in [0, 1]: as it is while no candidate passes a full match, else
    relative to the best candidate's (see above)."""
    coverage = np.maximum(np.nan_to_num(coverage, nan=0.0), 0.0)
    return coverage / max(1.0, float(coverage.max(initial=0.0)))


def relevance(
    similarity: Array | None,
    lexical: Array | None,
    timing: Array | None = None,
    speaker: Array | None = None,
    dated: Array | None = None,
) -> Array | None:
    """How well each candidate matches the task, in [0, 1], from cosine similarities (NaN:
    no vector), lexical coverage, time evidence (1: it happened in a period the task
    names), speaker evidence (1: said by someone the task names) and, for a task that asks
    when, whether it says when (1: it does) — the last three each worth what its match in
    meaning and words is worth (saying "last week" answers a question about when only if it
    is about what was asked); None when there is no evidence at all."""
    content = []
    for share, scores in (
        (VECTOR_SHARE, None if similarity is None else relative(similarity)),
        (LEXICAL_SHARE, None if lexical is None else lexical_evidence(lexical)),
    ):
        if scores is not None and scores.any():
            content.append((share, scores))
    signals = list(content)
    # How well each candidate matches the task itself: what time, speaker and saying when
    # are worth for it (see above); None without a content signal.
    matched = (
        sum(share * scores for share, scores in content) / sum(share for share, _ in content)
        if content
        else None
    )
    about = [(TIME_SHARE, timing), (SPEAKER_SHARE, speaker)]
    if matched is not None:  # saying when counts only as far as the record is about the task
        about.insert(0, (DATED_SHARE, dated))
    for share, scores in about:
        if scores is None or not scores.any():
            continue
        if matched is not None and scores.all():
            # Every candidate has it (a period the whole store falls in, a store of one
            # speaker's turns): it tells none from another, so it takes no share from the
            # evidence that does (and no rounding of its own reorders near ties).
            continue
        signals.append((share, scores if matched is None else scores * matched))
    if not signals:
        return None
    total = sum(share for share, _ in signals)
    combined = np.zeros_like(signals[0][1])
    for share, scores in signals:
        combined += share * scores
    return combined / total


def blend(relevance: Array, salience: Array) -> Array:
    """Relevance discounted by how faded each record is (see above)."""
    return relevance * (EVIDENCE_WEIGHT + SALIENCE_WEIGHT * np.clip(salience, 0.0, 1.0))


REDACTED_PLACE = -1.0
"""The score a redacted record is ordered by in a ranked read: below every record scored by
its evidence (≥ 0), the same for every redacted record, so salience, newer, then id order them."""


def redacted_last(primary: Array, redacted: Array) -> Array:
    """``primary`` with each redacted candidate's score replaced by :data:`REDACTED_PLACE`."""
    return np.where(redacted, REDACTED_PLACE, primary)


def order(
    primary: Array,
    salience: Array,
    created_at: Array,
    id_of: Callable[[int], str],
    limit: int = 0,
) -> Array:
    """Indices that sort candidates by ``primary`` (higher first) with the tie-breaks above;
    only the first ``limit`` when ``limit`` > 0. ``id_of(i)`` is candidate ``i``'s id."""
    count = len(primary)
    picks = np.arange(count)
    if 0 < limit < count:
        # Everything that can reach the top ``limit``: ties at the cut-off stay in.
        cutoff = np.partition(primary, count - limit)[count - limit]
        picks = picks[primary >= cutoff]
    keys = (-created_at[picks], -salience[picks], -primary[picks])
    ranked = picks[np.lexsort(keys)]
    ranked = _break_ties_by_id(ranked, (primary, salience, created_at), id_of)
    return ranked[:limit] if limit > 0 else ranked


def _break_ties_by_id(ranked: Array, keys: tuple[Array, ...], id_of: Callable[[int], str]) -> Array:
    """Within runs equal on every key, order by id (numpy cannot cheaply sort strings)."""
    if len(ranked) < 2:
        return ranked
    same = np.ones(len(ranked) - 1, dtype=bool)
    for key in keys:
        values = key[ranked]
        same &= values[1:] == values[:-1]
    if not same.any():
        return ranked
    ranked = ranked.copy()
    edges = np.diff(np.concatenate(([0], same.astype(np.int8), [0])))
    for start, end in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True):
        ranked[start : end + 1] = sorted(ranked[start : end + 1], key=lambda i: id_of(int(i)))
    return ranked

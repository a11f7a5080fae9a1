"""Lexical evidence: Okapi BM25 of a task descriptor against each record's search text.

Scored from the text index's raw statistics restricted to the records that existed at the
snapshot's moment (term occurrences, document lengths, document count), so a score read
``as_of`` T is the score a live read computed at T: documents written later change neither
the inverse document frequencies nor the average length. (FTS5's built-in ``bm25()`` uses
the statistics of the whole index, which is why it is not used here.)

The formula is the usual one with Lucene's non-negative IDF::

    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
    bm25(q, d)  = Σ_t∈q idf(t) · tf(t, d) · (K1 + 1) / (tf(t, d) + K1 · (1 − B + B · |d| / avgdl))

over the distinct stemmed content words of the descriptor.

:func:`coverage` turns it into a fraction: BM25 divided by the score of a record that holds
every known query word once at average length (Σ idf over the query words some record
holds), capped at 1 — "how much of what the task says, weighted by how telling each word is,
this record says". Words no record holds are left out: task descriptors are natural language,
and a word the store has never seen tells nothing about which record fits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.text import TextIndex

Array = npt.NDArray[Any]

K1 = 1.2  # term-frequency saturation (the customary value, also FTS5's)
B = 0.75  # length normalisation (likewise)


def bm25(text: TextIndex, query: str, size: int) -> tuple[Array, float] | None:
    """BM25 of every row below ``size`` (0 where no query word occurs), and Σ idf over the
    query words some row holds; None when no row holds any (or there are no content words)."""
    postings = text.postings(query, size)
    if not any(len(rows) for rows, _ in postings):
        return None
    documents, tokens = text.corpus(size)
    average = tokens / documents if documents else 1.0
    scores = np.zeros(size, dtype=np.float64)
    ceiling = 0.0
    for rows, counts in postings:
        frequency = len(rows)
        if frequency:
            idf = float(np.log1p((documents - frequency + 0.5) / (frequency + 0.5)))
            ceiling += idf
            lengths = np.maximum(text.lengths(rows), 0)
            norm = K1 * (1.0 - B + B * lengths / max(average, 1e-9))
            scores[rows] += idf * counts * (K1 + 1.0) / (counts + norm)
    return scores, ceiling


def coverage(text: TextIndex, query: str, size: int) -> Array | None:
    """BM25 as a fraction in [0, 1] of a full match (see above), for every row below ``size``;
    None when no row holds a query word."""
    scored = bm25(text, query, size)
    if scored is None:
        return None
    scores, ceiling = scored
    return np.minimum(scores / ceiling, 1.0) if ceiling > 0 else np.zeros_like(scores)

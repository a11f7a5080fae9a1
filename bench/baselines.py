"""Plain retrieval baselines over a list of texts, for the benchmarks to measure the engine by.

* ``bm25``: SQLite FTS5 BM25 (porter unicode61, as the engine's text index), every word of the
  question OR-ed — stop words included, so "what", "did", "when" match almost every text;
* ``bm25-content``: the same index, only the question's words the engine itself searches by
  (its tokenizer and stop words: :func:`membrane_es.projections.tokens.query_terms`);
* ``cosine``: the embedder's cosine between the question and each text;
* ``rrf`` / ``rrf-content``: reciprocal-rank fusion (k = 60) of a BM25 ranking and cosine's;
* ``minmax`` / ``minmax-content``: each score scaled to [0, 1] over the texts, averaged.

"The best baseline" of a figure is the strongest of all of them on that figure
(:func:`best`): only a lead over the strongest simple method is worth reporting.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.folding import fold
from membrane_es.projections.tokens import STOP_TERMS, TOKENIZER, tokens

RRF_K = 60
LEXICAL = ("bm25", "bm25-content")
BASELINES = ("bm25", "bm25-content", "cosine", "rrf", "minmax", "rrf-content", "minmax-content")

Vectors = npt.NDArray[np.float32]
Scores = npt.NDArray[np.float64]


class Bm25:
    """SQLite FTS5 BM25 over the texts (the engine's tokenizer, texts and questions folded as
    the engine folds them), the question's words OR-ed."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.count = len(texts)
        self._db = sqlite3.connect(":memory:")
        self._db.execute(f'CREATE VIRTUAL TABLE texts USING fts5(body, tokenize="{TOKENIZER}")')
        folded = [(row, fold(text)) for row, text in enumerate(texts)]
        self._db.executemany("INSERT INTO texts(rowid, body) VALUES (?, ?)", folded)

    def scores(self, question: str, content_only: bool = False) -> Scores:
        """BM25 of every text (0 where no word matches), higher is better; with
        ``content_only``, the question's stop words (the engine's) are not searched."""
        words = list(dict.fromkeys(re.findall(r"[^\s!-/:-@\[-`{-~]+", fold(question))))
        if content_only:
            words = [word for word in words if set(tokens(word)) - STOP_TERMS]
        out = np.zeros(self.count, dtype=np.float64)
        if not words:
            return out
        match = " OR ".join(f'"{word}"' for word in words)
        for row, value in self._db.execute(
            "SELECT rowid, -bm25(texts) FROM texts WHERE texts MATCH ?", (match,)
        ):
            out[row] = value
        return out

    def close(self) -> None:
        self._db.close()


def top(
    scores: npt.NDArray[Any], limit: int, present: npt.NDArray[np.bool_] | None = None
) -> list[int]:
    """Indices by score, best first (ties by index); only where ``present`` when given."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    if present is not None:
        order = order[present[order]]
    return [int(i) for i in order[:limit]]


def rrf(limit: int, *rankings: list[int]) -> list[int]:
    fused: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for place, item in enumerate(ranking):
            fused[item] += 1.0 / (RRF_K + place + 1)
    return sorted(fused, key=lambda item: (-fused[item], item))[:limit]


def minmax(*scores: npt.NDArray[Any]) -> Scores:
    total = np.zeros(len(scores[0]), dtype=np.float64)
    for values in scores:
        low, high = float(values.min()), float(values.max())
        if high > low:
            total += (values - low) / (high - low)
    return total / len(scores)


def rankings(
    bm25: Bm25, question: str, vectors: Vectors | None, query: Vectors | None, limit: int
) -> dict[str, list[int]]:
    """Every baseline's ranking (indices of the texts, best first, at most ``limit``); the
    cosine ones only with vectors. Fusions rank every text, like cosine."""
    out: dict[str, list[int]] = {}
    lexical = {
        "": bm25.scores(question),
        "-content": bm25.scores(question, content_only=True),
    }
    for suffix, scores in lexical.items():
        out["bm25" + suffix] = top(scores, limit, scores > 0)
    if vectors is None or query is None:
        return out
    cosine = vectors @ query
    by_meaning = top(cosine, bm25.count)
    out["cosine"] = by_meaning[:limit]
    for suffix, scores in lexical.items():
        by_words = top(scores, bm25.count, scores > 0)
        out["rrf" + suffix] = rrf(limit, by_words, by_meaning)
        out["minmax" + suffix] = top(minmax(scores, cosine), limit)
    return out


def best(figures: Mapping[str, float], methods: Iterable[str] = BASELINES) -> tuple[str, float]:
    """The strongest baseline on one figure: (its name, its value)."""
    present = [(value, name) for name in methods if (value := figures.get(name)) is not None]
    value, name = max(present, key=lambda item: (item[0], item[1]))
    return name, value

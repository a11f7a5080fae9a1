"""The text index: BM25 over each record's search text (SQLite FTS5, Porter stemming).

Append-only like the content it indexes. Queries are natural language: words are
lower-cased, stop words dropped and the rest OR-ed, because FTS5's implicit AND of every word
of a question matches almost nothing (notes/retrieval.md).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]

_WORD = re.compile(r"[0-9a-z]+")
STOP_WORDS = frozenset(
    "a an and are as at be by can could did do does for from had has have how i in is it its "
    "me my of on or our should that the their them there these they this to was we were what "
    "when where which who why will with would you your".split()
)


def query_terms(text: str) -> list[str]:
    """The distinct content words of a query, in order."""
    words = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]
    return list(dict.fromkeys(words))


class TextIndex:
    def __init__(self) -> None:
        # Autocommit: no transaction is ever left open, so a backup can always proceed.
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(body, tokenize='porter unicode61')"
        )

    def add(self, row: int, text: str) -> None:
        if text.strip():
            self._db.execute("INSERT INTO docs(rowid, body) VALUES (?, ?)", (row, text))

    def search(self, query: str, limit: int = 1000) -> tuple[Array, Array]:
        """(rows, BM25 score — higher is better) of the best ``limit`` matches."""
        terms = query_terms(query)
        if not terms:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        match = " OR ".join(f'"{t}"' for t in terms)
        found = self._db.execute(
            "SELECT rowid, -bm25(docs) FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
            (match, limit),
        ).fetchall()
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        rows, scores = zip(*found, strict=True)
        return np.asarray(rows, dtype=np.int64), np.asarray(scores, dtype=np.float64)

    def save(self, path: Path) -> None:
        target = sqlite3.connect(path)
        try:
            self._db.backup(target)
        finally:
            target.close()

    def load(self, path: Path) -> None:
        source = sqlite3.connect(path)
        try:
            source.backup(self._db)
        finally:
            source.close()

    def close(self) -> None:
        self._db.close()

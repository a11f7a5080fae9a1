"""Vectors kept on disk between benchmark runs, by the digest of the text and the model's name.

A benchmark over long conversations spends almost all its time in the embedder; ranking work
reruns the same texts many times. :class:`DiskCachedEmbedder` wraps an embedder and looks each
text up first (SQLite, one file per model under ``~/.cache/membrane_es/bench``, or
``MEMBRANE_ES_BENCH_CACHE``), embedding only the texts it has not seen. Several processes may
share the file: SQLite serialises their writes. Ingestion figures measured through it mean
nothing (the model mostly does not run); time the embedder itself for those.

The wrapper offers what the embedder it wraps offers beside vectors — its passages of a long
text and its token counter — so the engine under benchmark cuts long texts and counts tokens
exactly as it does with the bare model.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from membrane_es.embedding import Embedder
from membrane_es.embedding.passages import splitter_of
from membrane_es.embedding.protocol import Matrix
from membrane_es.embedding.tokens import TokenCounter, counter_for

_LOOKUP = 500  # digests per SELECT (SQLite's bound-parameter limit is far above)


def cache_directory() -> Path:
    configured = os.environ.get("MEMBRANE_ES_BENCH_CACHE")
    return Path(configured) if configured else Path.home() / ".cache/membrane_es/bench"


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class DiskCachedEmbedder:
    """``inner`` with every vector it computes kept on disk by text digest (see above)."""

    def __init__(self, inner: Embedder, directory: Path | None = None) -> None:
        self.inner = inner
        directory = directory or cache_directory()
        directory.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", inner.model)
        self._db = sqlite3.connect(directory / f"{name}-{inner.dimensions}.sqlite", timeout=60)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (digest BLOB PRIMARY KEY, vector BLOB NOT NULL)"
        )
        self.computed = 0  # texts the model embedded (not found on disk)

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    @property
    def model(self) -> str:
        return self.inner.model

    def passages(self, text: str) -> list[str]:
        """The wrapped embedder's passages of ``text``; ``[text]`` when it reads every word."""
        split = splitter_of(self.inner)
        return split(text) if split is not None else [text]

    def token_counter(self) -> TokenCounter:
        return counter_for(self.inner)

    def embed(self, texts: Sequence[str]) -> Matrix:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        keys = [digest(text) for text in texts]
        known = self._lookup(list(dict.fromkeys(keys)))
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in known))
        if missing:
            vectors = self.inner.embed(missing)
            self.computed += len(missing)
            fresh = {digest(t): v.astype(np.float32) for t, v in zip(missing, vectors, strict=True)}
            with self._db:
                self._db.executemany(
                    "INSERT OR IGNORE INTO vectors VALUES (?, ?)",
                    [(key, vector.tobytes()) for key, vector in fresh.items()],
                )
            known.update(fresh)
        for i, key in enumerate(keys):
            out[i] = known[key]
        return out

    def _lookup(self, keys: list[bytes]) -> dict[bytes, Matrix]:
        found: dict[bytes, Matrix] = {}
        for start in range(0, len(keys), _LOOKUP):
            chunk = keys[start : start + _LOOKUP]
            marks = ",".join("?" * len(chunk))
            for key, blob in self._db.execute(
                f"SELECT digest, vector FROM vectors WHERE digest IN ({marks})", chunk
            ):
                found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        return found

    def close(self) -> None:
        self._db.close()

"""What the LangGraph store tests share: a small deterministic embedder and store makers."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterator
from contextlib import contextmanager

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig

from membrane_es import Membrane, TrustContext
from membrane_es.integrations.langgraph_store import MembraneStore

DIMS = 16


class CharacterEmbeddings(Embeddings):
    """A text's vector: the mean of a fixed random direction per character, normalised.

    Deterministic across runs and processes (each character's direction is seeded by a
    digest of it), cheap, and close for texts that share characters: enough for ranking
    tests and for the same answers from two stores given the same embedder."""

    def __init__(self, dims: int = DIMS) -> None:
        self.dims = dims
        self.calls = 0

    def _direction(self, char: str) -> list[float]:
        seed = int.from_bytes(hashlib.sha256(char.encode()).digest()[:8], "big")
        rng = random.Random(seed)
        return [rng.gauss(0.0, 1.0) for _ in range(self.dims)]

    def _embed(self, text: str) -> list[float]:
        total = [0.0] * self.dims
        for char in text:
            for i, x in enumerate(self._direction(char)):
                total[i] += x
        norm = math.sqrt(sum(x * x for x in total))
        return [x / norm for x in total] if norm else [1.0] + [0.0] * (self.dims - 1)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self._embed(text)


def index_config(fields: list[str] | None = None) -> IndexConfig:
    config: IndexConfig = {"dims": DIMS, "embed": CharacterEmbeddings()}
    if fields is not None:
        config["fields"] = fields
    return config


@contextmanager
def membrane_store(
    *, index: IndexConfig | None = None, trust: TrustContext | None = None
) -> Iterator[MembraneStore]:
    memory = Membrane.in_memory(embedder=None)
    try:
        yield MembraneStore(memory, index=index, trust=trust)
    finally:
        memory.close()

"""What the shared-engine tests use: an embedder that runs a hook mid-call (to force another
writer in between a read and the write it leads to), and the framework's reference stores
the adapters are compared with."""

from __future__ import annotations

import math
from collections.abc import Callable

from langchain_core.embeddings import Embeddings

Hook = Callable[[], None]


class Hooked(Embeddings):
    """3-dimensional vectors from a text's length; ``hook`` runs once, inside the next
    ``embed_documents`` (where an adapter has read the engine but not yet written)."""

    def __init__(self) -> None:
        self.hook: Hook | None = None

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return [[1.0, float(len(text)), 0.5] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, float(len(text)), 0.5]


class Angles(Embeddings):
    """Unit vectors on a circle: a text ``"<degrees>"`` points that way, so cosines between
    texts are any number in [-1, 1] (negative ones included)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        head = text.split()[0] if text.split() else ""
        angle = math.radians(float(head)) if head.replace(".", "", 1).isdigit() else 0.0
        return [math.cos(angle), math.sin(angle)]

"""Embeddings for retrieval: the :class:`Embedder` protocol, the text a record is embedded by,
and two embedders — :class:`HashingEmbedder` (numpy only, deterministic, for tests) and
:class:`SentenceTransformerEmbedder` (all-MiniLM-L6-v2 by default, from local files; needs the
``embeddings`` extra, imported only when constructed).
"""

from membrane_es.embedding.hashing import HashingEmbedder
from membrane_es.embedding.protocol import Embedder, Matrix, normalise
from membrane_es.embedding.record_text import object_text, search_text, trigger_text
from membrane_es.embedding.sentence_transformers import (
    EmbedderUnavailableError,
    SentenceTransformerEmbedder,
)

__all__ = [
    "Embedder",
    "EmbedderUnavailableError",
    "HashingEmbedder",
    "Matrix",
    "SentenceTransformerEmbedder",
    "normalise",
    "object_text",
    "search_text",
    "trigger_text",
]

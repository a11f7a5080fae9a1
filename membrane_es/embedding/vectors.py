"""Vectors as the engine holds them: float32 little-endian bytes, tagged with their model.

The log keeps each vector at half precision (float16, :func:`halved`): half the bytes of a
record's largest part, for a change in cosine similarity of the order of 10⁻⁴ (docs/benchmarks.md).
So that a store reads back exactly what was written before it was reopened, a vector is
rounded to half precision when it is made (:func:`pack`): the float32 the engine holds is
the float16 the log keeps, widened, and every search scores the same bits whether the vector
came from the write or from the log. Vectors written at full precision (by earlier versions)
read as they were written."""

from __future__ import annotations

import numpy as np

from membrane_es.embedding.protocol import Embedder, Matrix, normalise
from membrane_es.embedding.record_text import search_text
from membrane_es.errors import ValidationError
from membrane_es.schema.records import Embedding, MemoryRecord
from membrane_es.schema.validation import VectorInput, check_vector

CALLER_MODEL = "caller-supplied"


def pack(model: str, vector: Matrix) -> Embedding:
    """An embedding of ``vector`` (or of a matrix's rows, one after another), its values
    rounded to the half precision the log keeps."""
    rounded = np.asarray(vector, dtype="<f4").astype("<f2")
    if not np.isfinite(rounded).all():
        raise ValidationError("embedding", "a value is too large for the stored precision")
    return Embedding(model=model, vector=rounded.astype("<f4").tobytes())


def halved(data: bytes) -> bytes:
    """float32 vector bytes as the log keeps them: float16, little-endian."""
    return np.frombuffer(data, dtype="<f4").astype("<f2").tobytes()


def widened(data: bytes) -> bytes:
    """float16 vector bytes from the log as the engine holds them: float32 (exact)."""
    return np.frombuffer(data, dtype="<f2").astype("<f4").tobytes()


def unpack(embedding: Embedding) -> Matrix:
    """The stored vector as float32 (a read-only view of the bytes); zeros if erased."""
    return np.frombuffer(vector_bytes(embedding), dtype="<f4")


def vector_bytes(embedding: Embedding) -> bytes:
    """The stored vector's bytes; as many zeros if the record was forgotten."""
    if not embedding.vector and embedding.dimensions:
        return bytes(4 * embedding.dimensions)
    return embedding.vector


def erased(embedding: Embedding | None) -> Embedding | None:
    """What stands for a vector once its record is forgotten: the model and the length."""
    if embedding is None:
        return None
    return Embedding(model=embedding.model, vector=b"", dimensions=len(embedding.vector) // 4)


def record_embedding(
    record: MemoryRecord,
    embedder: Embedder | None,
    given: VectorInput | None = None,
    *,
    field: str = "embedding",
) -> Embedding | None:
    """The vector to store with a new record: the caller's (checked, normalised), else the
    embedder's reading of the record's search text, else none."""
    if given is not None:
        vector = check_vector(field, given)
        if embedder is not None and len(vector) != embedder.dimensions:
            raise ValidationError(
                field, f"expected {embedder.dimensions} dimensions, got {len(vector)}"
            )
        model = embedder.model if embedder is not None else CALLER_MODEL
        return pack(model, normalise(vector))
    if embedder is None:
        return None
    return pack(embedder.model, embedder.embed([search_text(record)])[0])

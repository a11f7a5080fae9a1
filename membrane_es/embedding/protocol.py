"""What the read side needs from an embedding model, and the one normalisation every vector gets.

The embedding matrix (DESIGN §5) holds float32 rows of unit length, so a dot product is a cosine.
Every :class:`Embedder` returns rows in that form already; :func:`normalise` is the same rule for
vectors that arrive from elsewhere (a record captured with its own vector, a stored checkpoint).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
"""A float32 array: ``(n, dimensions)`` for a batch of vectors, ``(dimensions,)`` for one."""


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of a fixed width.

    ``model`` names the model and its settings stably (it is stored with the vectors, so a store
    can refuse an embedder whose vectors would not be comparable with the ones it holds).
    ``embed`` returns shape ``(len(texts), dimensions)``; each row has L2 norm 1, except the row of
    a blank text, which is all zeros (a blank text carries nothing to compare).
    """

    @property
    def dimensions(self) -> int:
        """Width of every vector this embedder returns."""
        ...

    @property
    def model(self) -> str:
        """Stable name of the model and its settings, e.g. ``hashing-v1-384``."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One unit-length float32 row per text, in order; zeros for a blank text."""
        ...


def normalise(matrix: npt.ArrayLike) -> Matrix:
    """``matrix`` as float32 with every row scaled to L2 norm 1 (all-zero rows stay zero).

    A 1-D input is treated as one vector and returned 1-D. The input is not modified.

    :raises ValueError: if any value is NaN or infinite, or the input is not 1-D or 2-D.
    """
    array = np.array(matrix, dtype=np.float32, copy=True)
    if array.ndim not in (1, 2):
        raise ValueError(f"expected a vector or a matrix, got {array.ndim} dimensions")
    if not np.isfinite(array).all():
        raise ValueError("embedding vectors must not contain NaN or infinite values")
    rows = array.reshape(1, -1) if array.ndim == 1 else array
    if rows.size == 0:
        return array
    # float64 accumulation: a float32 sum of squares of very small or large values under- or
    # overflows before the division could rescue it.
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows, dtype=np.float64))
    nonzero = norms > 0.0
    rows[nonzero] = (rows[nonzero] / norms[nonzero, None]).astype(np.float32)
    return array


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, refusing a bare string (itself a sequence of one-letter strings)."""
    if isinstance(texts, str | bytes):
        raise TypeError("embed() takes a sequence of texts, not a single string")
    result = list(texts)
    for text in result:
        if not isinstance(text, str):
            raise TypeError(f"embed() takes strings, got {type(text).__name__}")
    return result

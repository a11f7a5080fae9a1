"""A dependency-free embedder: feature hashing of words and word pairs.

It knows no synonyms ("prod" and "production" share nothing), so it is for tests, demos and
machines without the ``embeddings`` extra, not for recall (notes/retrieval.md: 0.735 recall@k on
the recall set against 0.883 for all-MiniLM-L6-v2). What it guarantees is determinism: the same
text gives the same bits in every process, on every run, whatever ``PYTHONHASHSEED`` says,
because buckets come from BLAKE2b, never from Python's salted ``hash()``.

Algorithm (version 1, named in :attr:`HashingEmbedder.model`):

1. lower-case the text, split it into word tokens (runs of Unicode letters and digits);
2. drop common English stop words, unless that would leave nothing;
3. features: each token (weight 1) and each pair of adjacent tokens (weight 0.5);
4. each feature adds its weight to bucket ``h mod dimensions`` with sign ``+`` or ``-`` taken from
   the top bit of ``h``, where ``h`` is the first 8 bytes of BLAKE2b(feature), little-endian;
5. the row is scaled to unit length (a text with no tokens stays all zeros).

Changing any step changes the vectors: bump the version in the name when you do.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from membrane_es.embedding.protocol import Matrix, check_texts, normalise

VERSION = 1
UNIGRAM_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.5

_TOKEN = re.compile(r"[^\W_]+")

STOP_WORDS = frozenset(
    """a an and are as at be but by did do does for from had has have how i if in into is it its
    me my of on or our so than that the their them then there these they this to was we were what
    when where which who why will with you your""".split()
)


@lru_cache(maxsize=1 << 16)
def _feature_hash(feature: str) -> int:
    """64 stable bits for a feature (cached: vocabularies repeat across texts)."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens, stop words dropped unless they are all there is."""
    words = _TOKEN.findall(text.lower())
    content = [w for w in words if w not in STOP_WORDS]
    return content or words


class HashingEmbedder:
    """Deterministic feature-hashing embeddings; see the module docstring for the algorithm.

    :param dimensions: width of the vectors (384 matches all-MiniLM-L6-v2's).
    """

    def __init__(self, dimensions: int = 384) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ValueError(f"dimensions must be a positive integer, got {dimensions!r}")
        self._dimensions = dimensions

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def model(self) -> str:
        return f"hashing-v{VERSION}-{self._dimensions}"

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimensions={self._dimensions})"

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One unit-length float32 row per text; zeros for a text without a word."""
        batch = check_texts(texts)
        rows: list[int] = []
        hashes: list[int] = []
        weights: list[float] = []
        for row, text in enumerate(batch):
            words = tokens(text)
            features = [*words, *(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))]
            rows.extend([row] * len(features))
            hashes.extend(_feature_hash(f) for f in features)
            weights.extend([UNIGRAM_WEIGHT] * len(words))
            weights.extend([BIGRAM_WEIGHT] * (len(features) - len(words)))
        return normalise(self._accumulate(len(batch), rows, hashes, weights))

    def _accumulate(
        self, count: int, rows: list[int], hashes: list[int], weights: list[float]
    ) -> npt.NDArray[np.float64]:
        """Sum signed weights into buckets for all texts at once (float64, then normalised)."""
        if not hashes:
            return np.zeros((count, self._dimensions), dtype=np.float64)
        h = np.array(hashes, dtype=np.uint64)
        buckets = (h % np.uint64(self._dimensions)).astype(np.int64)
        signs = np.where(h >> np.uint64(63), -1.0, 1.0)
        flat = np.array(rows, dtype=np.int64) * self._dimensions + buckets
        summed = np.bincount(
            flat, weights=signs * np.array(weights), minlength=count * self._dimensions
        )
        return summed.astype(np.float64, copy=False).reshape(count, self._dimensions)

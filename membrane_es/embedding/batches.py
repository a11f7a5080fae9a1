"""Texts grouped into forward passes of similar length, for the transformer embedders."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from membrane_es.embedding.protocol import Matrix, check_texts, normalise

Forward = Callable[[list[int]], npt.ArrayLike]
"""One forward pass over some of the prepared texts (positions among them): a row each."""


def length_runs(counts: list[int], batch_size: int) -> list[list[int]]:
    """Positions of texts with these token ``counts`` in runs of similar length, each one
    forward pass.

    A forward pass pads every text to the longest in it, so a pass mixing a one-line turn
    with a paragraph costs the paragraph's work for each: what made a batch of a few dozen
    mixed texts run at half the model's speed on long sorted lists. Sorted by token count
    (ties by position), a run ends at ``batch_size`` texts or before a text more than twice
    as long as its first: padding then at most doubles any text's work, as it does in the
    sorted batches of a long list."""
    order = sorted(range(len(counts)), key=lambda i: (counts[i], i))
    runs: list[list[int]] = []
    for i in order:
        run = runs[-1] if runs else None
        if run is None or len(run) == batch_size or counts[i] > 2 * counts[run[0]]:
            runs.append([i])
        else:
            run.append(i)
    return runs


def embed_in_runs(
    texts: Sequence[str],
    dimensions: int,
    batch_size: int,
    prepare: Callable[[list[str]], tuple[list[int], Forward]],
) -> Matrix:
    """One unit-length float32 row per text, in order; zeros for a blank text.

    ``prepare`` reads the non-blank texts once and gives their token counts and the forward
    pass over positions among them; the passes run over :func:`length_runs`."""
    batch = check_texts(texts)
    result = np.zeros((len(batch), dimensions), dtype=np.float32)
    filled = [i for i, text in enumerate(batch) if text.strip()]
    if not filled:
        return result
    counts, forward = prepare([batch[i] for i in filled])
    for run in length_runs(counts, batch_size):
        result[[filled[i] for i in run]] = np.asarray(forward(run), dtype=np.float32)
    return normalise(result)

"""Texts grouped into forward passes of similar length, for the transformer embedders."""

from __future__ import annotations


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

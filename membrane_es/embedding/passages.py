"""Long texts as passages the model reads whole.

A transformer embedder reads a fixed number of word pieces (all-MiniLM-L6-v2: 256) and drops
the rest: a fact in the last paragraph of a long message never reaches its vector. An embedder
that knows its window offers ``passages(text)``: the text cut into windows that each fit, the
first starting where the text starts (so it reads what the text's own vector reads), each next
one starting :data:`OVERLAP` of a window before the previous one ends, so a sentence a boundary
cuts is read whole by the next window. A text that fits is one passage.

The engine keeps a vector for every passage after the first (the first is the record's own
vector) and scores a record by its best passage, less what the best of that many reaches by
chance: :mod:`membrane_es.projections.passages`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from membrane_es.embedding.protocol import Embedder

OVERLAP = 0.25
"""How much of a window the next one reads again (a quarter: the customary chunk overlap)."""

Splitter = Callable[[str], list[str]]


def splitter_of(embedder: Embedder | None) -> Splitter | None:
    """The embedder's ``passages`` method, when it has one (an embedder without a window —
    :class:`~membrane_es.embedding.HashingEmbedder` reads every word — has none)."""
    split = getattr(embedder, "passages", None)
    return split if callable(split) else None


def windows(spans: Sequence[tuple[int, int]], width: int) -> list[tuple[int, int]]:
    """(first, last) character offsets of each window of ``width`` tokens over tokens at
    ``spans`` (their character offsets, in order), windows overlapping by :data:`OVERLAP`;
    one window when the tokens fit."""
    if width < 1:
        raise ValueError(f"a window holds at least one token, got {width}")
    if not spans:
        return []
    stride = max(1, width - int(width * OVERLAP))
    out = []
    start = 0
    while True:
        end = min(start + width, len(spans))
        out.append((spans[start][0], spans[end - 1][1]))
        if end == len(spans):
            return out
        start += stride


def cut(text: str, spans: Sequence[tuple[int, int]], width: int) -> list[str]:
    """``text`` as passages of ``width`` tokens (see :func:`windows`); ``[text]`` if it fits."""
    if len(spans) <= width:
        return [text]
    return [text[first:last] for first, last in windows(spans, width)]


def located(text: str, passages: Sequence[str]) -> list[tuple[int, int]] | None:
    """The (start, end) character offsets of each of ``passages`` (as :func:`cut` gave them,
    in order) within ``text``; None when one is not there (an embedder whose passages are not
    slices of the text). Each window starts and ends past the one before it, so a passage is
    looked for only there (in a text that repeats itself, the first copy there: the same
    words)."""
    out: list[tuple[int, int]] = []
    first, last = -1, -1
    for passage in passages:
        at = text.find(passage, first + 1)
        while at >= 0 and at + len(passage) <= last:
            at = text.find(passage, at + 1)
        if at < 0:
            return None
        first, last = at, at + len(passage)
        out.append((first, last))
    return out

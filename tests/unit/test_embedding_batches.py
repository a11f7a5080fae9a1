"""Forward passes of similar length and the rows for blank texts, shared by the transformer
embedders (:mod:`membrane_es.embedding.batches`), with a stand-in model."""

from __future__ import annotations

import numpy as np
import pytest

from membrane_es.embedding.batches import Forward, embed_in_runs, length_runs


def test_runs_cover_every_text_in_length_order_at_most_doubling() -> None:
    counts = [3, 40, 5, 9, 3, 100, 6, 12]

    runs = length_runs(counts, batch_size=3)

    assert sorted(i for run in runs for i in run) == list(range(len(counts)))
    assert [i for run in runs for i in run] == sorted(range(8), key=lambda i: (counts[i], i))
    for run in runs:
        assert len(run) <= 3
        assert max(counts[i] for i in run) <= 2 * counts[run[0]]


class Model:
    """Embeds a text as (its length, 1); notes each pass's texts."""

    def __init__(self) -> None:
        self.passes: list[list[str]] = []

    def prepare(self, texts: list[str]) -> tuple[list[int], Forward]:
        def forward(run: list[int]) -> np.ndarray:
            self.passes.append([texts[i] for i in run])
            return np.array([[len(texts[i]), 1.0] for i in run])

        return [len(text) for text in texts], forward


def test_blank_texts_get_zero_rows_and_the_rest_one_pass_per_run() -> None:
    model = Model()
    texts = ["abc", "", "a much longer text here", "  ", "abcd"]

    rows = embed_in_runs(texts, 2, 8, model.prepare)

    assert rows.dtype == np.float32 and rows.shape == (5, 2)
    assert not rows[[1, 3]].any()
    expected = [np.array([n, 1.0]) / np.hypot(n, 1.0) for n in (3, 23, 4)]
    np.testing.assert_allclose(rows[[0, 2, 4]], expected, rtol=1e-6)
    assert model.passes == [["abc", "abcd"], ["a much longer text here"]]


def test_nothing_to_embed_makes_no_pass() -> None:
    model = Model()

    assert embed_in_runs(["", " "], 2, 8, model.prepare).shape == (2, 2)
    assert embed_in_runs([], 2, 8, model.prepare).shape == (0, 2)
    assert model.passes == []


def test_a_bare_string_is_refused() -> None:
    with pytest.raises(TypeError, match="sequence of texts"):
        embed_in_runs("abc", 2, 8, Model().prepare)

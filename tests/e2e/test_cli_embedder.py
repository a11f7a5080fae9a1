"""``--embedder`` and ``MEMBRANE_EMBEDDER``: which model the commands embed with, a status on
standard error while the default model loads, and no model for commands that never embed.

The default model itself is stood in for by the hashing embedder (the real one is exercised by
tests/integration/test_default_model.py).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from membrane_es import Membrane
from membrane_es.cli import main, render
from membrane_es.embedding import HashingEmbedder, default
from membrane_es.embedding import sentence_transformers as models
from membrane_es.embedding.default import DEFAULT_MODEL
from tests.e2e.test_cli import fact, run_process


class StandIn(HashingEmbedder):
    """Takes the bundled model's place: its name and width, hashing's vectors; counts loads."""

    loads = 0

    def __init__(self, model: str = DEFAULT_MODEL) -> None:
        super().__init__(384)
        StandIn.loads += 1

    @property
    def model(self) -> str:
        return DEFAULT_MODEL


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> type[StandIn]:
    """The default model present, as this stand-in."""
    monkeypatch.setattr(default, "model_installed", lambda: True)
    monkeypatch.setattr(default, "load_minilm", StandIn)  # int8 or fp32 alike
    monkeypatch.setattr(models, "SentenceTransformerEmbedder", StandIn)
    StandIn.loads = 0
    return StandIn


def _stderr_is_a_terminal(monkeypatch: pytest.MonkeyPatch, terminal: bool) -> io.StringIO:
    written = io.StringIO()
    console = Console(file=written, force_terminal=terminal, width=120)
    monkeypatch.setattr(render, "errors", console)
    return written


def _run(*args: str, capsys: pytest.CaptureFixture[str]) -> str:
    status = main(list(args))
    out, err = capsys.readouterr()
    assert status == 0, err
    return out


@pytest.mark.default_embedder
def test_a_status_shows_on_a_terminal_while_the_default_model_loads(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stand_in: type[StandIn],
) -> None:
    store = str(tmp_path / "store")
    errors = _stderr_is_a_terminal(monkeypatch, True)

    created = json.loads(_run("create", store, fact("Orchid", "staging"), "--json", capsys=capsys))

    assert stand_in.loads == 1
    assert f"loading the embedding model {DEFAULT_MODEL}" in errors.getvalue()
    assert created["type"] == "semantic"  # standard output is the JSON alone


@pytest.mark.default_embedder
def test_no_status_when_standard_error_is_not_a_terminal(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stand_in: type[StandIn],
) -> None:
    errors = _stderr_is_a_terminal(monkeypatch, False)

    _run("create", str(tmp_path / "store"), fact("Orchid", "staging"), capsys=capsys)

    assert stand_in.loads == 1
    assert errors.getvalue() == ""


@pytest.mark.default_embedder
def test_only_commands_that_embed_load_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in: type[StandIn]
) -> None:
    store = str(tmp_path / "store")
    with Membrane.open(store, embedder=StandIn()) as memory:
        record_id = memory.create_record(json.loads(fact("Orchid", "staging"))).id
    stand_in.loads = 0

    for read in (
        ("list", store),
        ("get", store, record_id),
        ("history", store, record_id),
        ("metrics", store),
        ("stats", store),
        ("reinforce", store, record_id, "--why", "it helped"),
        ("export", store, str(tmp_path / "log.jsonl")),
    ):
        _run(*read, capsys=capsys)
    assert stand_in.loads == 0

    # a query is embedded: the model is loaded for it
    _run("retrieve", store, "where does Orchid deploy", capsys=capsys)
    assert stand_in.loads == 1
    _run("retrieve", store, "Orchid", "--embedder", "none", capsys=capsys)
    assert stand_in.loads == 1


def test_the_environment_names_the_embedder_and_the_option_overrides_it(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    env = {"MEMBRANE_EMBEDDER": "hashing"}

    made = run_process("create", str(store), fact("Orchid", "staging"), env=env)
    assert made.returncode == 0, made.stderr
    # --embedder wins over the environment: this record gets no vector
    bare = run_process(
        "create", str(store), fact("Lily", "prod"), "--embedder", "none", "--json", env=env
    )
    assert bare.returncode == 0, bare.stderr

    with Membrane.open(store, embedder=None) as memory:
        assert memory.views.embeddings.model == HashingEmbedder().model
        assert len(memory.views.embeddings) == 1

"""``--embedder`` (and ``MEMBRANE_EMBEDDER``): which model the commands that embed use, and a
status line on standard error while it loads (seconds the first time, when the model's graph
is exported; under a second after).

Only commands that embed take the option: writes that make records (their vectors) and
queries (the task's vector). The others open the store with no embedder, so they never load a
model, whatever the store's vectors came from.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from membrane_es.cli import render
from membrane_es.embedding.default import AUTOMATIC, BundledMiniLM, EmbedderChoice, named
from membrane_es.engine import Membrane

ENV = "MEMBRANE_EMBEDDER"

EmbedderName = Annotated[
    str,
    typer.Option(
        "--embedder",
        envvar=ENV,
        metavar="EMBEDDER",
        help="the model that embeds: default (all-MiniLM-L6-v2, int8, on ONNX Runtime; a store "
        "keeps the model its vectors came from), none, all-MiniLM-L6-v2 (fp32, the embeddings "
        "extra), or a local sentence-transformers model directory",
        show_default=False,
    ),
]


def embedder_for(name: str) -> EmbedderChoice:
    """The embedder ``--embedder`` names; a model named here is loaded now, under a status."""
    if name.strip() in ("", AUTOMATIC, "none", "hashing"):
        return named(name.strip())
    with loading(name):
        return named(name)


def announce_loading(memory: Membrane) -> None:
    """Show a status while the default model loads: it loads on first use, inside the
    command, so the store's embedder is given the status to enter then."""
    embedder = memory.embedder
    if isinstance(embedder, BundledMiniLM):
        embedder.loading = loading


@contextmanager
def loading(model: str) -> Iterator[None]:
    """A spinner on standard error while ``model`` loads, when standard error is a terminal
    (logs and pipes get nothing: standard output, perhaps JSON, is never touched)."""
    if not render.errors.is_terminal:
        yield
        return
    with render.errors.status(f"loading the embedding model {model}…"):
        yield

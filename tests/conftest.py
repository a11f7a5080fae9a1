"""Suite-wide fixtures: engines opened by the tests get no embedder by default.

A store opened without naming an embedder uses all-MiniLM-L6-v2 (int8, on ONNX Runtime: the base
install has it). The suite's expectations are written for the engine without one, so the default
is switched off here whatever is installed; a test that is about the default itself opts back in
with ``@pytest.mark.default_embedder``.

The ONNX graph of the default model is exported into a directory of the test session, not the
user's cache (``MEMBRANE_ES_CACHE``, unless the caller set one).
"""

from __future__ import annotations

import os

import pytest

from membrane_es.embedding import default


@pytest.fixture(autouse=True)
def _no_default_embedder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("default_embedder") is None:
        monkeypatch.setattr(default, "model_installed", lambda: False)
        monkeypatch.setattr(default, "extra_installed", lambda: False)


@pytest.fixture(autouse=True, scope="session")
def _graph_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ.setdefault("MEMBRANE_ES_CACHE", str(tmp_path_factory.mktemp("graph-cache")))

"""The LangChain vector store passes LangChain's own standard suite (sync and async), on a
durable store."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from membrane_es import TrustContext
from membrane_es.integrations.langchain_vectorstore import MembraneVectorStore


class TestStandardSuite(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[MembraneVectorStore]:  # type: ignore[override]
        with MembraneVectorStore.open(
            tmp_path / "memory", self.get_embeddings(), trust=TrustContext()
        ) as store:
            yield store


# The suite's async tests carry no marker: LangChain runs them in pytest-asyncio's auto mode.
# This suite keeps strict mode, so they are marked where they are defined (the suite refuses
# overrides of its tests, so they cannot be marked on a subclass).
for _name, _test in inspect.getmembers(VectorStoreIntegrationTests, inspect.iscoroutinefunction):
    if _name.startswith("test_"):
        pytest.mark.asyncio(_test)

"""``create_record(..., embed=False)``: a record kept without a vector, whatever the embedder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_es import Membrane, TrustContext, ValidationError
from membrane_es.embedding.hashing import HashingEmbedder

READER = TrustContext(max_sensitivity="low")


def _fact(record_id: str, obj: str) -> dict[str, object]:
    return {
        "id": record_id,
        "type": "semantic",
        "payload": {"kind": "semantic", "subject": "Orchid", "predicate": "runs", "object": obj},
        "provenance": {"sources": [{"kind": "observation", "ref": "test"}]},
    }


@pytest.fixture
def memory() -> Iterator[Membrane]:
    with Membrane.in_memory(embedder=HashingEmbedder()) as store:
        yield store


def test_the_record_gets_no_vector_and_is_still_found_by_its_words(memory: Membrane) -> None:
    memory.create_record(_fact("plain", "kubernetes"), embed=False)
    memory.create_record(_fact("embedded", "nomad"))
    found = memory.retrieve("Orchid kubernetes", trust=READER, explain=True)
    assert {record.id for record in found.records} == {"plain", "embedded"}
    explained = {e.record_id: e for e in found.explanations}
    assert (
        explained["plain"].vector_similarity is None
        and explained["embedded"].vector_similarity is not None
    )


def test_a_vector_for_a_record_kept_without_one_is_refused(memory: Membrane) -> None:
    position = memory.position
    with pytest.raises(ValidationError) as raised:
        memory.create_record(_fact("x", "y"), embed=False, embedding=[1.0] * 8)
    assert raised.value.field == "embedding"
    with pytest.raises(ValidationError) as raised:
        memory.create_record(_fact("x", "y"), embed="no")
    assert raised.value.field == "embed"
    assert memory.position == position

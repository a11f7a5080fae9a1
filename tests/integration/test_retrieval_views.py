"""The read-side additions retrieval relies on survive a checkpoint: entity names, document
lengths and validity windows are saved and reloaded, and reopened stores answer as before."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from membrane_es import Membrane, TrustContext
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections.read_model import ReadModel
from tests.views_support import assert_same_views

EVERYONE = TrustContext(max_sensitivity="hyper")  # type: ignore[arg-type]
MARCH = datetime(2025, 3, 15, tzinfo=UTC)


def fill(memory: Membrane) -> None:
    orchid = memory.create_record(
        {
            "type": "entity",
            "payload": {
                "kind": "entity",
                "canonical_name": "Orchid",
                "aliases": ["orchid deploy target", {"value": "Orch", "kind": "short"}],
            },
        }
    ).id
    for i in range(6):
        fact = memory.create_record(
            {
                "type": "semantic",
                "scope": ["", "project:alpha"][i % 2],
                "payload": {
                    "kind": "semantic",
                    "subject": "orchid",
                    "predicate": f"fact_{i}",
                    "object": "deploy " * (i + 1),
                    "validity": {"start": f"2025-0{i + 1}-01T00:00:00+00:00"},
                },
            }
        ).id
        memory.add_relation(fact, "subject_entity", orchid, inverse="fact_subject_of")


def answers(memory: Membrane) -> list[object]:
    return [
        [r.id for r in memory.retrieve("orchid deploy", trust=EVERYONE).records],
        [r.id for r in memory.retrieve(trust=EVERYONE, valid_at=MARCH).records],
        memory.retrieve_graph("orchid", trust=EVERYONE, max_hops=1).root_ids,
    ]


def test_reopened_stores_answer_retrieval_as_before(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        fill(memory)
        before = answers(memory)
        rebuilt = ReadModel.rebuild(memory.application)
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        views = memory.views
        assert_same_views(views, rebuilt)
        assert views.entities.names == rebuilt.entities.names
        assert views.entities.rows_named("orch") == rebuilt.entities.rows_named("ORCH ") != []
        np.testing.assert_array_equal(
            views.text.lengths(np.arange(views.table.size)),
            rebuilt.text.lengths(np.arange(views.table.size)),
        )
        np.testing.assert_array_equal(
            views.table.content["valid_from"][: views.table.size],
            rebuilt.table.content["valid_from"][: views.table.size],
        )
        assert answers(memory) == before

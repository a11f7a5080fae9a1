"""Shared helpers for read-side tests: random histories, and view equality."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from membrane_es import Membrane
from membrane_es.projections.read_model import ReadModel

SCOPES = ["", "project:alpha", "project:beta"]
WORDS = ["orchid", "deploy", "staging", "postgres", "latency", "build", "cache", "token"]


def fact(rng: random.Random) -> dict[str, Any]:
    return {
        "type": "semantic",
        "scope": rng.choice(SCOPES),
        "sensitivity": rng.choice(["low", "medium", "high"]),
        "tags": [rng.choice(WORDS)],
        "payload": {
            "kind": "semantic",
            "subject": rng.choice(WORDS),
            "predicate": "relates_to",
            "object": " ".join(rng.sample(WORDS, 2)),
        },
        "provenance": {"sources": [{"kind": "observation", "ref": "test"}]},
    }


def random_history(memory: Membrane, rng: random.Random, steps: int) -> list[str]:
    """Create, revise, relate, pin and retract records at random; returns the ids created."""
    ids: list[str] = []
    replaced: set[str] = set()  # a record is superseded at most once
    for _ in range(steps):
        action = rng.random()
        live = list(ids)
        if action < 0.35 or len(live) < 2:
            ids.append(memory.create_record(fact(rng)).id)
        elif action < 0.5:
            memory.reinforce(rng.choice(live), "t", "useful")
        elif action < 0.6:
            memory.penalize(rng.choice(live), rng.random() / 2, "t", "misled")
        elif action < 0.7:
            source, target = rng.sample(live, 2)
            memory.add_relation(source, "supports", target, inverse="supported_by")
        elif action < 0.75:
            memory.pin(rng.choice(live))
        elif action < 0.8:
            memory.unpin(rng.choice(live))
        elif action < 0.85 and set(live) - replaced:
            old = rng.choice([i for i in live if i not in replaced])
            replaced.add(old)
            ids.append(memory.supersede(old, fact(rng), "t", "newer", widen=True).id)
        elif action < 0.9:
            memory.contest(rng.choice(live), rng.choice(live), "t", "doubt")
        else:
            memory.retract(rng.choice(live), "t", "wrong")
    return ids


def assert_same_views(left: ReadModel, right: ReadModel) -> None:
    assert left.position == right.position
    a, b = left.table, right.table
    assert a.size == b.size
    assert a.ids == b.ids
    assert a.scope_names == b.scope_names
    for columns_a, columns_b in ((a.content, b.content), (a.state, b.state)):
        for name in columns_a:
            np.testing.assert_array_equal(columns_a[name][: a.size], columns_b[name][: b.size])
    ta, tb = a.timeline, b.timeline
    assert ta.size == tb.size
    np.testing.assert_array_equal(ta.times[: ta.size], tb.times[: tb.size])
    np.testing.assert_array_equal(ta.rows[: ta.size], tb.rows[: tb.size])
    for name in ta.values:
        np.testing.assert_array_equal(ta.values[name][: ta.size], tb.values[name][: tb.size])
    assert ta.interval == tb.interval
    assert [(c, n) for c, n, _ in ta.checkpoints] == [(c, n) for c, n, _ in tb.checkpoints]
    for (_, _, copies_a), (_, _, copies_b) in zip(ta.checkpoints, tb.checkpoints, strict=True):
        for name in copies_a:
            np.testing.assert_array_equal(copies_a[name], copies_b[name])
    ma, mb = left.metrics, right.metrics
    np.testing.assert_array_equal(ma.figures[: a.size], mb.figures[: b.size])
    assert ma.audit_size == mb.audit_size
    np.testing.assert_array_equal(ma.audit_times[: ma.audit_size], mb.audit_times[: mb.audit_size])
    np.testing.assert_array_equal(ma.audit_codes[: ma.audit_size], mb.audit_codes[: mb.audit_size])
    for counter in ("by_type", "by_action", "figure_sum", "figure_count"):
        np.testing.assert_array_equal(getattr(ma, counter), getattr(mb, counter))
    assert left.graph.outgoing == right.graph.outgoing
    # who points at a record is a set (readers sort it): a restored graph rebuilds it from
    # the outgoing lists, so its order may differ from the log's
    assert {t: sorted(s) for t, s in left.graph.incoming.items()} == {
        t: sorted(s) for t, s in right.graph.incoming.items()
    }
    assert left.embeddings.model == right.embeddings.model
    assert left.embeddings.dimensions == right.embeddings.dimensions
    assert left.embeddings.skipped == right.embeddings.skipped
    assert list(left.embeddings.blocks) == list(right.embeddings.blocks)
    assert sorted(left.embeddings.blocks) == sorted(right.embeddings.blocks)
    for scope, block in left.embeddings.blocks.items():
        other = right.embeddings.blocks[scope]
        np.testing.assert_array_equal(block.rows[: block.size], other.rows[: other.size])
        np.testing.assert_array_equal(block.matrix[: block.size], other.matrix[: other.size])
    assert left.entities.names == right.entities.names
    assert left.entities._by_term == right.entities._by_term
    np.testing.assert_array_equal(
        left.text.lengths(np.arange(a.size)), right.text.lengths(np.arange(b.size))
    )
    pairs = zip(left.text.said_after.pairs(), right.text.said_after.pairs(), strict=True)
    for pairs_a, pairs_b in pairs:
        np.testing.assert_array_equal(pairs_a, pairs_b)
    assert left.text.corpus(a.size) == right.text.corpus(b.size)
    for word in WORDS:
        rows_a, scores_a = left.text.search(word)
        rows_b, scores_b = right.text.search(word)
        np.testing.assert_array_equal(rows_a, rows_b)
        np.testing.assert_allclose(scores_a, scores_b)

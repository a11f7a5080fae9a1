"""Relevance feedback: the memories a task finds first say what it is about.

A task is a few words; the memories that answer it say the same thing at length, in the
words and turns of phrase its owner uses. So a read with a task descriptor and a query
vector searches twice: once for the task as asked, then for the task moved toward the
records that first search ranked highest (Rocchio's relevance feedback, with the first
results standing in for the ones a reader would mark: pseudo-relevance feedback). A fact
said in other words than the question's — "I've had them for three years" for "how long
has Nate had his turtles?" — is nearer the memories about the same thing than the question
alone. Everything else about the read is unchanged: the same words, periods, speakers and
filters, and the second ranking is the answer.

The query moves by :data:`WEIGHT` times the mean of the first :data:`RECORDS` records'
vectors: the few best, so that one stray match does not steer the search, and at half the
task's own weight, so that the task stays what is searched for (Rocchio's β below α, as
the usual settings have it). A read that gives only a vector, with no descriptor, asks for
its nearest neighbours and gets exactly those.

The second search scores every vector again (the candidates, their words and what can be
selected are the first search's, reused), so it runs where the read scores every vector
exactly: a read that asks to be exact, or one below the size from which reads shortlist by
sign codes (:mod:`membrane_es.queries.vectors`) — a store of one agent's conversations, where
it adds a millisecond or two (``python -m bench.feedback``: 1.5× a read searched once at
5,000 records). A larger store's shortlisted read is searched once, as before.

Measured with MiniLM (docs/benchmarks.md): LoCoMo R@5 0.706 → 0.714; LongMemEval (60
questions) session recall_all@5 0.917 → 0.933 and turn recall_all@10 unchanged at 0.850.
On LoCoMo any of 3, 5 or 10 records, or a weight of 0.25, gains as well (+0.006…+0.014 in
the same measure taken outside the engine).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]

RECORDS = 3  # the first records found that stand for what the task is about
WEIGHT = 0.5  # how far toward them the query moves, against 1 for the task itself
SEARCHED = 4 * RECORDS  # the first records looked at for RECORDS with a vector, as a rule


def toward(query: Array, rows: Array, found: Array) -> tuple[Array, Array] | None:
    """The query moved toward the first :data:`RECORDS` of ``rows`` (best first, each one's
    vector in ``found``, NaN where it has none) that have a vector, and their rows; None
    when none has one."""
    has_vector = np.isfinite(found).all(axis=1)
    moved = widened(query, found[has_vector])
    return None if moved is None else (moved, rows[has_vector][:RECORDS])


def widened(query: Array, found: Array) -> Array | None:
    """The query moved toward the first :data:`RECORDS` of ``found`` (their vectors, best
    first; rows of NaN: records without one), unit length; None when none has a vector."""
    usable = found[np.isfinite(found).all(axis=1)][:RECORDS]
    if not len(usable):
        return None
    task = np.asarray(query, dtype=np.float64)
    length = float(np.linalg.norm(task))
    if not length:
        return None
    moved = task / length + WEIGHT * usable.astype(np.float64).mean(axis=0)
    norm = float(np.linalg.norm(moved))
    if not norm:
        return None
    return (moved / norm).astype(np.float32)

"""Graph retrieval (spec §3.5): ranked roots, then their bounded relation neighbourhood.

1. **Roots**: layered retrieval cut to ``3 × root_limit``, plus entities named by the whole
   descriptor (:mod:`membrane_es.queries.roots`), deduplicated, reranked when the descriptor
   is not blank, and the first ``root_limit`` kept (never more than ``node_limit``).
2. **Expansion**: breadth first from the roots along each node's outgoing relations, as the
   record stood at the snapshot's moment, up to ``max_hops`` hops (0: roots only). A relation
   is followed only to a record that existed then, that the caller may see (in full, or
   redacted one level up: the edge to a redacted node is kept) and that active reads show
   (not retracted, penalised to nothing or expired; valid at ``valid_at`` when given).
   Memory types and ``min_salience`` choose roots only. At most ``node_limit`` nodes and
   ``edge_limit`` edges; each (source, predicate, target) once; an edge always joins two
   returned nodes.
3. **Order**: roots first, in rank order (as ``root_ids``); then the other nodes by hop,
   then salience (ties: newer, then id). The selection is the layered retrieval's.

   The reference sorts roots by salience too. Its salience changes in steps (an hourly decay
   sweep), so roots of equal importance tie exactly and its stable small-slice sort keeps
   them in rank order; here salience decays continuously, records created a moment apart
   differ in the ninth decimal, and a salience sort would replace the ranking by creation
   order. Keeping rank order is what the reference's callers in fact get.

In this API every limit means what it says: ``max_hops=0`` returns roots only and a limit of
0 returns nothing of that kind. (The gRPC edge keeps the wire contract: there ``max_hops`` 0
means the default, 1, and −1 means roots only; limits of 0 mean their defaults.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import msgspec
import numpy as np

from membrane_es.queries.candidates import Filters, active, visibility
from membrane_es.queries.explain import Placed, explain_rows, turns_searched_with
from membrane_es.queries.retrieve import (
    LAYERS,
    Plan,
    Ranking,
    Sources,
    hydrator_for,
    make_plan,
    positions,
    rank,
    selection_result,
)
from membrane_es.queries.roots import (
    CANONICAL_BOOST,
    entity_roots,
    related_entities,
    rerank,
    root_boost,
    word_weights,
)
from membrane_es.queries.snapshot import Hydrator, Snapshot, consistently
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.records import GraphEdge, TrustContext
from membrane_es.schema.results import (
    ExplainedRetrieveGraphResult,
    GraphNode,
    RetrieveGraphResult,
)
from membrane_es.schema.validation import VectorInput, check_flag, check_limit, check_trust

DEFAULT_ROOT_LIMIT = 10
DEFAULT_NODE_LIMIT = 25
DEFAULT_EDGE_LIMIT = 100
DEFAULT_MAX_HOPS = 1
ROOT_POOL_FACTOR = 3  # layered retrieval supplies this many candidates per root


class RetrieveGraph(msgspec.Struct, kw_only=True, frozen=True):
    """Graph retrieval for a task. Fields are checked when the query runs."""

    task_descriptor: str = ""
    trust: TrustContext | None = msgspec.field(default_factory=TrustContext)
    memory_types: Iterable[str] | None = None
    min_salience: float = 0.0
    root_limit: int = DEFAULT_ROOT_LIMIT
    node_limit: int = DEFAULT_NODE_LIMIT
    edge_limit: int = DEFAULT_EDGE_LIMIT
    max_hops: int = DEFAULT_MAX_HOPS
    as_of: datetime | None = None
    valid_at: datetime | None = None
    query_embedding: VectorInput | None = None
    exact: bool = False
    explain: bool = False
    created_after: datetime | None = None
    created_before: datetime | None = None


@dataclass
class _Node:
    row: int
    redacted: bool
    root: bool
    hop: int


def retrieve_graph(query: RetrieveGraph, sources: Sources) -> RetrieveGraphResult:
    trust = check_trust(query.trust)  # first, as the reference does
    root_limit = check_limit("root_limit", query.root_limit)
    node_limit = check_limit("node_limit", query.node_limit)
    edge_limit = check_limit("edge_limit", query.edge_limit)
    max_hops = check_limit("max_hops", query.max_hops)
    plan = make_plan(
        sources,
        descriptor=query.task_descriptor,
        trust=trust,
        memory_types=query.memory_types,
        min_salience=query.min_salience,
        limit=max(ROOT_POOL_FACTOR * root_limit, 1),
        as_of=query.as_of,
        valid_at=query.valid_at,
        include_retracted=False,
        query_embedding=query.query_embedding,
        exact=check_flag("exact", query.exact),
        explain=check_flag("explain", query.explain),
        created_after=query.created_after,
        created_before=query.created_before,
    )
    return consistently(
        sources.views,
        sources.now,
        plan.as_of,
        partial(_answer, plan, sources, root_limit, node_limit, edge_limit, max_hops),
    )


def _answer(
    plan: Plan,
    sources: Sources,
    root_limit: int,
    node_limit: int,
    edge_limit: int,
    max_hops: int,
    snapshot: Snapshot,
) -> RetrieveGraphResult:
    """The graph of a checked request, read from one snapshot."""
    ranking = rank(snapshot, plan, sources.selection_threshold)
    hydrator = hydrator_for(sources, snapshot, ranking)
    selection = selection_result(ranking, hydrator)
    if root_limit == 0 or node_limit == 0:
        return RetrieveGraphResult(nodes=[], edges=[], root_ids=[], selection=selection)

    pool, boosts = _root_candidates(snapshot, plan, ranking, hydrator, root_limit)
    nodes = {
        row: _Node(row, redacted, root=True, hop=0)
        for row, redacted in pool[: min(root_limit, node_limit)]
    }
    root_rows = list(nodes)
    edges = _expand(
        snapshot, hydrator, plan.trust, plan.filters, nodes, max_hops, node_limit, edge_limit
    )

    ids = snapshot.table.ids
    created = snapshot.table.content["created_at"]
    rank_of = {row: i for i, row in enumerate(root_rows)}

    def key(node: _Node) -> tuple[int, int, float, int, str]:
        if node.root:
            return (0, rank_of[node.row], 0.0, 0, "")
        salience = hydrator.full(node.row).salience
        return (1, node.hop, -salience, -int(created[node.row]), ids[node.row])

    ordered = sorted(nodes.values(), key=key)
    graph_nodes = [
        GraphNode(record=hydrator.visible(n.row, n.redacted), root=n.root, hop=n.hop)
        for n in ordered
    ]
    root_ids = [ids[row] for row in root_rows]
    if not plan.explain:
        return RetrieveGraphResult(
            nodes=graph_nodes, edges=edges, root_ids=root_ids, selection=selection
        )
    roots = [Placed(row, nodes[row].redacted, hydrator.full(row).salience) for row in root_rows]
    explanations = explain_rows(
        roots,
        ranking.evidence,
        positions(ranking.ranked),
        ids,
        snapshot.moment,
        boosts,
        searched_with=turns_searched_with(snapshot, ranking.evidence, roots),
    )
    return ExplainedRetrieveGraphResult(
        nodes=graph_nodes,
        edges=edges,
        root_ids=root_ids,
        selection=selection,
        explanations=explanations,
        searched_toward=[ids[int(row)] for row in ranking.searched_toward],
    )


def _root_candidates(
    snapshot: Snapshot, plan: Plan, ranking: Ranking, hydrator: Hydrator, root_limit: int
) -> tuple[list[tuple[int, bool]], dict[int, float]]:
    """(row, redacted) of the root candidates, best first: the ranked pool plus the entities
    the descriptor names, reranked when there is a descriptor; and the boost each candidate
    gained (as added to its score)."""
    ranked = ranking.ranked
    pool = list(zip(ranked.rows.tolist(), ranked.redacted.tolist(), strict=True))
    descriptor = plan.descriptor
    if not descriptor.strip():
        return pool, {}
    scores = [0.0] * len(pool) if ranking.scores is None else ranking.scores.tolist()
    if MemoryType.ENTITY in (plan.filters.types or LAYERS):
        named = entity_roots(snapshot, descriptor, plan.trust, plan.filters, root_limit)
        # Only entities the caller reads in full join by name: a redacted one joining would
        # tell that the hidden entity bears the name the descriptor says.
        readable = named.rows[~named.redacted].tolist()
        joined = _first_of_each([*pool, *((row, False) for row in readable)])
        # Entities joined for their name alone bring no ranking score of their own: their
        # boost (the descriptor is their name) is what places them.
        scores += [0.0] * (len(joined) - len(pool))
        pool = joined
    related = related_entities(snapshot, plan.trust)
    weight = word_weights(snapshot)
    boosts = [
        0.0 if redacted else root_boost(hydrator.full(row), descriptor, related, weight)
        for row, redacted in pool
    ]
    gained = {row: boost / CANONICAL_BOOST for (row, _), boost in zip(pool, boosts, strict=True)}
    return [pool[i] for i in rerank(scores, boosts)], gained


def _expand(
    snapshot: Snapshot,
    hydrator: Hydrator,
    trust: TrustContext,
    filters: Filters,
    nodes: dict[int, _Node],
    max_hops: int,
    node_limit: int,
    edge_limit: int,
) -> list[GraphEdge]:
    """Breadth-first expansion from the root nodes (added to ``nodes``); the edges found."""
    ids = snapshot.table.ids
    neighbour_filters = Filters(valid_at=filters.valid_at)
    edges: list[GraphEdge] = []
    emitted: set[tuple[str, str, str]] = set()
    queue = deque(nodes.values())
    while queue and len(edges) < edge_limit:
        node = queue.popleft()
        if node.hop >= max_hops:
            continue
        source = ids[node.row]
        # Traversal reads the whole record, even when the caller sees it redacted.
        for relation in hydrator.full(node.row).relations:
            if len(edges) >= edge_limit:
                break
            edge_key = (source, relation.predicate, relation.target_id)
            if edge_key in emitted:
                continue
            target = snapshot.row(relation.target_id)
            if target is None:
                continue
            if target not in nodes:
                redacted = _admit(snapshot, target, trust, neighbour_filters)
                if redacted is None or len(nodes) >= node_limit:
                    continue
                nodes[target] = _Node(target, redacted, root=False, hop=node.hop + 1)
                queue.append(nodes[target])
            emitted.add(edge_key)
            edges.append(
                GraphEdge(
                    source_id=source,
                    predicate=relation.predicate,
                    target_id=relation.target_id,
                    weight=relation.weight,
                    created_at=relation.created_at,
                )
            )
    return edges


def _first_of_each(pool: list[tuple[int, bool]]) -> list[tuple[int, bool]]:
    """Drop repeated rows, keeping first occurrences in order."""
    seen: set[int] = set()
    unique = []
    for row, redacted in pool:
        if row not in seen:
            seen.add(row)
            unique.append((row, redacted))
    return unique


def _admit(snapshot: Snapshot, row: int, trust: TrustContext, filters: Filters) -> bool | None:
    """Whether a neighbour is shown redacted (True) or in full (False); None if not at all."""
    rows = np.array([row], dtype=np.int64)
    full, redacted = visibility(snapshot, rows, trust)
    if not (full[0] or redacted[0]):
        return None
    if not active(snapshot, rows, snapshot.salience(rows), filters)[0]:
        return None
    return bool(redacted[0])

"""The relation graph: every record's outgoing relations, and who points at each record.

At most one relation per (source, predicate, target): a repeat replaces the earlier one in
place, as the aggregate does. Targets are record ids and may name records created later.

Most records are pointed at once, if at all, so a target's incoming edge is kept as one
``(source, predicate)`` pair and becomes an ordered set (a dict) only when a second one
arrives: a dict per target would cost about 200 bytes per record for nothing.
"""

from __future__ import annotations

from membrane_es.schema.records import Relation

Edge = tuple[str, str]  # (source id, predicate)


class RelationGraph:
    def __init__(self) -> None:
        self.outgoing: dict[str, list[Relation]] = {}
        # target id -> its one incoming edge, or every one of them in arrival order
        self.incoming: dict[str, Edge | dict[Edge, None]] = {}

    def add(self, source_id: str, relation: Relation) -> None:
        edges = self.outgoing.setdefault(source_id, [])
        for i, existing in enumerate(edges):
            if (
                existing.predicate == relation.predicate
                and existing.target_id == relation.target_id
            ):
                edges[i] = relation
                break
        else:
            edges.append(relation)
        edge = (source_id, relation.predicate)
        known = self.incoming.get(relation.target_id)
        if known is None:
            self.incoming[relation.target_id] = edge
        elif isinstance(known, dict):
            known[edge] = None
        elif known != edge:
            self.incoming[relation.target_id] = {known: None, edge: None}

    def restore(self, outgoing: dict[str, list[Relation]]) -> None:
        """Take every record's outgoing relations as saved (each list already holds one
        relation per predicate and target); the incoming edges follow, in the order
        :meth:`add` of each relation in turn would give them."""
        self.outgoing = outgoing
        incoming: dict[str, Edge | dict[Edge, None]] = {}
        for source_id, relations in outgoing.items():
            for relation in relations:
                edge = (source_id, relation.predicate)
                target_id = relation.target_id
                known = incoming.get(target_id)
                if known is None:
                    incoming[target_id] = edge
                elif isinstance(known, dict):
                    known[edge] = None
                elif known != edge:
                    incoming[target_id] = {known: None, edge: None}
        self.incoming = incoming

    def relations(self, source_id: str) -> list[Relation]:
        """Outgoing relations in insertion order."""
        return self.outgoing.get(source_id, [])

    def sources(self, target_id: str) -> list[tuple[str, str]]:
        """(source id, predicate) of every relation pointing at ``target_id``."""
        known = self.incoming.get(target_id)
        if known is None:
            return []
        return list(known) if isinstance(known, dict) else [known]

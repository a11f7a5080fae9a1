"""The relation graph: every record's outgoing relations, and who points at each record.

At most one relation per (source, predicate, target): a repeat replaces the earlier one in
place, as the aggregate does. Targets are record ids and may name records created later.
"""

from __future__ import annotations

from membrane_es.schema.records import Relation


class RelationGraph:
    def __init__(self) -> None:
        self.outgoing: dict[str, list[Relation]] = {}
        self.incoming: dict[str, dict[tuple[str, str], None]] = {}

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
        self.incoming.setdefault(relation.target_id, {})[(source_id, relation.predicate)] = None

    def relations(self, source_id: str) -> list[Relation]:
        """Outgoing relations in insertion order."""
        return self.outgoing.get(source_id, [])

    def sources(self, target_id: str) -> list[tuple[str, str]]:
        """(source id, predicate) of every relation pointing at ``target_id``."""
        return list(self.incoming.get(target_id, {}))

"""The relation graph: every record's outgoing relations, and who points at each record.

At most one relation per (source, predicate, target): a repeat replaces the earlier one in
place, as the aggregate does. Targets are record ids and may name records created later.

Most records are pointed at once, if at all, so a target's incoming edge is kept as one
``(source, predicate)`` pair and becomes an ordered set (a dict) only when a second one
arrives: a dict per target would cost about 200 bytes per record for nothing.

A graph restored from a checkpoint keeps the saved bytes and decodes them when first used
(:meth:`RelationGraph.restore_later`): a million records' relations take over a second to
decode, which a search never needs, so an open does not pay it.
"""

from __future__ import annotations

import threading

import msgspec

from membrane_es.schema.records import Relation

Edge = tuple[str, str]  # (source id, predicate)

_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(dict[str, list[Relation]], strict=False)


class RelationGraph:
    def __init__(self) -> None:
        self._outgoing: dict[str, list[Relation]] = {}
        # target id -> its one incoming edge, or every one of them in arrival order
        self._incoming: dict[str, Edge | dict[Edge, None]] = {}
        self._saved: bytes | None = None  # encoded outgoing relations not decoded yet
        self._decoding = threading.Lock()

    @property
    def outgoing(self) -> dict[str, list[Relation]]:
        self._decode_saved()
        return self._outgoing

    @property
    def incoming(self) -> dict[str, Edge | dict[Edge, None]]:
        self._decode_saved()
        return self._incoming

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
        _note_incoming(self._incoming, source_id, relation)

    def encoded(self) -> bytes:
        """Every outgoing relation, encoded (what :meth:`restore_later` takes back)."""
        saved = self._saved
        return saved if saved is not None else _ENCODER.encode(self._outgoing)

    def restore_later(self, encoded: bytes) -> None:
        """Take the relations :meth:`encoded` gave, decoded when the graph is first read or
        written; until then the graph holds those bytes alone."""
        with self._decoding:
            self._outgoing, self._incoming = {}, {}
            self._saved = encoded

    def _decode_saved(self) -> None:
        if self._saved is None:
            return
        with self._decoding:
            saved = self._saved
            if saved is None:
                return  # another thread decoded them meanwhile
            # Each saved list already holds one relation per predicate and target; the
            # incoming edges follow in the order adding each relation in turn gives them.
            outgoing = _DECODER.decode(saved)
            incoming: dict[str, Edge | dict[Edge, None]] = {}
            for source_id, relations in outgoing.items():
                for relation in relations:
                    _note_incoming(incoming, source_id, relation)
            self._outgoing, self._incoming = outgoing, incoming
            self._saved = None

    def relations(self, source_id: str) -> list[Relation]:
        """Outgoing relations in insertion order."""
        return self.outgoing.get(source_id, [])

    def sources(self, target_id: str) -> list[tuple[str, str]]:
        """(source id, predicate) of every relation pointing at ``target_id``."""
        known = self.incoming.get(target_id)
        if known is None:
            return []
        return list(known) if isinstance(known, dict) else [known]


def _note_incoming(
    incoming: dict[str, Edge | dict[Edge, None]], source_id: str, relation: Relation
) -> None:
    """Note ``relation`` of ``source_id`` among its target's incoming edges."""
    edge = (source_id, relation.predicate)
    known = incoming.get(relation.target_id)
    if known is None:
        incoming[relation.target_id] = edge
    elif isinstance(known, dict):
        known[edge] = None
    elif known != edge:
        incoming[relation.target_id] = {known: None, edge: None}

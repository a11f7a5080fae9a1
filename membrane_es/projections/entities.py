"""The entity-name index: every entity record's canonical name and aliases, normalised.

Graph retrieval starts from entities whose name *is* the task descriptor (spec §3.5 step 2:
an exact match of the whole normalised descriptor against a canonical name or an alias), and
boosts roots related to entities whose names match it (step 4). Both need entity names
without loading records, so they are kept here, by table row. Names are content: written once,
when the entity's ``Created`` event arrives (append-only, like the other content indexes).

Normalisation is the reference's ``NormalizeEntityTerm``: trimmed and lower-cased.
"""

from __future__ import annotations

from membrane_es.schema.payloads import EntityPayload


def normalise_term(text: str) -> str:
    return text.strip().lower()


class EntityIndex:
    def __init__(self) -> None:
        # row -> (canonical name, aliases), normalised; blank names dropped
        self.names: dict[int, tuple[str, tuple[str, ...]]] = {}
        self._by_term: dict[str, list[int]] = {}

    def add(self, row: int, payload: EntityPayload) -> None:
        aliases = tuple(
            dict.fromkeys(
                term for term in (normalise_term(a.value) for a in payload.aliases) if term
            )
        )
        self.put(row, normalise_term(payload.canonical_name), aliases)

    def put(self, row: int, canonical: str, aliases: tuple[str, ...]) -> None:
        self.names[row] = (canonical, aliases)
        for term in dict.fromkeys((canonical, *aliases)):
            if term:
                self._by_term.setdefault(term, []).append(row)

    def remove(self, row: int) -> None:
        """Drop an entity's names (its record was forgotten)."""
        names = self.names.pop(row, None)
        if names is None:
            return
        canonical, aliases = names
        for term in dict.fromkeys((canonical, *aliases)):
            rows = self._by_term.get(term)
            if rows is not None and row in rows:
                rows.remove(row)
                if not rows:
                    del self._by_term[term]

    def rows_named(self, text: str) -> list[int]:
        """Rows (ascending) of the entities whose canonical name or an alias is ``text``."""
        term = normalise_term(text)
        return list(self._by_term.get(term, ())) if term else []

    def canonical(self, row: int) -> str | None:
        """The normalised canonical name of an entity row; None for other rows."""
        names = self.names.get(row)
        return None if names is None else names[0]

    def aliases(self, row: int) -> tuple[str, ...]:
        names = self.names.get(row)
        return () if names is None else names[1]

    def __len__(self) -> int:
        return len(self.names)

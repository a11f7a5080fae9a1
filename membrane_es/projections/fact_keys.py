"""Records by what they say: the sameness and topic keys of every semantic, entity and
competence record (:mod:`membrane_es.schema.fact_keys`), by table row.

Resolution on write asks "is this already known?" and "what did we know about this subject
and predicate?" before every such write; both are answered here without loading a record.
Keys are written once, when a record's ``Created`` event arrives (append-only, as the other
content indexes), and dropped when its content is forgotten. Whether a row is still active,
and its scope and sensitivity, the caller reads from the record table.
"""

from __future__ import annotations

from membrane_es.schema.fact_keys import sameness_key, topic_key
from membrane_es.schema.records import MemoryRecord

from .entities import EntityIndex
from .record_table import RecordTable


class FactKeyIndex:
    def __init__(self) -> None:
        # row -> (sameness key, topic key); "" where a record has none
        self.keys: dict[int, tuple[str, str]] = {}
        self._same: dict[str, list[int]] = {}
        self._topic: dict[str, list[int]] = {}

    def add(self, row: int, record: MemoryRecord, table: RecordTable, names: EntityIndex) -> None:
        """Note a new record's keys (entity ids read by the names the views hold)."""

        def name_of(value: str) -> str | None:
            known = table.row_of.get(value)
            return None if known is None else names.canonical(known)

        same = sameness_key(record, name_of)
        if same is None:
            return
        self.put(row, same, topic_key(record, name_of) or "")

    def put(self, row: int, same: str, topic: str) -> None:
        self.keys[row] = (same, topic)
        self._same.setdefault(same, []).append(row)
        if topic:
            self._topic.setdefault(topic, []).append(row)

    def remove(self, row: int) -> None:
        """Drop a record's keys (its content was forgotten)."""
        keys = self.keys.pop(row, None)
        if keys is None:
            return
        for index, key in zip((self._same, self._topic), keys, strict=True):
            rows = index.get(key)
            if rows is not None and row in rows:
                rows.remove(row)
                if not rows:
                    del index[key]

    def rows_same(self, key: str) -> list[int]:
        """Rows (ascending) of the records with this sameness key."""
        return list(self._same.get(key, ()))

    def rows_on_topic(self, key: str) -> list[int]:
        """Rows (ascending) of the facts with this topic key."""
        return list(self._topic.get(key, ()))

    def saved(self) -> list[list[object]]:
        return [[row, same, topic] for row, (same, topic) in self.keys.items()]

    def restore(self, saved: list[list[object]]) -> None:
        for row, same, topic in saved:
            assert isinstance(row, int) and isinstance(same, str) and isinstance(topic, str)
            self.put(row, same, topic)

    def __len__(self) -> int:
        return len(self.keys)

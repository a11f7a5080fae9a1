"""Live reads use the state columns in place; a write landing mid-read makes them answer
again from a private copy, so every answer reflects one state of the views."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from membrane_es import Membrane
from membrane_es.queries.retrieve import Retrieve, Sources, retrieve
from membrane_es.queries.retrieve_graph import RetrieveGraph, retrieve_graph
from membrane_es.queries.snapshot import PRIVATE, stale, take_snapshot
from tests.unit.builders import semantic
from tests.unit.conftest import ManualTime
from tests.unit.retrieval_support import ids, node_ids


def test_an_in_place_snapshot_goes_stale_when_a_write_is_applied(
    memory: Membrane, time: ManualTime
) -> None:
    memory.create_record(semantic("first"))
    live = take_snapshot(memory.views, time.current, None)
    private = take_snapshot(memory.views, time.current, None, private=True)
    assert live.position == memory.views.position and not stale(live)
    assert private.position == PRIVATE
    memory.create_record(semantic("second"))
    assert stale(live)
    assert not stale(private)
    assert private.size == 1


class _WritingReader:
    """An event reader that lets one write land while the query hydrates its records."""

    def __init__(self, memory: Membrane, write: Any) -> None:
        self.memory, self.write, self.loads = memory, write, 0

    def load(self, record_id: str) -> Any:
        self.loads += 1
        if self.write is not None:
            write, self.write = self.write, None
            write()
        return self.memory.application.load(record_id)

    def load_many(self, record_ids: list[str]) -> list[Any]:
        return [self.load(record_id) for record_id in record_ids]

    def load_as_of(self, record_id: str, moment: datetime) -> Any:
        return self.memory.application.load_as_of(record_id, moment)


def _sources(memory: Membrane, reader: Any, now: datetime) -> Sources:
    return Sources(views=memory.views, reader=reader, now=now)


def test_a_retrieve_overtaken_by_a_write_answers_again(memory: Membrane, time: ManualTime) -> None:
    low = memory.create_record({**semantic("low"), "salience": 0.2}).id
    high = memory.create_record({**semantic("high"), "salience": 0.9}).id

    def penalise_high() -> None:
        memory.penalize(high, 0.85, "test", "wrong")

    reader = _WritingReader(memory, penalise_high)
    query = Retrieve(limit=2)
    result = retrieve(query, _sources(memory, reader, time.current))
    assert ids(result.records) == [low, high]  # ranked after the write, not before
    assert result.records[1].salience < result.records[0].salience
    plain = retrieve(query, _sources(memory, memory.application, time.current))
    assert ids(plain.records) == ids(result.records)
    assert reader.loads > 2  # the first answer was thrown away


def test_a_graph_overtaken_by_a_write_answers_again(memory: Membrane, time: ManualTime) -> None:
    first = memory.create_record(semantic("first")).id

    def add_second() -> None:
        memory.create_record({**semantic("second"), "salience": 1.0})

    reader = _WritingReader(memory, add_second)
    query = RetrieveGraph(root_limit=5)
    result = retrieve_graph(query, _sources(memory, reader, time.current))
    plain = retrieve_graph(query, _sources(memory, memory.application, time.current))
    assert len(node_ids(result)) == 2 and first in node_ids(result)
    assert node_ids(result) == node_ids(plain)

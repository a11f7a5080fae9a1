"""Entries on durable stores: an LMDB store reopened, and two engines on one PostgreSQL log
(what one writes, the other's entries search finds, ids included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane_es import Membrane
from membrane_es.queries.entries import EntryQuery
from membrane_es.schema.entries import EntryPatch, NewEntry


def test_entries_survive_a_restart_with_the_same_ids(tmp_path: Path) -> None:
    with Membrane.open(tmp_path / "store") as memory:
        first = memory.create_entry(NewEntry(type="project", title="orchid rollout"))
        memory.revise_entry(first.id, EntryPatch(content="to staging"))
        second = memory.create_entry(NewEntry(type="user", title="tea", supersedes_ids=[]))
        before = memory.list_entries(EntryQuery(q="orchid staging")).entries
    with Membrane.open(tmp_path / "store") as memory:
        assert memory.list_entries(EntryQuery(q="orchid staging")).entries == before
        assert memory.get_entry(second.id).title == "tea"
        third = memory.create_entry(NewEntry(type="user", title="coffee"))
        assert third.id > second.id


@pytest.mark.postgres
def test_two_engines_on_one_postgres_log_share_entries(postgres_dsn: str, tmp_path: Path) -> None:
    writer = Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / "writer")
    reader = Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / "reader")
    try:
        entry = writer.create_entry(NewEntry(type="reference", title="billing endpoint url"))
        found = reader.list_entries(EntryQuery(q="billing endpoint")).entries
        assert [(e.id, e.record_id) for e in found] == [(entry.id, entry.record_id)]
        writer.invalidate_entry(entry.id)
        assert reader.list_entries(EntryQuery(q="billing endpoint")).entries == []
        again = reader.create_entry(NewEntry(type="reference", title="billing endpoint v2"))
        assert again.id > entry.id
    finally:
        writer.close()
        reader.close()

"""The entries view is checkpointed with the other read views: a restart resumes it from the
checkpoint and follows only what came after; a tampered one is discarded and rebuilt from
the log; erased text is not in a saved copy."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from membrane_es import Membrane
from membrane_es.projections.entries import EntryIndex
from membrane_es.projections.read_model import ENTRIES_FILE
from membrane_es.queries.entries import EntryQuery
from membrane_es.schema.entries import EntryPatch, NewEntry


def _history(memory: Membrane) -> None:
    first = memory.create_entry(NewEntry(type="project", title="orchid rollout", tags=["ops"]))
    memory.revise_entry(first.id, EntryPatch(content="moved to staging"))
    old = memory.create_entry(NewEntry(type="reference", title="billing endpoint"))
    memory.create_entry(
        NewEntry(type="reference", title="billing endpoint v2", supersedes_ids=[old.id])
    )
    memory.capture_memory({"note": "the staging cluster is in Frankfurt"})


def _answers(memory: Membrane) -> list[object]:
    return [
        memory.list_entries(EntryQuery(q=q, as_of=as_of)).entries
        for q in ("", "staging", "billing endpoint")
        for as_of in (None, 1)
    ] + [memory.entry_relations()]


def test_a_restart_resumes_the_entries_view_from_the_checkpoint(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        _history(memory)
        before = _answers(memory)
        position = memory.entries_view.position
    assert (tmp_path / "views" / "current" / ENTRIES_FILE).exists()
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        restored = memory.views.entries
        assert restored is not None and restored.position == position  # nothing replayed
        assert _answers(memory) == before
        later = memory.create_entry(NewEntry(type="user", title="staging owner"))
        assert later.id > max(e.id for e in before[0])  # ids continue after the checkpoint
        after = _answers(memory)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        assert _answers(memory) == after
        rebuilt = EntryIndex()
        rebuilt.catch_up(memory.application)
        assert rebuilt.db.execute("SELECT * FROM rev ORDER BY row").fetchall() == (
            memory.entries_view.db.execute("SELECT * FROM rev ORDER BY row").fetchall()
        )
        rebuilt.close()


def test_a_store_never_read_as_entries_saves_no_entries_view(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        memory.capture_memory({"note": "nothing read as an entry"})
    assert not (tmp_path / "views" / "current" / ENTRIES_FILE).exists()
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        assert [e.title for e in memory.list_entries().entries] != []


def test_a_tampered_entries_checkpoint_is_discarded_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        _history(memory)
        before = _answers(memory)
    saved = tmp_path / "views" / "current" / ENTRIES_FILE
    with sqlite3.connect(saved) as db:  # a well-formed file saying something else
        db.execute("UPDATE rev SET title = 'forged' WHERE entry = 1")
    db.close()
    with caplog.at_level(logging.WARNING, logger="membrane_es"):
        memory = Membrane.open(tmp_path, sync=False, embedder=None)
    try:
        assert "discarded" in caplog.text
        assert _answers(memory) == before
    finally:
        memory.close()


def test_a_saved_view_of_another_layout_is_not_loaded(tmp_path: Path) -> None:
    index = EntryIndex()
    index.save(tmp_path / "entries.sqlite")
    index.close()
    with sqlite3.connect(tmp_path / "entries.sqlite") as db:
        db.execute("PRAGMA user_version = 999")
    db.close()
    assert EntryIndex.load(tmp_path / "entries.sqlite") is None


def test_erased_text_is_not_in_the_saved_view(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        secret = memory.create_entry(NewEntry(type="user", title="zanzibarite diagnosis"))
        memory.create_entry(NewEntry(type="user", title="an ordinary note"))
        memory.list_entries()  # the view is built, then the erasure reaches it
        memory.delete_entry(secret.id, erase=True)
    saved = (tmp_path / "views" / "current" / ENTRIES_FILE).read_bytes()
    assert b"zanzibarite" not in saved
    assert b"ordinary" in saved

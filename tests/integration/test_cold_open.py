"""What an open from a checkpoint does, and leaves for later: its arrays come from one file
(or from a checkpoint saved as ``arrays.npz`` before it), its text index is read into memory
only when first used (the entries API never uses it), and its key store is opened once."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.projections.array_files import ARRAYS_FILE, NPZ_FILE, load_arrays
from membrane_es.projections.read_model import ReadModel
from membrane_es.queries.entries import EntryQuery
from membrane_es.stores import key_store
from tests.unit.builders import FULL_TRUST
from tests.views_support import assert_same_views, random_history


def _store(path: Path) -> list[str]:
    """A store with a history and its entries view, checkpointed; its text search's answer."""
    with Membrane.open(path, sync=False, embedder=None) as memory:
        random_history(memory, random.Random(11), 40)
        for n in range(8):
            memory.ingest_event("note", f"n{n}", summary=f"orchid deploy staging {n}")
        memory.list_entries()
        memory.checkpoint()
        return _found(memory, "orchid deploy")


def _found(memory: Membrane, query: str) -> list[str]:
    return [record.id for record in memory.retrieve(query, trust=FULL_TRUST).records]


def test_the_text_index_is_read_when_first_used_and_answers_as_before(tmp_path: Path) -> None:
    found = _store(tmp_path)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        text = memory.views.text
        assert text._conn is None  # kept as the saved file's bytes
        memory.list_entries(EntryQuery(q="orchid deploy"))
        assert text._conn is None  # the entries API answers from its own view
        assert found
        assert _found(memory, "orchid deploy") == found
        assert text._conn is not None
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        later = memory.ingest_event("note", "later", summary="marigold held for the index")
        assert memory.views.text._conn is None  # a write's document waits, held
        assert later.id in _found(memory, "marigold")


def test_a_store_closed_without_using_its_text_index_saves_it_whole(tmp_path: Path) -> None:
    _store(tmp_path)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        written = [
            memory.ingest_event("note", f"unread-{n}", summary=f"marigold unread {n}").id
            for n in range(3)
        ]
        memory.checkpoint()  # saves the index it never read
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))
        assert set(_found(memory, "marigold")) >= set(written)


def test_a_checkpoint_saved_as_npz_opens_without_a_rebuild(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _store(tmp_path)
    current = tmp_path / "views" / "current"
    np.savez(current / NPZ_FILE, **load_arrays(current / ARRAYS_FILE))  # as saved before
    (current / ARRAYS_FILE).unlink()
    aside = tmp_path / "aside"
    current.rename(aside)  # so that this open, which only lends its sealer, leaves it be
    with Membrane.open(tmp_path, sync=False, embedder=None, read_only=True) as memory:
        sealer, position = memory._checkpoints, memory.views.position
        assert sealer is not None
        aside.rename(current)
        sealer._seal(current, position)  # sealed as that version sealed it
    with caplog.at_level(logging.WARNING, logger="membrane_es"):
        memory = Membrane.open(tmp_path, sync=False, embedder=None)
    with memory:
        assert "discarded" not in caplog.text
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))
        memory.ingest_event("note", "after", summary="moves the views")
    assert (current / ARRAYS_FILE).exists() and not (current / NPZ_FILE).exists()


def test_an_open_opens_its_key_store_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _store(tmp_path)
    opened: list[Path | None] = []
    made = key_store.SqliteKeyStore.__init__

    def counted(self: key_store.SqliteKeyStore, path: Path | None = None) -> None:
        opened.append(path)
        made(self, path)

    monkeypatch.setattr(key_store.SqliteKeyStore, "__init__", counted)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        record = memory.ingest_event("note", "one", summary="sealed under a key")
        assert memory.retrieve_by_id(record.id, trust=FULL_TRUST).id == record.id
    assert opened == [tmp_path / key_store.KEY_STORE_FILE]

"""Erasure on a real LMDB store, checked on the bytes: after ``forget`` and a view rebuild no
file of the store holds the forgotten text or its key, a copy of the log taken before stays
unreadable without the destroyed key, and everything holds across a restart."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from membrane_es import Membrane
from membrane_es.embedding import HashingEmbedder
from membrane_es.stores.key_store import KEY_STORE_FILE
from tests.unit.builders import FULL_TRUST, entity, semantic

SECRET = "Zanzibarquux"
ALIAS = "Quuxalia"
KEPT = "Keepmeplease"


def _grep(directory: Path, needle: bytes) -> list[str]:
    """Every file under ``directory`` whose bytes contain ``needle`` (any case for text)."""
    found = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if needle in data or needle.lower() in data.lower():
            found.append(str(path.relative_to(directory)))
    return found


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "store"


def _fill(memory: Membrane) -> tuple[str, str, str]:
    secret = memory.create_record(
        semantic(SECRET, "lives_in", "Lisbon", tags=[f"{SECRET}-tag"]),
        rationale=f"{SECRET} told us",
    ).id
    person = memory.create_record(
        entity(SECRET, payload={"kind": "entity", "canonical_name": SECRET, "aliases": [ALIAS]})
    ).id
    kept = memory.create_record(semantic(KEPT, "likes", "tea")).id
    return secret, person, kept


def test_no_file_holds_the_forgotten_text_or_key(store: Path) -> None:
    with Membrane.open(store, embedder=HashingEmbedder()) as memory:
        secret, person, kept = _fill(memory)
        memory.checkpoint()  # a checkpoint from before holds the text in its index
        assert _grep(store / "views", SECRET.encode())
        app = memory.application
        keys = {}
        for record_id in (secret, person):
            key_id = app.content_key(record_id)
            assert key_id is not None
            keys[record_id] = app.keys.get(key_id)

        memory.forget(secret, "dpo", "erasure request")
        memory.forget(person, "dpo", "erasure request")
        memory.checkpoint()
        assert memory.verify().ok
        memory.rebuild_views()

    for needle in (SECRET, ALIAS, "Lisbon"):
        assert _grep(store, needle.encode()) == [], needle
    for key in keys.values():
        assert key is not None
        assert _grep(store, key) == []
    # the log itself never held the text: the content was sealed from the start
    assert _grep(store, KEPT.encode()) == ["views/current/text.sqlite"]


def test_a_backup_of_the_log_stays_unreadable_without_the_destroyed_key(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Membrane.open(store) as memory:
        secret, _, kept = _fill(memory)
    backup = tmp_path / "backup"
    backup.mkdir()
    shutil.copy(store / "data.mdb", backup / "data.mdb")  # the log alone
    keys_before = tmp_path / "keys-before.sqlite"
    shutil.copy(store / KEY_STORE_FILE, keys_before)  # to prove the key is what it takes
    assert _grep(backup, SECRET.encode()) == []

    with Membrane.open(store) as memory:
        memory.forget(secret, "dpo", "erasure request")

    # the backup, opened with the store's keys as they are now: the record reads redacted
    restored = tmp_path / "restored"
    shutil.copytree(backup, restored)
    shutil.copy(store / KEY_STORE_FILE, restored / KEY_STORE_FILE)
    with Membrane.open(restored) as memory:
        record = memory.retrieve_by_id(secret, trust=FULL_TRUST)
        assert record.payload is None and record.tags == []
        assert memory.retrieve_by_id(kept, trust=FULL_TRUST).payload is not None
        found = memory.retrieve(SECRET, trust=FULL_TRUST, include_retracted=True).records
        assert secret not in [r.id for r in found]  # its words are gone: no evidence of it
        listed = memory.retrieve("", trust=FULL_TRUST, include_retracted=True).records
        assert [r.payload for r in listed if r.id == secret] == [None]
        history = memory.history(secret, trust=FULL_TRUST)
        assert [h.rationale for h in history] == [""]  # even the rationale was sealed

    # with the key that was destroyed, the same bytes did read: the key is all it took
    with_old_key = tmp_path / "with-old-key"
    shutil.copytree(backup, with_old_key)
    shutil.copy(keys_before, with_old_key / KEY_STORE_FILE)
    with Membrane.open(with_old_key) as memory:
        assert SECRET in str(memory.retrieve_by_id(secret, trust=FULL_TRUST).payload)


def test_forget_holds_across_a_restart_and_a_view_rebuild(store: Path) -> None:
    with Membrane.open(store, embedder=HashingEmbedder()) as memory:
        secret, person, kept = _fill(memory)
        created = memory.retrieve_by_id(secret, trust=FULL_TRUST).created_at
        memory.forget(secret, "dpo", "erasure request")
        before = memory.retrieve_by_id(secret, trust=FULL_TRUST)

    with Membrane.open(store, embedder=HashingEmbedder()) as memory:
        after = memory.retrieve_by_id(secret, trust=FULL_TRUST)
        assert after == before
        assert memory.retrieve_by_id(secret, trust=FULL_TRUST, as_of=created).payload is None
        events = [h.event for h in memory.history(secret, trust=FULL_TRUST)]
        assert events == ["Created", "Forgotten"]
        assert memory.retrieve_by_id(person, trust=FULL_TRUST).payload is not None
        assert memory.verify().ok
        memory.rebuild_views()
        assert secret not in [r.id for r in memory.retrieve(SECRET, trust=FULL_TRUST).records]
        assert memory.retrieve_by_id(kept, trust=FULL_TRUST).payload is not None

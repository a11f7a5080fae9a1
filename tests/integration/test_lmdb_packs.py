"""Events too large for a row beside another are packed together when one commit appends
several: same reads, same chain, and a changed or lost pack is caught like a changed row."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import numpy as np
import numpy.typing as npt
import pytest
from eventsourcing.persistence import StoredEvent

from membrane_es import Membrane
from membrane_es.errors import IntegrityError
from membrane_es.projections.read_model import ReadModel
from membrane_es.stores.chain import ChainFault
from membrane_es.stores.lmdb.packs import (
    INLINE_LIMIT,
    PACK_LIMIT,
    PACKED_KEY,
    REPACK_EVERY,
    U64,
    is_pack,
    pack_key,
)
from membrane_es.stores.lmdb.recorders import LMDBApplicationRecorder
from tests.integration.test_lmdb_store import make_recorder

if TYPE_CHECKING:
    from collections.abc import Iterator

LARGE = INLINE_LIMIT + 400  # a state that would take overflow pages of its own


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[LMDBApplicationRecorder]:
    recorder = make_recorder(tmp_path)
    yield recorder
    recorder.close()


def large(count: int, size: int = LARGE) -> list[StoredEvent]:
    return [
        StoredEvent(uuid4(), 1, f"topic{i % 2}", bytes([i % 251]) * (size + i))
        for i in range(count)
    ]


def rows(recorder: LMDBApplicationRecorder) -> tuple[list[bytes], dict[bytes, bytes]]:
    """(pack keys, event rows by key) of the recorder's events sub-database."""
    db = recorder.store.open_db(recorder.events_table, create=False)
    with recorder.store.env.begin(db=db) as txn:
        found = {bytes(key): bytes(value) for key, value in txn.cursor()}
    packs = [key for key in found if is_pack(key)]
    return packs, {k: v for k, v in found.items() if not is_pack(k)}


def events_db(recorder: LMDBApplicationRecorder) -> Any:
    return recorder.store.open_db(recorder.events_table, create=False)


def test_a_commit_of_large_events_packs_them_and_reads_them_back(
    recorder: LMDBApplicationRecorder,
) -> None:
    written = large(5) + [StoredEvent(uuid4(), 1, "small", b"tiny")]
    ids = recorder.insert_events(written)

    packs, event_rows = rows(recorder)
    assert packs == [pack_key(ids[0])]
    assert all(len(row) < 100 for row in event_rows.values())  # pointers, not states
    for event in written:
        (read,) = recorder.select_events(event.originator_id)
        assert (read.topic, read.state) == (event.topic, event.state)
    notes = recorder.select_notifications(1, 10)
    assert [(n.topic, n.state) for n in notes] == [(e.topic, e.state) for e in written]
    log = recorder.read_log_rows(1, 10)
    assert log.states == [e.state for e in written]
    assert [n.topic for n in recorder.select_notifications(1, 10, topics=["topic1"])] == [
        "topic1",
        "topic1",
    ]
    report = recorder.verify()
    assert report.ok and report.checked == 6


def test_one_large_event_alone_keeps_its_row(recorder: LMDBApplicationRecorder) -> None:
    (event,) = large(1)
    recorder.insert_events([event])
    packs, event_rows = rows(recorder)
    assert packs == []
    assert any(row.endswith(event.state) for row in event_rows.values())


def test_packs_are_split_at_their_limit(recorder: LMDBApplicationRecorder) -> None:
    size = PACK_LIMIT // 3
    written = large(7, size)
    recorder.insert_events(written)
    packs, _ = rows(recorder)
    assert len(packs) >= 3
    assert [e.state for e in recorder.select_notifications(1, 10)] == [e.state for e in written]
    assert recorder.verify().ok


def test_a_changed_pack_byte_is_caught(recorder: LMDBApplicationRecorder) -> None:
    written = large(4)
    ids = recorder.insert_events(written)
    key = pack_key(ids[0])
    with recorder.store.env.begin(write=True) as txn:
        pack = bytearray(txn.get(key, db=events_db(recorder)))
        pack[len(pack) - 10] ^= 0x01  # inside the last event's state
        txn.put(key, bytes(pack), db=events_db(recorder))

    report = recorder.verify()
    assert report.fault is ChainFault.ALTERED and report.notification_id == ids[3]
    with pytest.raises(IntegrityError, match=f"notification {ids[3]}"):
        recorder.select_events(written[3].originator_id)
    assert recorder.select_events(written[0].originator_id)[0].state == written[0].state


def test_a_lost_pack_is_caught(recorder: LMDBApplicationRecorder) -> None:
    written = large(3)
    ids = recorder.insert_events(written)
    with recorder.store.env.begin(write=True) as txn:
        assert txn.delete(pack_key(ids[0]), db=events_db(recorder))

    report = recorder.verify()
    assert report.fault is ChainFault.MISSING and report.notification_id == ids[0]
    with pytest.raises(IntegrityError, match=f"notification {ids[1]} refers to a missing pack"):
        recorder.select_events(written[1].originator_id)
    with pytest.raises(IntegrityError, match=f"notification {ids[0]}"):
        recorder.read_log_rows(1, 10)


def test_a_truncated_pack_is_caught(recorder: LMDBApplicationRecorder) -> None:
    written = large(3)
    ids = recorder.insert_events(written)
    with recorder.store.env.begin(write=True) as txn:
        txn.put(pack_key(ids[0]), b"\x00", db=events_db(recorder))  # not even its topics

    report = recorder.verify()
    assert report.fault is ChainFault.ALTERED and report.notification_id == ids[0]
    with pytest.raises(IntegrityError, match=f"notification {ids[2]}"):
        recorder.select_events(written[2].originator_id)


def test_large_events_written_alone_are_packed_later(recorder: LMDBApplicationRecorder) -> None:
    written = large(4)
    ids = [recorder.insert_events([event])[0] for event in written]  # one commit each
    small = StoredEvent(uuid4(), 1, "small", b"tiny")
    recorder.insert_events([small])
    assert rows(recorder)[0] == []

    assert recorder.repack() == 4
    packs, event_rows = rows(recorder)
    assert packs == [pack_key(ids[0])]
    assert all(len(row) < 100 for row in event_rows.values())
    notes = recorder.select_notifications(1, 10)
    assert [(n.topic, n.state) for n in notes] == [(e.topic, e.state) for e in [*written, small]]
    for event in written:
        assert recorder.select_events(event.originator_id)[0].state == event.state
    report = recorder.verify()
    assert report.ok and report.checked == 5

    assert recorder.repack() == 0  # nothing new since
    more = large(2)
    recorder.insert_events([more[0]])
    recorder.insert_events([more[1]])
    assert recorder.repack() == 2
    assert len(rows(recorder)[0]) == 2
    assert recorder.verify().ok


def _create(memory: Membrane, vectors: npt.NDArray[np.float32]) -> list[str]:
    """A record for each vector (600 dimensions: each event too large for a row)."""
    return [
        memory.create_record(
            {
                "type": "semantic",
                "payload": {
                    "kind": "semantic",
                    "subject": f"s{i}",
                    "predicate": "is",
                    "object": "o",
                },
            },
            embedding=vector,
        ).id
        for i, vector in enumerate(vectors)
    ]


def test_a_store_checkpoint_packs_what_single_writes_left(tmp_path: Path) -> None:
    vectors = np.eye(600, dtype="f4")[:5]  # 600 dimensions: each event too large for a row
    with Membrane.open(tmp_path, embedder=None) as memory:
        made = _create(memory, vectors)
        memory.checkpoint()
        packs, _ = rows(memory.application.recorder)
        assert len(packs) == 1
        assert memory.verify().ok
    with Membrane.open(tmp_path, embedder=None) as memory:
        for i, record_id in enumerate(made):
            result = memory.retrieve(query_embedding=vectors[i], limit=1)
            assert [record.id for record in result.records] == [record_id]


def test_single_writes_are_repacked_as_the_log_grows(recorder: LMDBApplicationRecorder) -> None:
    written = large(REPACK_EVERY + 1)
    for event in written:
        recorder.insert_events([event])
    packs, event_rows = rows(recorder)
    assert len(packs) == 1  # the write that reached REPACK_EVERY packed what came before
    packed = [row for row in event_rows.values() if len(row) < 100]
    assert len(packed) >= REPACK_EVERY
    notes = recorder.select_notifications(1, 2 * REPACK_EVERY)
    assert [n.state for n in notes] == [e.state for e in written]
    assert recorder.verify().ok


def test_a_forgotten_record_in_a_pack_reads_as_zeros_after_a_restart(tmp_path: Path) -> None:
    vectors = np.eye(600, dtype="f4")[:4]
    with Membrane.open(tmp_path, embedder=None) as memory, memory.batch():
        made = _create(memory, vectors)
    with Membrane.open(tmp_path, embedder=None) as memory:
        assert len(rows(memory.application.recorder)[0]) == 1  # the batch's pack
        memory.forget(made[1], "tester", "asked to")
    with Membrane.open(tmp_path, embedder=None, read_only=True) as memory:
        saved = ReadModel.load(tmp_path / "views", memory.application)
        assert saved is not None
        (block,) = saved.embeddings.blocks.values()
        matrix = block.matrix[: block.size]
        assert not matrix[1].any()
        assert [bool(matrix[i].any()) for i in (0, 2, 3)] == [True, True, True]
        result = memory.retrieve(query_embedding=vectors[1], limit=4)
        assert made[1] not in [record.id for record in result.records]


def packed_mark(recorder: LMDBApplicationRecorder) -> int:
    """The last notification repacking has looked at (the meta sub-database's mark)."""
    meta = recorder.store.open_db(recorder.meta_table, create=False)
    with recorder.store.env.begin(db=meta) as txn:
        stored = txn.get(PACKED_KEY)
    assert stored is not None
    return int(U64.unpack(stored)[0])


def test_the_repack_mark_follows_commits_that_leave_nothing_to_pack(
    recorder: LMDBApplicationRecorder,
) -> None:
    recorder.insert_events(large(3))  # packed together
    recorder.insert_events([StoredEvent(uuid4(), 1, "small", b"tiny")])  # fits a row
    assert packed_mark(recorder) == 4  # no repack will read these rows back
    lone = large(1)
    recorder.insert_events(lone)  # left in its own row, for a repack to pack
    recorder.insert_events(large(3))
    assert packed_mark(recorder) == 4  # still before the lone row
    recorder.repack()
    assert packed_mark(recorder) == 8
    (stored,) = recorder.select_events(lone[0].originator_id)
    assert stored.state == lone[0].state
    assert recorder.verify().ok

"""LMDB store behaviour beyond the upstream contract.

Processes, map growth, group commit, the hash chain, error translation.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

import pytest
from eventsourcing.persistence import (
    DataError,
    InfrastructureFactory,
    InterfaceError,
    Notification,
    StoredEvent,
    Tracking,
)
from eventsourcing.persistence import IntegrityError as ConcurrentWrite

from membrane_es.errors import IntegrityError
from membrane_es.stores.lmdb.recorders import (
    ChainFault,
    LMDBApplicationRecorder,
    LMDBFactory,
    LMDBProcessRecorder,
    open_environment,
    verify_store,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 20.0


def make_recorder(
    path: Path, *, map_size: int = 64 << 20, sync: bool = True
) -> LMDBApplicationRecorder:
    store = open_environment(str(path), map_size=map_size, sync=sync)
    try:
        recorder = LMDBApplicationRecorder(store, "app")
    finally:
        store.release()
    recorder.create_table()
    return recorder


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[LMDBApplicationRecorder]:
    recorder = make_recorder(tmp_path)
    yield recorder
    recorder.close()


def events(
    originator_id: UUID | str, count: int, *, start: int = 1, size: int = 8
) -> list[StoredEvent]:
    return [
        StoredEvent(originator_id, version, f"topic{version % 3}", bytes([version % 251]) * size)
        for version in range(start, start + count)
    ]


def run_python(code: str, *args: str) -> str:
    """Run code in a fresh interpreter (a separate process with its own environment)."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


WRITER = """
import sys, uuid
from eventsourcing.persistence import StoredEvent
from membrane_es.stores.lmdb.recorders import LMDBApplicationRecorder, open_environment

store = open_environment(sys.argv[1], map_size=int(sys.argv[3]))
recorder = LMDBApplicationRecorder(store, "app")
recorder.create_table()
originator = uuid.UUID(sys.argv[2])
for version in range(1, int(sys.argv[4]) + 1):
    recorder.insert_events([StoredEvent(originator, version, "written", b"x" * int(sys.argv[5]))])
recorder.close()
store.release()
"""

READER = """
import json, sys
from membrane_es.stores.lmdb.recorders import LMDBApplicationRecorder, open_environment

store = open_environment(sys.argv[1])
recorder = LMDBApplicationRecorder(store, "app")
print(json.dumps([
    [n.id, str(n.originator_id), type(n.originator_id).__name__, n.originator_version, n.topic]
    for n in recorder.select_notifications(None, 100)
]))
print(recorder.verify().ok)
recorder.close()
store.release()
"""


# Processes --------------------------------------------------------------------------


def test_reader_process_sees_what_this_process_committed(
    tmp_path: Path, recorder: LMDBApplicationRecorder
) -> None:
    uuid_id, str_id = uuid4(), "memory-1"
    recorder.insert_events(events(uuid_id, 2) + events(str_id, 1))

    lines = run_python(READER, str(tmp_path)).splitlines()

    assert json.loads(lines[0]) == [
        [1, str(uuid_id), "UUID", 1, "topic1"],
        [2, str(uuid_id), "UUID", 2, "topic2"],
        [3, str_id, "str", 1, "topic1"],
    ]
    assert lines[1] == "True"


def test_subscription_wakes_on_commit_from_another_process(
    tmp_path: Path, recorder: LMDBApplicationRecorder
) -> None:
    originator = uuid4()
    received: list[Notification] = []
    got_all = threading.Event()

    with recorder.subscribe(gt=None) as subscription:

        def consume() -> None:
            for notification in subscription:
                received.append(notification)
                if len(received) == 5:
                    got_all.set()
                    return

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        # The subscription is blocked at the (empty) end of the log; only the
        # poller can learn of the other process's commits.
        run_python(WRITER, str(tmp_path), str(originator), str(64 << 20), "5", "10")
        assert got_all.wait(TIMEOUT), f"received only {len(received)}"
    consumer.join(TIMEOUT)

    assert [n.id for n in received] == [1, 2, 3, 4, 5]
    assert {n.originator_id for n in received} == {originator}


def test_poller_runs_only_while_a_subscription_is_active(recorder: LMDBApplicationRecorder) -> None:
    store = recorder.store
    assert store._poller is None
    subscription = recorder.subscribe(gt=None)
    with subscription:
        assert store._poller is not None
        subscription.stop()
    deadline = time.monotonic() + TIMEOUT
    while store._poller is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store._poller is None


def test_stale_map_size_is_adopted_after_another_process_grows_the_map(tmp_path: Path) -> None:
    recorder = make_recorder(tmp_path, map_size=256 << 10)
    try:
        initial = recorder.store.map_size()
        originator = uuid4()
        # About 3 MiB: the writer process doubles its map several times.
        run_python(WRITER, str(tmp_path), str(originator), str(256 << 10), "300", "10000")

        notifications = recorder.select_notifications(None, 1000)

        assert [n.id for n in notifications] == list(range(1, 301))
        assert recorder.store.map_size() > initial
        assert recorder.verify().ok
    finally:
        recorder.close()


# Map growth -------------------------------------------------------------------------


def test_map_grows_when_full(tmp_path: Path) -> None:
    recorder = make_recorder(tmp_path, map_size=128 << 10, sync=False)
    try:
        store = recorder.store
        initial = store.map_size()
        originator = uuid4()
        ids: list[int] = []
        for start in range(1, 401, 20):
            ids += recorder.insert_events(events(originator, 20, start=start, size=2000))
        # One batch larger than the whole initial map.
        ids += recorder.insert_events(events(originator, 200, start=401, size=4000))

        assert ids == list(range(1, 601))
        assert store.grow_count > 0
        assert store.map_size() > initial
        assert len(recorder.select_events(originator)) == 600
        assert recorder.verify().ok
    finally:
        recorder.close()


# Group commit -----------------------------------------------------------------------


def test_concurrent_writers_share_commits_and_get_gap_free_ids(
    recorder: LMDBApplicationRecorder,
) -> None:
    store = recorder.store
    num_threads, batches_per_thread, events_per_batch = 16, 20, 5
    start = threading.Barrier(num_threads)
    results: list[list[int]] = [[] for _ in range(num_threads)]
    errors: list[BaseException] = []
    commits_before = store.commit_count

    def writer(index: int) -> None:
        try:
            start.wait()
            for _ in range(batches_per_thread):
                results[index] += recorder.insert_events(events(uuid4(), events_per_batch))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(num_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)

    assert not errors
    total_batches = num_threads * batches_per_thread
    all_ids = sorted(i for ids in results for i in ids)
    assert all_ids == list(range(1, total_batches * events_per_batch + 1))
    for ids in results:
        # Each batch's ids are contiguous and each thread's batches ascend.
        assert ids == sorted(ids)
    commits = store.commit_count - commits_before
    assert commits < total_batches, f"{commits} commits for {total_batches} batches"
    assert recorder.verify().ok


def _queue_behind_held_writer(
    recorder: LMDBApplicationRecorder, batches: list[list[StoredEvent]]
) -> list[Any]:
    """Insert the batches from separate threads so that they commit as one group."""
    store = recorder.store
    outcomes: list[Any] = [None] * len(batches)

    def insert(index: int) -> None:
        try:
            outcomes[index] = recorder.insert_events(batches[index])
        except Exception as e:
            outcomes[index] = e

    threads = [threading.Thread(target=insert, args=(i,)) for i in range(len(batches))]
    with store._exclusive_writer():
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + TIMEOUT
        while len(store._pending) < len(batches) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(store._pending) == len(batches)
    for thread in threads:
        thread.join(TIMEOUT)
    return outcomes


def test_failing_batch_fails_alone_within_a_group(recorder: LMDBApplicationRecorder) -> None:
    store = recorder.store
    existing = uuid4()
    recorder.insert_events(events(existing, 1))
    commits_before = store.commit_count
    a, c = uuid4(), uuid4()
    duplicate = events(uuid4(), 1)

    outcomes = _queue_behind_held_writer(
        recorder,
        [
            events(a, 2),
            events(existing, 2),  # version 1 exists already
            duplicate + duplicate,  # clashes within the batch
            events(c, 3),
        ],
    )

    assert store.commit_count - commits_before == 1
    successes = [o for o in outcomes if isinstance(o, list)]
    failures = [o for o in outcomes if isinstance(o, Exception)]
    assert len(successes) == 2 and len(failures) == 2
    assert all(isinstance(f, ConcurrentWrite) for f in failures)
    assert sorted(i for ids in successes for i in ids) == [2, 3, 4, 5, 6]
    assert len(recorder.select_events(existing)) == 1
    assert recorder.select_events(duplicate[0].originator_id) == []
    assert len(recorder.select_events(a)) == 2 and len(recorder.select_events(c)) == 3
    assert recorder.verify().ok


def test_integrity_error_leaves_nothing_written(recorder: LMDBApplicationRecorder) -> None:
    originator = uuid4()
    recorder.insert_events(events(originator, 1))
    fresh = uuid4()

    with pytest.raises(ConcurrentWrite):
        recorder.insert_events(events(fresh, 3) + events(originator, 1))

    assert recorder.select_events(fresh) == []
    assert recorder.max_notification_id() == 1
    assert recorder.insert_events(events(fresh, 1)) == [2]
    assert recorder.verify().ok


def test_process_recorder_writes_events_and_tracking_atomically(tmp_path: Path) -> None:
    store = open_environment(str(tmp_path))
    recorder = LMDBProcessRecorder(store, "proc")
    store.release()
    recorder.create_table()
    try:
        originator = uuid4()
        recorder.insert_events(events(originator, 1), tracking=Tracking("up", 1))
        with pytest.raises(ConcurrentWrite):
            recorder.insert_events(events(uuid4(), 1), tracking=Tracking("up", 1))
        with pytest.raises(ConcurrentWrite):
            recorder.insert_events(events(originator, 1), tracking=Tracking("up", 2))
        assert recorder.max_tracking_id("up") == 1
        assert recorder.max_notification_id() == 1
        assert recorder.insert_events([], tracking=Tracking("up", 5)) == []
        assert recorder.max_tracking_id("up") == 5
    finally:
        recorder.close()


def test_lmdb_errors_become_eventsourcing_errors(recorder: LMDBApplicationRecorder) -> None:
    with pytest.raises(DataError):
        recorder.insert_events(events("x" * 600, 1))  # longer than LMDB's key limit
    assert recorder.max_notification_id() is None


def test_closing_one_factory_keeps_a_shared_environment_open(tmp_path: Path) -> None:
    env = {"PERSISTENCE_MODULE": "membrane_es.stores.lmdb", "LMDB_PATH": str(tmp_path)}
    first = InfrastructureFactory.construct(env)
    second = InfrastructureFactory.construct(env)
    assert isinstance(first, LMDBFactory) and isinstance(second, LMDBFactory)
    recorder1 = first.application_recorder()
    recorder2 = second.application_recorder()
    assert recorder1.store is recorder2.store

    first.close()

    assert not recorder2.store.closed
    assert recorder2.insert_events(events(uuid4(), 1)) == [1]
    with pytest.raises(InterfaceError):
        recorder1.insert_events(events(uuid4(), 1))  # closed with its factory
    second.close()
    assert recorder2.store.closed
    with pytest.raises(InterfaceError):
        recorder2.max_notification_id()


# Hash chain -------------------------------------------------------------------------


@pytest.fixture
def chained(recorder: LMDBApplicationRecorder) -> LMDBApplicationRecorder:
    for _ in range(4):
        recorder.insert_events(events(uuid4(), 2))
    assert recorder.verify().ok
    return recorder


def raw(recorder: LMDBApplicationRecorder, suffix: str) -> Any:
    db = recorder.store.open_db(recorder.table_name(suffix), create=False)
    assert db is not None
    return db


def log_key(notification_id: int) -> bytes:
    return notification_id.to_bytes(8, "big")


def test_verify_reports_ok(chained: LMDBApplicationRecorder, tmp_path: Path) -> None:
    report = chained.verify()
    assert report.ok and bool(report)
    assert report.checked == 8
    assert str(report) == "OK: 8 notifications verified"
    assert verify_store(str(tmp_path), "App").ok
    assert chained.verify(chunk_size=3).ok


def test_verify_detects_an_altered_state_byte(chained: LMDBApplicationRecorder) -> None:
    log, events_db = raw(chained, "notifications"), raw(chained, "events")
    with chained.store.env.begin(write=True) as txn:
        event_key = txn.get(log_key(5), db=log)[32:]
        row = bytearray(txn.get(event_key, db=events_db))
        row[-1] ^= 0x01
        txn.put(event_key, bytes(row), db=events_db)

    report = chained.verify()

    assert report.fault is ChainFault.ALTERED
    assert report.notification_id == 5
    assert not report


def test_verify_detects_a_deleted_row(chained: LMDBApplicationRecorder) -> None:
    with chained.store.env.begin(write=True) as txn:
        txn.delete(log_key(3), db=raw(chained, "notifications"))

    report = chained.verify()

    assert (report.fault, report.notification_id) == (ChainFault.MISSING, 3)


def test_verify_detects_a_deleted_event_row(chained: LMDBApplicationRecorder) -> None:
    with chained.store.env.begin(write=True) as txn:
        event_key = txn.get(log_key(6), db=raw(chained, "notifications"))[32:]
        txn.delete(event_key, db=raw(chained, "events"))

    report = chained.verify()

    assert (report.fault, report.notification_id) == (ChainFault.MISSING, 6)


def test_a_deleted_latest_event_is_found_by_reads_and_never_reused(
    chained: LMDBApplicationRecorder,
) -> None:
    (latest,) = chained.select_notifications(8, 1)  # the last originator's version 2
    originator = latest.originator_id
    with chained.store.env.begin(write=True) as txn:
        event_key = txn.get(log_key(8), db=raw(chained, "notifications"))[32:]
        txn.delete(event_key, db=raw(chained, "events"))

    for read in (
        lambda: chained.select_events(originator),
        lambda: chained.select_events(originator, gt=1),
        lambda: chained.select_events(originator, desc=True, limit=1),
        lambda: chained.select_events(originator, lte=5),
    ):
        with pytest.raises(IntegrityError) as raised:
            read()
        assert raised.value.notification_id == 8
    assert [e.originator_version for e in chained.select_events(originator, lte=1)] == [1]
    with pytest.raises(IntegrityError) as raised:
        chained.insert_events(events(originator, 1, start=2))
    assert raised.value.notification_id == 8
    assert chained.max_notification_id() == 8
    assert (chained.verify().fault, chained.verify().notification_id) == (ChainFault.MISSING, 8)


def test_verify_detects_a_truncated_tail(chained: LMDBApplicationRecorder) -> None:
    with chained.store.env.begin(write=True) as txn:
        txn.delete(log_key(8), db=raw(chained, "notifications"))

    report = chained.verify()

    assert (report.fault, report.notification_id) == (ChainFault.MISSING, 8)


def test_verify_detects_swapped_rows(chained: LMDBApplicationRecorder) -> None:
    log = raw(chained, "notifications")
    with chained.store.env.begin(write=True) as txn:
        row4, row6 = txn.get(log_key(4), db=log), txn.get(log_key(6), db=log)
        txn.put(log_key(4), row6, db=log)
        txn.put(log_key(6), row4, db=log)

    report = chained.verify()

    assert (report.fault, report.notification_id) == (ChainFault.REORDERED, 4)
    assert "notification 6" in report.detail


def test_verify_detects_an_event_row_outside_the_log(chained: LMDBApplicationRecorder) -> None:
    # Written with the snapshot-style recorder layout, bypassing the log.
    with chained.store.env.begin(write=True) as txn:
        source_key = txn.get(log_key(1), db=raw(chained, "notifications"))[32:]
        value = txn.get(source_key, db=raw(chained, "events"))
        version_99 = (99 + (1 << 63)).to_bytes(8, "big")
        txn.put(source_key[:-8] + version_99, value, db=raw(chained, "events"))

    report = chained.verify()

    assert report.fault is ChainFault.UNLOGGED

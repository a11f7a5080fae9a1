"""Several engines on one PostgreSQL log (each as another process would be): the hash chain
across writers, event times in log order under skewed clocks, log positions and
``min_position``, followers, encryption at rest and atomic batches. The same with real
processes is in ``test_postgres_processes.py``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from eventsourcing.cipher import AESCipher
from eventsourcing.persistence import StoredEvent

from membrane_es import ConflictError, Membrane, MembraneError, StoreAddress
from membrane_es.errors import PositionNotReachedError, StoreNotFoundError, ValidationError
from membrane_es.projections.log_pages import event_decoder
from membrane_es.stores.chain import ChainFault
from membrane_es.stores.event_times import EventTimeBehind
from membrane_es.stores.log_stamp import LogStamp
from membrane_es.timekeeping.clock import MonotonicClock
from membrane_es.wiring.application import MemoryApplication
from tests.unit.builders import FULL_TRUST, semantic
from tests.unit.conftest import ManualTime

pytestmark = pytest.mark.postgres

OpenStore = Callable[..., Membrane]


@pytest.fixture
def open_store(postgres_dsn: str) -> Iterator[OpenStore]:
    engines: list[Membrane] = []

    def open_store(**options: Any) -> Membrane:
        engine = Membrane.open_postgres(postgres_dsn, **options)
        engines.append(engine)
        return engine

    yield open_store
    for engine in engines:
        engine.close()


def _sql(dsn: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as connection:
        cursor = connection.execute(statement)
        return cursor.fetchall() if cursor.description else []


def _log_times(memory: Membrane) -> list[Any]:
    """Every event's time, in log order."""
    recorder = memory.application.recorder
    decode = event_decoder(memory.application.mapper)
    notifications = recorder.select_notifications(start=1, limit=100_000)
    return [decode(n).timestamp for n in notifications]


def test_the_chain_is_total_across_writers_and_verify_finds_tampering(
    open_store: OpenStore, postgres_dsn: str
) -> None:
    first, second = open_store(), open_store()
    ids = []
    for index in range(6):
        engine = (first, second)[index % 2]
        ids.append(engine.create_record(semantic(obj=f"port {index}")).id)
        engine.reinforce(ids[0], "agent", "useful")
    report = first.verify()
    assert report.ok and report.checked == 12
    assert second.verify().ok

    table = "public.memory_events"
    altered = "state || '\\x00'::bytea"
    _sql(postgres_dsn, f"UPDATE {table} SET state = {altered} WHERE notification_id = 5")
    report = second.verify()
    assert (report.fault, report.notification_id) == (ChainFault.ALTERED, 5)

    _sql(postgres_dsn, f"DELETE FROM {table} WHERE notification_id = 5")
    report = second.verify()
    assert (report.fault, report.notification_id) == (ChainFault.MISSING, 5)


def test_verify_reports_an_event_written_around_the_chain(
    open_store: OpenStore, postgres_dsn: str
) -> None:
    memory = open_store()
    memory.create_record(semantic())
    memory.create_record(semantic(obj="port 9090"))
    # a copy of event 2 under another version, inserted behind the recorder's back
    _sql(
        postgres_dsn,
        "INSERT INTO public.memory_events (originator_id, originator_version, topic, state) "
        "SELECT originator_id, originator_version + 1, topic, state "
        "FROM public.memory_events WHERE notification_id = 2",
    )
    report = memory.verify()
    assert report.fault is ChainFault.UNLOGGED


def test_event_times_follow_log_order_under_skewed_clocks(open_store: OpenStore) -> None:
    """One process's clock an hour ahead of the other's: the one behind is made to write
    after the newest time in the log, so times increase along the log and ``as_of`` of any
    moment sees a prefix of it."""
    ahead_time, behind_time = ManualTime(), ManualTime()
    ahead_time.advance(hours=1)
    ahead = open_store(clock=MonotonicClock(ahead_time), follow=False)
    behind = open_store(clock=MonotonicClock(behind_time), follow=False)

    shared = ahead.create_record(semantic(id="shared")).id
    behind.create_record(semantic(id="late"))  # its clock says an hour earlier
    behind.reinforce(shared, "agent", "useful")
    ahead.reinforce(shared, "agent", "useful")
    times = _log_times(ahead)
    assert len(times) == 4
    assert times == sorted(times) and len(set(times)) == len(times)

    # both writers racing, each on records of its own and one shared record
    outcomes: list[str] = []
    failures: list[BaseException] = []

    def write(engine: Membrane, time: ManualTime, name: str) -> None:
        try:
            write_all(engine, time, name)
        except BaseException as error:
            failures.append(error)

    def write_all(engine: Membrane, time: ManualTime, name: str) -> None:
        for index in range(10):
            time.advance(seconds=1)
            engine.create_record(semantic(id=f"{name}-{index}"))
            try:
                engine.reinforce(shared, name, "useful")
                outcomes.append("won")
            except ConflictError:
                outcomes.append("conflict")

    threads = [
        threading.Thread(target=write, args=(ahead, ahead_time, "ahead")),
        threading.Thread(target=write, args=(behind, behind_time, "behind")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    times = _log_times(ahead)
    assert len(times) == 4 + 20 + outcomes.count("won")
    assert times == sorted(times) and len(set(times)) == len(times)
    history = behind.history(shared, trust=FULL_TRUST)
    assert [h.version for h in history] == list(range(1, len(history) + 1))  # no fork
    assert ahead.verify().ok

    # as_of at each event's moment counts exactly the events up to it in the log
    middle = times[len(times) // 2]
    reader = open_store(views_dir=None)
    assert reader.get_metrics(as_of=middle)["total_audit_entries"] == len(times) // 2 + 1
    before_all = times[0] - timedelta(microseconds=1)
    assert reader.get_metrics(as_of=before_all)["total_records"] == 0


def test_writes_answer_with_their_position_and_reads_wait_for_it(open_store: OpenStore) -> None:
    writer, reader = open_store(), open_store()
    assert writer.last_position is None
    record = writer.create_record(semantic(subject="orchid"))
    position = writer.last_position
    assert position == writer.application.recorder.max_notification_id()
    writer.reinforce(record.id, "agent", "useful")
    assert writer.last_position == position + 1

    later = writer.last_position
    found = reader.retrieve("orchid", trust=FULL_TRUST, min_position=later).records
    assert [r.id for r in found] == [record.id]
    assert reader.get_metrics(min_position=later)["total_audit_entries"] == 2
    graph = reader.retrieve_graph("orchid", trust=FULL_TRUST, min_position=later)
    assert record.id in {node.record.id for node in graph.nodes}
    assert reader.position >= later

    # the position is the calling thread's own
    seen: list[int | None] = []
    thread = threading.Thread(target=lambda: seen.append(writer.last_position))
    thread.start()
    thread.join()
    assert seen == [None]

    with pytest.raises(PositionNotReachedError) as raised:
        reader.wait_for_position(later + 1000, timeout=0.05)
    assert raised.value.wanted == later + 1000 and raised.value.reached >= later
    with pytest.raises(ValidationError, match="min_position"):
        reader.retrieve(min_position=-1)


def test_a_process_that_never_writes_follows_the_others(open_store: OpenStore) -> None:
    follower = open_store()
    writers = [open_store(), open_store()]
    for index in range(30):
        writers[index % 2].create_record(semantic(obj=f"port {index}"))
    newest = max(w.last_position or 0 for w in writers)
    follower.wait_for_position(newest)
    assert follower.position == newest
    assert follower.get_metrics()["total_records"] == 30


def test_the_subscription_moves_a_followers_views_without_any_read(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No read, no wait and no catch-up on the follower: only its LISTEN/NOTIFY subscription
    can bring the others' writes into its views."""
    follower = open_store()
    subscription = follower._follower
    assert subscription is not None
    _until(lambda: subscription.following, "the follower never subscribed")
    views = follower._views
    caught_up: list[int] = []
    # a catch-up (what a read does when nothing follows the log) would be seen here
    monkeypatch.setattr(views, "catch_up", lambda app: caught_up.append(views.position))
    writers = [open_store(), open_store()]
    for index in range(10):
        writers[index % 2].create_record(semantic(obj=f"port {index}"))
    newest = max(w.last_position or 0 for w in writers)
    _until(lambda: views.position == newest, "the views never reached the newest write")
    assert subscription.following and caught_up == []
    assert views.table.size == 10


def _until(condition: Callable[[], bool], failure: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.01)


def test_a_position_on_an_lmdb_store_is_read_your_writes_too(tmp_path: Path) -> None:
    with Membrane.open(tmp_path / "store") as memory:
        memory.create_record(semantic())
        assert memory.last_position == 1
        assert memory.retrieve(trust=FULL_TRUST, min_position=1).records
        with pytest.raises(PositionNotReachedError):
            memory.wait_for_position(5, timeout=0.02)


def test_encryption_at_rest(open_store: OpenStore, postgres_dsn: str) -> None:
    key = AESCipher.create_key(16)
    env = {"CIPHER_TOPIC": "eventsourcing.cipher:AESCipher", "CIPHER_KEY": key}
    memory = open_store(env=env)
    memory.create_record(semantic(subject="tangerine-secret"))
    states = _sql(postgres_dsn, "SELECT state FROM public.memory_events")
    assert states and all(b"tangerine-secret" not in bytes(row[0]) for row in states)
    other = open_store(env=env)
    found = other.retrieve("tangerine", trust=FULL_TRUST, min_position=1).records
    assert [r.payload.subject for r in found] == ["tangerine-secret"]  # type: ignore[union-attr]
    assert other.verify().ok


def test_a_batch_that_loses_a_race_writes_nothing(open_store: OpenStore, postgres_dsn: str) -> None:
    first, second = open_store(), open_store()
    shared = first.create_record(semantic(id="shared")).id
    with pytest.raises(ConflictError), first.batch():
        first.create_record(semantic(id="only-with-the-batch"))
        first.reinforce(shared, "agent", "useful")  # loaded at version 1 here
        second.reinforce(shared, "other", "first")  # ...and revised meanwhile elsewhere
    (count,) = _sql(postgres_dsn, "SELECT count(*) FROM public.memory_events")[0]
    assert count == 2
    assert not first.application.exists("only-with-the-batch")
    assert first.verify().ok


def test_a_log_written_before_the_chain_is_chained_at_open(
    open_store: OpenStore, postgres_dsn: str
) -> None:
    from membrane_es.stores.postgres.database import postgres_settings

    # written by eventsourcing's own recorder, as stores were before the chain existed
    settings = {**postgres_settings(postgres_dsn), "PERSISTENCE_MODULE": "eventsourcing.postgres"}
    legacy = Membrane(MemoryApplication(settings))
    first = legacy.create_record(semantic(id="old-1")).id
    legacy.reinforce(first, "agent", "useful")
    legacy.close()

    memory = open_store()
    report = memory.verify()
    assert report.ok and report.checked == 2
    # the head carries the newest old event's time, so every writer's next write follows it
    recorder = memory.application.recorder
    newest = _log_times(memory)[-1]
    assert recorder.last_event_time() == newest
    with pytest.raises(EventTimeBehind) as behind:
        _write_timed(recorder, newest)
    assert behind.value.log_time == newest
    memory.create_record(semantic(id="new-1"))
    assert memory.verify().checked == 3
    assert open_store().verify().ok  # chained once only


def _write_timed(recorder: Any, moment: datetime) -> None:
    """A save of one event timed at ``moment``, straight to the recorder (as a process whose
    clock says ``moment`` would make it)."""
    event = StoredEvent(uuid4(), 1, "timed", b"state")
    recorder.insert_events([event], log_stamp=LogStamp(event_times=(moment, moment)))


def test_an_imported_log_times_the_next_write_after_its_events(
    open_store: OpenStore, tmp_path: Path
) -> None:
    """A process whose clock is an hour behind, opened before the import (so it has not seen
    the imported times), still writes after them: the import gave the log its newest time."""
    with Membrane.open(tmp_path / "source") as source:
        first = source.create_record(semantic(id="exported-1")).id
        source.reinforce(first, "agent", "useful")
        exported = tmp_path / "log.jsonl"
        with exported.open("wb") as out:
            source.export_log(out)
    behind_time = ManualTime(datetime.now(UTC) - timedelta(hours=1))
    behind = open_store(clock=MonotonicClock(behind_time), follow=False)
    importer = open_store(follow=False)
    assert importer.import_log(exported) == 2
    imported = _log_times(importer)
    assert importer.application.recorder.last_event_time() == imported[-1]

    behind.create_record(semantic(id="after-the-import"))
    times = _log_times(importer)
    assert len(times) == 3 and times == sorted(times) and times[-1] > imported[-1]
    assert importer.verify().ok


def test_a_keyed_chain_needs_its_key(open_store: OpenStore, postgres_dsn: str) -> None:
    key = b"chain key kept outside the store"
    memory = open_store(chain_key=key)
    memory.create_record(semantic())
    assert open_store(chain_key=key).verify().ok
    for wrong in ({}, {"chain_key": b"another key"}):
        with pytest.raises(MembraneError, match="chain"):
            open_store(**wrong)
    # a chain recomputed without the key does not pass
    _sql(postgres_dsn, "UPDATE public.memory_events SET state = state || '\\x00'::bytea")
    assert not memory.verify().ok


def test_a_store_that_must_exist_is_not_created(postgres_dsn: str) -> None:
    with pytest.raises(StoreNotFoundError, match="schema tenant_nobody"):
        Membrane.open_postgres(postgres_dsn, schema="tenant_nobody", create=False)
    with pytest.raises(StoreNotFoundError):
        Membrane.verify_store(StoreAddress(dsn=postgres_dsn, schema="tenant_nobody"))
    with psycopg.connect(postgres_dsn) as connection:
        found = connection.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = 'tenant_nobody'"
        ).fetchone()
    assert found is None


def test_verify_without_views_names_the_first_bad_event(
    open_store: OpenStore, postgres_dsn: str
) -> None:
    key = b"chain key kept outside the store"
    memory = open_store(chain_key=key)
    for index in range(3):
        memory.create_record(semantic(obj=f"port {index}"))
    report = Membrane.verify_store(StoreAddress(dsn=postgres_dsn), chain_key=key)
    assert report.ok and report.checked == 3
    # the key is part of the check
    assert not Membrane.verify_store(StoreAddress(dsn=postgres_dsn)).ok
    _sql(
        postgres_dsn,
        "UPDATE public.memory_events SET state = state || '\\x00'::bytea WHERE notification_id = 2",
    )
    report = Membrane.verify_store(StoreAddress(dsn=postgres_dsn), chain_key=key)
    assert (report.fault, report.notification_id) == (ChainFault.ALTERED, 2)

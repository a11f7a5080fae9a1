"""Record numbers written in ``Created`` events (the entries API's integer ids): dense, in log
order, never reused, per store, under concurrent writers (one LMDB store; several engines on
one PostgreSQL log, one of them stale), and unchanged for a log written before numbers."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from membrane_es import Membrane
from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.schema.entries import EntryPatch, NewEntry
from membrane_es.stores.lmdb.layout import RECORDS_KEY

WRITERS = 3
ENTRIES_EACH = 12


def created_numbers(memory: Membrane) -> list[int]:
    """The numbers of the log's ``Created`` events, in log order."""
    recorder = memory.application.recorder
    mapper = memory.application.mapper
    numbers = []
    for notification in recorder.select_notifications(start=1, limit=10**6):
        if notification.originator_version == 1:
            event: Any = mapper.to_domain_event(notification)
            assert isinstance(event, RecordAggregate.Created)
            numbers.append(event.number)
    return numbers


def test_every_creation_carries_its_number_and_entry_ids_are_those_numbers() -> None:
    with Membrane.in_memory(embedder=None) as memory:
        first = memory.create_entry(NewEntry(type="project", title="orchid rollout"))
        captured = memory.capture_memory({"note": "the staging cluster moved"})
        revised = memory.revise_entry(first.id, EntryPatch(title="orchid rollout, staged"))
        second = memory.create_entry(NewEntry(type="user", title="tea"))
        numbers = created_numbers(memory)
        assert numbers == list(range(1, len(numbers) + 1))
        events = memory.application.record_events
        assert events(first.record_id)[0].number == first.id == revised.id
        assert events(second.record_id)[0].number == second.id
        for record in captured.created_records:
            assert memory._entry_of_record(record.id, None, 0).id == (events(record.id)[0].number)
        # The revision's record took a number of its own, which no entry ever shows.
        assert events(revised.record_id)[0].number not in {first.id, second.id}


def test_a_log_written_before_numbers_keeps_its_ids(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Membrane.open(store, embedder=None) as memory:
        memory.application.numbering.count = None  # an older writer: no numbers
        old = [memory.create_entry(NewEntry(type="user", title=f"old {i}")) for i in range(3)]
        memory.revise_entry(old[0].id, EntryPatch(title="old 0, revised"))
        recorder = memory.application.recorder
        meta = recorder._log_dbs()[2]
        recorder.store.write(lambda txn: txn.delete(RECORDS_KEY, db=meta))  # never counted
        assert created_numbers(memory) == [0, 0, 0, 0]
    with Membrane.open(store, embedder=None) as memory:
        assert [memory.get_entry(e.id).title for e in old] == ["old 0, revised", "old 1", "old 2"]
        new = memory.create_entry(NewEntry(type="user", title="new"))
        assert new.id == 5  # after the four records the log holds
        assert created_numbers(memory) == [0, 0, 0, 0, 5]


def _writers_on_one_log(engines: list[Membrane]) -> list[int]:
    made: list[int] = []
    lock = threading.Lock()
    failures: list[BaseException] = []

    def write(engine: Membrane, name: int) -> None:
        try:
            for i in range(ENTRIES_EACH):
                entry = engine.create_entry(NewEntry(type="project", title=f"{name} {i}"))
                with lock:
                    made.append(entry.id)
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=write, args=(e, i)) for i, e in enumerate(engines)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    return made


@pytest.mark.postgres
def test_writers_on_one_postgres_log_take_distinct_dense_numbers(
    postgres_dsn: str, tmp_path: Path
) -> None:
    engines = [
        Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / str(i), embedder=None)
        for i in range(WRITERS)
    ]
    try:
        made = _writers_on_one_log(engines)
        total = WRITERS * ENTRIES_EACH
        assert sorted(made) == list(range(1, total + 1))
        assert created_numbers(engines[0]) == list(range(1, total + 1))
        for engine in engines:
            engine.wait_for_position(engines[0].application.recorder.max_notification_id())
            assert sorted(e.id for e in engine.list_entries().entries) == sorted(made)[-50:]
    finally:
        for engine in engines:
            engine.close()


@pytest.mark.postgres
def test_a_stale_writer_numbers_after_the_log_and_an_old_log_is_counted(
    postgres_dsn: str, tmp_path: Path
) -> None:
    first = Membrane.open_postgres(postgres_dsn, views_dir=tmp_path / "a", embedder=None)
    second = Membrane.open_postgres(
        postgres_dsn, views_dir=tmp_path / "b", embedder=None, follow=False
    )
    try:
        assert first.create_entry(NewEntry(type="user", title="one")).id == 1
        # The second engine still counts no record: the log refuses its number 1.
        assert second.create_entry(NewEntry(type="user", title="two")).id == 2
        with psycopg.connect(postgres_dsn) as connection:
            connection.execute("UPDATE public.memory_log_head SET records = NULL")
        first.application.numbering.count = 0  # and this one believes the log is empty
        assert first.create_entry(NewEntry(type="user", title="three")).id == 3
        assert created_numbers(first) == [1, 2, 3]
    finally:
        first.close()
        second.close()

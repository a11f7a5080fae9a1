"""The LMDB recorder's raw-row read of the notification log (``read_log_rows``): the same
rows, in the same order, as ``select_notifications``, column by column."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from uuid import uuid4

import pytest

from membrane_es.errors import IntegrityError
from tests.integration.test_lmdb_store import events, log_key, make_recorder, raw

if TYPE_CHECKING:
    from collections.abc import Iterator

    from membrane_es.stores.lmdb.recorders import LMDBApplicationRecorder, LogRows


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[LMDBApplicationRecorder]:
    recorder = make_recorder(tmp_path, sync=False)
    yield recorder
    recorder.close()


@pytest.fixture
def logged(recorder: LMDBApplicationRecorder) -> LMDBApplicationRecorder:
    """A log of 30 events of UUID and string originators, interleaved, of several sizes."""
    uuids, names = [uuid4() for _ in range(3)], ["memory-a", "b", "é-ü"]
    for round_ in range(5):
        for i, originator in enumerate([*uuids, *names]):
            start = round_ + 1
            recorder.insert_events(events(originator, 1, start=start, size=1 + 97 * i))
    return recorder


def as_tuples(rows: LogRows) -> list[tuple[object, ...]]:
    return [
        (
            rows.ids[i],
            rows.originator_id(i),
            rows.originator_version(i),
            rows.topics[i],
            rows.states[i],
        )
        for i in range(len(rows))
    ]


def notifications(
    recorder: LMDBApplicationRecorder, start: int, limit: int, stop: int | None = None
) -> list[tuple[object, ...]]:
    return [
        (n.id, n.originator_id, n.originator_version, n.topic, n.state)
        for n in recorder.select_notifications(start, limit, stop)
    ]


def test_rows_are_the_notifications_in_order(logged: LMDBApplicationRecorder) -> None:
    rows = logged.read_log_rows(1, 100)

    assert rows.ids == list(range(1, 31))
    assert as_tuples(rows) == notifications(logged, 1, 100)
    assert {type(rows.originator_id(i)) for i in range(len(rows))} == {type(uuid4()), str}


@pytest.mark.parametrize("page", [1, 4, 7, 30, 31])
def test_pages_from_each_position_give_the_whole_log(
    logged: LMDBApplicationRecorder, page: int
) -> None:
    read: list[tuple[object, ...]] = []
    position = 0
    while True:
        rows = logged.read_log_rows(position + 1, page)
        assert as_tuples(rows) == notifications(logged, position + 1, page)
        read += as_tuples(rows)
        if len(rows) < page:
            break
        position = rows.ids[-1]
    assert read == notifications(logged, 1, 100)


@pytest.mark.parametrize(
    ("start", "limit", "stop"),
    [
        (5, 10, 9),
        (5, 3, 20),
        (0, 4, None),
        (12, 5, 12),
        (12, 5, 11),
        (29, 10, None),
        (31, 10, None),
        (8, 0, None),
    ],
)
def test_start_limit_and_stop_select_as_for_notifications(
    logged: LMDBApplicationRecorder, start: int, limit: int, stop: int | None
) -> None:
    rows = logged.read_log_rows(start, limit, stop)
    assert as_tuples(rows) == notifications(logged, start, limit, stop)
    assert len(rows.event_keys) == len(rows.ids) == len(rows.topics) == len(rows.states)


def test_an_empty_log_has_no_rows(recorder: LMDBApplicationRecorder) -> None:
    rows = recorder.read_log_rows(1, 10)
    assert len(rows) == 0
    assert (rows.ids, rows.topics, rows.states) == ([], [], [])


def test_a_missing_event_row_is_reported(logged: LMDBApplicationRecorder) -> None:
    with logged.store.env.begin(write=True) as txn:
        event_key = txn.get(log_key(6), db=raw(logged, "notifications"))[32:]
        txn.delete(event_key, db=raw(logged, "events"))

    assert len(logged.read_log_rows(1, 5)) == 5
    with pytest.raises(IntegrityError, match="notification 6 ") as raised:
        logged.read_log_rows(2, 10)
    assert raised.value.notification_id == 6

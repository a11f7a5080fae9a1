"""The pages of the LMDB map a process touched are given back (unmapped) as reads and writes
go on, and whatever is read afterwards is what was written: the map is read-only, so the
pages come back from the page cache as they were."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import uuid4

import pytest
from eventsourcing.persistence import StoredEvent

from membrane_es.stores.lmdb import mapped_pages
from membrane_es.stores.lmdb.environment import RELEASE_EVERY
from membrane_es.stores.lmdb.mapped_pages import DATA_FILE, MappedPages, find_map
from membrane_es.stores.lmdb.recorders import LMDBApplicationRecorder
from tests.integration.test_lmdb_store import make_recorder

if TYPE_CHECKING:
    from collections.abc import Iterator

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the map is found in /proc/self/maps"
)


@pytest.fixture
def no_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages mapped past what was mapped after the last release are over budget (a store
    this small would otherwise stay within it, as the last test shows)."""
    monkeypatch.setattr(mapped_pages, "MAPPED_FLOOR", 0)
    monkeypatch.setattr(mapped_pages, "MAPPED_SHARE", 1 << 62)


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[LMDBApplicationRecorder]:
    recorder = make_recorder(tmp_path, map_size=1 << 20, sync=False)
    yield recorder
    recorder.close()


def events(count: int, size: int = 1500) -> list[StoredEvent]:
    return [StoredEvent(uuid4(), 1, "topic", os.urandom(size)) for _ in range(count)]


def releases(recorder: LMDBApplicationRecorder) -> int:
    return recorder.store.mapped.releases


@linux_only
def test_the_map_is_found_by_its_file_and_size(recorder: LMDBApplicationRecorder) -> None:
    store = recorder.store
    data_file = os.path.join(store.path, DATA_FILE)
    assert find_map(data_file, store.map_size()) is not None
    assert find_map(data_file, store.map_size() + 4096) is None  # not that size
    assert find_map(data_file + ".other", store.map_size()) is None  # not that file


@linux_only
def test_reads_give_the_pages_back_every_so_many(
    recorder: LMDBApplicationRecorder, no_budget: None
) -> None:
    written = events(8)
    recorder.insert_events(written)
    before = releases(recorder)
    for _ in range(2 * RELEASE_EVERY):
        recorder.select_notifications(1, 8)
    assert releases(recorder) >= before + 1
    assert [n.state for n in recorder.select_notifications(1, 8)] == [e.state for e in written]


@linux_only
def test_a_large_append_looks_at_its_pages_while_it_writes(
    recorder: LMDBApplicationRecorder,
    no_budget: None,
) -> None:
    before = releases(recorder)
    written = events(4 * RELEASE_EVERY)
    recorder.insert_events(written)  # one commit
    # Looked at every RELEASE_EVERY events written; given back once past the budget (the
    # first look always: nothing was measured yet).
    assert releases(recorder) >= before + 1
    notes = recorder.select_notifications(1, len(written))
    assert [n.state for n in notes] == [e.state for e in written]
    for event in written[:: RELEASE_EVERY // 2]:
        (stored,) = recorder.select_events(event.originator_id)
        assert stored.state == event.state
    assert recorder.verify().ok


@linux_only
def test_the_map_is_found_again_after_it_grows(
    recorder: LMDBApplicationRecorder, no_budget: None
) -> None:
    first = recorder.store.map_size()
    written = []
    while recorder.store.map_size() == first:  # 1 MB at first: grown by the writes
        batch = events(RELEASE_EVERY, size=4000)
        recorder.insert_events(batch)
        written += batch
    before = releases(recorder)
    more = events(2 * RELEASE_EVERY)
    recorder.insert_events(more)
    assert releases(recorder) > before
    notes = recorder.select_notifications(1, len(written) + len(more))
    assert [n.state for n in notes] == [e.state for e in written + more]


def test_nothing_is_released_where_the_map_cannot_be_found(tmp_path: Path) -> None:
    pages = MappedPages(str(tmp_path))  # no environment there: no such mapping
    assert pages.release(1 << 20) is False
    assert pages.releases == 0


@linux_only
def test_pages_within_their_budget_stay_mapped(recorder: LMDBApplicationRecorder) -> None:
    """A store whose reads map less than the budget (4 MB at least) gives its pages back
    once, then keeps them mapped: the next reads find them without a fault."""
    written = events(8)
    recorder.insert_events(written)
    for _ in range(2 * RELEASE_EVERY):
        recorder.select_notifications(1, 8)
    before = releases(recorder)
    assert before >= 1  # the first look finds no measure since a release: it releases
    for _ in range(8 * RELEASE_EVERY):
        recorder.select_notifications(1, 8)
    assert releases(recorder) == before
    assert [n.state for n in recorder.select_notifications(1, 8)] == [e.state for e in written]

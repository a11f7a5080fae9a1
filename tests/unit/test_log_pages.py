"""The read model's log reader gives the same events, in the same order, whichever way it reads
the log: raw rows from the LMDB recorder (typed decode of each state, or the mapper's own path
for a compressed log), or ``select_notifications`` for any other recorder."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.compressor import ZlibCompressor

from membrane_es import Membrane
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections import read_model
from membrane_es.projections.log_pages import LogReader, NotificationSource, event_decoder
from membrane_es.projections.read_model import ReadModel
from membrane_es.stores.abilities import Abilities, abilities_of
from membrane_es.stores.codec import MsgspecMapper
from membrane_es.stores.lmdb.recorders import LMDBApplicationRecorder, open_environment
from tests.views_support import assert_same_views, random_history


@dataclass
class Source:
    recorder: Any
    mapper: Any

    @property
    def abilities(self) -> Abilities:
        return abilities_of(self.recorder)


def read_all(source: NotificationSource, page: int) -> tuple[list[Any], list[int]]:
    """Every event through the reader in pages of ``page``, and each page's last id."""
    reader = LogReader(source)
    events: list[Any] = []
    ends: list[int] = []
    while True:
        got = reader.page((ends[-1] if ends else 0) + 1, page)
        decoded = list(got.events)
        assert len(decoded) == got.count
        events += decoded
        if got.count:
            ends.append(got.last_id)
        if got.count < page:
            return events, ends


def expected(source: NotificationSource) -> list[Any]:
    """The events as the application's mapper decodes its notifications."""
    notifications = source.recorder.select_notifications(start=1, limit=10_000)
    return [source.mapper.to_domain_event(n) for n in notifications]


@pytest.fixture
def lmdb_memory(tmp_path: Path) -> Iterator[Membrane]:
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(16)) as memory:
        random_history(memory, random.Random(3), 40)
        yield memory


@pytest.mark.parametrize("page", [1, 3, 16, 500])
def test_raw_rows_decode_to_the_mappers_events(lmdb_memory: Membrane, page: int) -> None:
    app = lmdb_memory.application
    assert app.abilities.row_reader is app.recorder
    events, ends = read_all(app, page)
    assert events == expected(app)
    last = app.recorder.max_notification_id()
    assert ends == [*range(page, last + 1, page), *([last] if last % page else [])]


@pytest.mark.parametrize("page", [1, 5, 500])
def test_notifications_decode_to_the_mappers_events(memory: Membrane, page: int) -> None:
    random_history(memory, random.Random(4), 30)
    app = memory.application
    assert app.abilities.row_reader is None
    events, _ = read_all(app, page)
    assert events == expected(app)
    assert [event_decoder(app.mapper)(n) for n in app.recorder.select_notifications(1, 999)] == (
        events
    )


def test_a_compressed_log_is_decoded_by_the_mapper(memory: Membrane, tmp_path: Path) -> None:
    random_history(memory, random.Random(5), 25)
    originals = expected(memory.application)
    compressing = MsgspecMapper(compressor=ZlibCompressor())
    store = open_environment(str(tmp_path / "compressed"), sync=False)
    recorder = LMDBApplicationRecorder(store, "compressed")
    store.release()
    recorder.create_table()
    try:
        recorder.insert_events([compressing.to_stored_event(e) for e in originals])
        events, _ = read_all(Source(recorder, compressing), 7)
        assert events == originals
    finally:
        recorder.close()


def test_an_empty_log_gives_an_empty_page(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False) as memory:
        page = LogReader(memory.application).page(1, 10)
        assert (page.count, page.last_id, list(page.events)) == (0, 0, [])


@pytest.mark.parametrize("text_worker", [True, False])
@pytest.mark.parametrize("page", [1, 7, 500])
def test_a_rebuild_from_raw_rows_equals_the_live_views(
    lmdb_memory: Membrane, page: int, text_worker: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_model, "CATCH_UP_BATCH", page)
    monkeypatch.setattr(read_model, "TEXT_WORKER_MIN_BACKLOG", 0 if text_worker else 10**9)
    rebuilt = ReadModel.rebuild(lmdb_memory.application)
    assert_same_views(lmdb_memory.views, rebuilt)
    random_history(lmdb_memory, random.Random(6), 15)  # written after: caught up alike
    rebuilt.catch_up(lmdb_memory.application)
    assert_same_views(lmdb_memory.views, rebuilt)

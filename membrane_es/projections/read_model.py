"""The read side: every view, fed in log order from the notification log.

A :class:`ReadModel` knows the last notification it reflects (``position``). The engine calls
:meth:`ReadModel.catch_up` after each of its own writes (so callers read their own writes) and
before each query (so writes by other processes show up). Views are derived data:
:meth:`ReadModel.rebuild` replays the whole log, and must give the same views as the live
ones; :meth:`ReadModel.save` checkpoints them to disk with their position, and
:meth:`ReadModel.load` restores them so a restart only replays what came after.
"""

from __future__ import annotations

import gc
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from eventsourcing.persistence import Tracking

from membrane_es.projections import approximate_file
from membrane_es.projections.array_files import (
    ARRAYS_FILE,
    load_checkpoint_arrays,
    save_arrays,
)
from membrane_es.projections.block_vectors import block_vectors, reads_by_key
from membrane_es.projections.coded_blocks import CodedBlock
from membrane_es.projections.embeddings import EmbeddingIndex
from membrane_es.projections.entities import EntityIndex
from membrane_es.projections.entries import EntryIndex
from membrane_es.projections.fact_keys import FactKeyIndex
from membrane_es.projections.log_pages import LogReader, NotificationSource
from membrane_es.projections.metrics import MetricsView
from membrane_es.projections.passages import PassageIndex
from membrane_es.projections.record_table import RecordTable
from membrane_es.projections.relation_graph import RelationGraph
from membrane_es.projections.speakers import SpeakerIndex
from membrane_es.projections.text_index import TextIndex
from membrane_es.projections.view_writes import TextSink, ViewWrites
from membrane_es.projections.views_lock import ViewsLock

CATCH_UP_BATCH = 500  # notifications read, decoded and applied at a time (larger pages
# gain nothing measurable and leave more freed memory behind)
CHECKPOINT_VERSION = 8  # 2: validity columns, entity names, text lengths; 3: metrics;
# 4: the text index's tokenizer removes every diacritic, as queries do; 5: no vectors;
# 6: long texts' passages, who said each turn; 7: the relation graph in a file of its own,
# the text index's document lengths as one blob; 8: the fact keys, and words in every
# language (folded text)
# The text index is written by a worker thread only for catch-ups at least this long: the
# thread's own malloc arena costs a few MB of resident memory for as long as the process
# lives, which outweighs the overlap it buys on a short catch-up.
TEXT_WORKER_MIN_BACKLOG = 50_000
ENTRIES_FILE = "entries.sqlite"
# Every record's outgoing relations, on their own: decoded when the graph is first used.
GRAPH_FILE = "graph.msgpack"
# The approximate index's training (its centroids), when it is trained; and, when it is
# built, the index whole (codes and lists, in FAISS's format), covering the checkpoint's
# position: an open loads it and appends what the log adds after.
APPROXIMATE_FILE = "approximate.msgpack"
APPROXIMATE_INDEX_FILE = "approximate.faiss"


class ReadModel:
    """The record table (with its state timeline), the scope-partitioned embedding matrix,
    the relation graph, the text index, the entity names and the metrics, and the log
    position they reflect."""

    def __init__(self) -> None:
        self.table = RecordTable()
        self.embeddings = EmbeddingIndex()
        self.passages = PassageIndex()  # vectors of long texts' further passages
        self.speakers = SpeakerIndex()  # who said each conversation turn
        self.graph = RelationGraph()
        self.text = TextIndex()
        self.entities = EntityIndex()
        self.facts = FactKeyIndex()  # what semantic, entity and competence records say
        self.metrics = MetricsView()
        # The entries view (:mod:`membrane_es.projections.entries`): built when entries are
        # first read, following the log on its own; checkpointed with the others once built.
        self.entries: EntryIndex | None = None
        self.position = 0
        # Held alone while events are applied, shared by a checkpoint and by reads taking
        # their snapshot (:mod:`~membrane_es.projections.views_lock`).
        self.lock = ViewsLock()
        # Rows forgotten while the text index was being written by a worker: their documents
        # are deleted once every insert is in.
        self._text_purges: list[int] = []

    # --- following the log ----------------------------------------------------------------

    def catch_up(
        self, source: NotificationSource, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Apply every notification after ``position``; returns how many were applied.

        The log is read in pages (:class:`~membrane_es.projections.log_pages.LogReader`: raw
        rows where the recorder offers them), and each page decoded and applied in bulk
        (:meth:`apply_many`). On a backlog of at least ``TEXT_WORKER_MIN_BACKLOG`` events (a
        rebuild, or catching up on open), the text index is written by one worker thread,
        page after page in order and each page as one statement (SQLite tokenises without
        the GIL), while this thread decodes and applies the next page; every page is indexed,
        and its lengths noted, before this returns."""
        entries = self.entries
        if (source.recorder.max_notification_id() or 0) <= self.position and (
            entries is None or entries.position >= self.position
        ):
            # Nothing new (the usual case before a read): no wait for the lock, which a
            # checkpoint may be holding shared for seconds.
            return 0
        with self.lock:
            applied = self._catch_up(source, progress)
            entries = self.entries
            if entries is not None:
                # Once built, the entries view follows as closely (an erasure leaves it at
                # once), never past these views: a checkpoint of both holds.
                entries.catch_up(source, until=self.position)
            return applied

    def _catch_up(
        self, source: NotificationSource, progress: Callable[[int, int], None] | None
    ) -> int:
        applied = 0
        with self.lock:
            head = source.recorder.max_notification_id() or 0
            if head <= self.position:
                return 0  # nothing new (after each write of this process): no page to read
            reader = LogReader(source)
            worker: ThreadPoolExecutor | None = None
            indexed: list[Future[None]] = []

            def index_in_worker(documents: list[tuple[int, str]]) -> None:
                assert worker is not None
                indexed.append(worker.submit(self.text.insert_many, documents))

            first_row = self.table.size  # rows the worker indexes are this one and after
            backlog = head - self.position
            use_worker = backlog >= TEXT_WORKER_MIN_BACKLOG
            try:
                with _collector_paused():
                    while True:
                        page = reader.page(self.position + 1, CATCH_UP_BATCH)
                        count = page.count
                        if use_worker and count == CATCH_UP_BATCH and worker is None:
                            worker = ThreadPoolExecutor(1, thread_name_prefix="membrane-text")
                        if count:
                            self.apply_many(
                                page.events,
                                page.last_id,
                                index_text=None if worker is None else index_in_worker,
                                count=count,
                            )
                            applied += count
                        if progress is not None:
                            progress(self.position, max(head, self.position))
                        if count < CATCH_UP_BATCH:
                            return applied
            finally:
                if worker is not None:
                    worker.shutdown(wait=True)
                    for done in indexed:
                        done.result()  # raises what the worker raised
                    self.text.note_lengths(first_row, self.table.size - 1)
                self._purge_text()

    def follow(self, recordings: Sequence[Any], source: NotificationSource) -> None:
        """Apply what this process just wrote (``Recording`` objects), without reading the log
        back; if anything else was written in between, catch up from the log instead."""
        with self.lock:
            if recordings and recordings[0].notification.id == self.position + 1:
                events = [recording.domain_event for recording in recordings]
                self.apply_many(events, recordings[-1].notification.id)
                # Nothing came between the views and this write, so they now reflect the log
                # as of its commit. Reading the head again would only find what others
                # committed since, which every query catches up on first: a read per write
                # saved, and no reader can tell the difference.
                entries = self.entries
                if entries is not None:
                    entries.catch_up(source, until=self.position)
                return
            self.catch_up(source)

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """eventsourcing's projection interface (``Projection.process_event``): reflect one
        event delivered with its log position, e.g. by an ``ApplicationSubscription`` that
        pushes new events as they are recorded. An event at or before ``position`` is
        already reflected and is ignored."""
        with self.lock:
            if tracking.notification_id > self.position:
                self.apply_many([domain_event], tracking.notification_id)

    def apply_many(
        self,
        events: Iterable[Any],
        position: int,
        index_text: TextSink | None = None,
        count: int | None = None,
    ) -> None:
        """Reflect events in log order, ``position`` being the last one's notification id
        (every way into the views comes here: see :mod:`~membrane_es.projections.view_writes`).
        ``index_text``, if given, is handed the new ``(row, search text)`` documents instead
        of writing them to the text index here. ``events`` may be an iterator if ``count``
        (an upper bound of how many) is given."""
        if count is None:
            events = list(events)
            count = len(events)
        writes = ViewWrites(self, count)
        writes.apply(events)
        writes.flush(index_text)
        self.position = position

    def purge(self, rows: list[int], *, text_now: bool = True) -> None:
        """Erase the content views hold of these rows: text, vector, entity names (the text
        later, when ``text_now`` is false: a worker may still be indexing it)."""
        for row in rows:
            self.embeddings.erase(row)
            self.entities.remove(row)
            self.facts.remove(row)
        self.passages.erase(rows)
        self.speakers.remove(rows)
        self._text_purges.extend(rows)
        if text_now:
            self._purge_text()

    def _purge_text(self) -> None:
        if self._text_purges:
            rows, self._text_purges = self._text_purges, []
            self.text.delete(rows)

    def close(self) -> None:
        self.embeddings.close()
        self.text.close()
        entries = self.entries
        if entries is not None:
            with entries.lock:
                entries.close()

    @classmethod
    def rebuild(
        cls, source: NotificationSource, progress: Callable[[int, int], None] | None = None
    ) -> ReadModel:
        """Fresh views from the whole log; ``progress(applied, head)`` after each page."""
        model = cls()
        model.catch_up(source, progress)
        return model

    # --- checkpoints ------------------------------------------------------------------------

    def save(self, directory: Path, seal: Callable[[Path, int], None] | None = None) -> None:
        """Write every view and the position they reflect (atomically replacing the last).

        ``seal(staging, position)`` runs once every file is written, before the new
        checkpoint replaces the last one: what it adds (a digest) is part of the checkpoint.
        The views are held (no event applied; reads go on) while their files are written;
        the approximate index's file — the largest, hundreds of MB at a million
        records — is written after that, from a copy, or kept from the last checkpoint
        (:mod:`~membrane_es.projections.approximate_file`), and the seal is computed after
        it: reads and writes go on meanwhile.
        """
        staging = directory / "staging"
        with self.lock.shared():  # no event applied meanwhile; reads take snapshots
            directory.mkdir(parents=True, exist_ok=True)
            # What a save killed midway left behind (a half-written staging directory, the
            # previous checkpoint not yet removed) must not stop this one.
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(directory / "old", ignore_errors=True)
            staging.mkdir()
            position = self.position
            # From a dict dropped once written (the sign codes in it are copies), before the
            # manifest is encoded: a save holds one of the two at a time, not both.
            save_arrays(staging / ARRAYS_FILE, self._checkpoint_arrays())
            # The approximate index whole, when it is built: an open loads it instead of
            # reading every vector back from the log to fill it again.
            live = self.embeddings.approximate_live()
            index_file = None
            if live is not None:
                index_file = approximate_file.prepare(
                    live,
                    directory / "current" / APPROXIMATE_INDEX_FILE,
                    staging / APPROXIMATE_INDEX_FILE,
                    position,
                )
            table = self.table
            timeline = table.timeline
            manifest = {
                "version": CHECKPOINT_VERSION,
                "position": position,
                "ids": table.ids,
                "scopes": table.scope_names,
                "checkpoints": [(count, size) for count, size, _ in timeline.checkpoints],
                "interval": timeline.interval,
                "model": self.embeddings.model,
                "dimensions": self.embeddings.dimensions,
                "skipped": self.embeddings.skipped,
                "speakers": self.speakers.saved(),
                "entities": [
                    [row, canonical, list(aliases)]
                    for row, (canonical, aliases) in self.entities.names.items()
                ],
                "facts": self.facts.saved(),
                "approximate_index": None if index_file is None else index_file.held,
            }
            (staging / "manifest.msgpack").write_bytes(msgspec.msgpack.encode(manifest))
            (staging / GRAPH_FILE).write_bytes(self.graph.encoded())
            trained = self.embeddings.approximate_state()
            if trained:
                (staging / APPROXIMATE_FILE).write_bytes(trained)
            self.text.save(staging / "text.sqlite")
            entries = self.entries
            if entries is not None:
                with entries.lock:
                    # Its own position, at most the checkpoint's: the seal's tie to the log
                    # there covers every event it reflects.
                    if entries.position <= position:
                        entries.save(staging / ENTRIES_FILE)
        # Outside the views' lock: every file above is written, none of them changes.
        # (Saves of one directory take turns: the caller holds its lock.)
        if index_file is not None:
            index_file.write(staging / APPROXIMATE_INDEX_FILE)
        if seal is not None:
            seal(staging, position)
        current = directory / "current"
        old = directory / "old"
        if current.exists():
            current.rename(old)
        staging.rename(current)
        shutil.rmtree(old, ignore_errors=True)
        if index_file is not None:
            index_file.settle(current / APPROXIMATE_INDEX_FILE)

    def _checkpoint_arrays(self) -> dict[str, Any]:
        """The views' arrays a checkpoint keeps, by member name (views of the live arrays,
        but for the sign codes and passages: copies)."""
        table = self.table
        timeline = table.timeline
        n = table.size
        arrays: dict[str, Any] = {f"content.{k}": v[:n] for k, v in table.content.items()}
        arrays.update({f"state.{k}": v[:n] for k, v in table.state.items()})
        metrics = self.metrics
        arrays["metrics.figures"] = metrics.figures[:n]
        arrays["metrics.audit_times"] = metrics.audit_times[: metrics.audit_size]
        arrays["metrics.audit_codes"] = metrics.audit_codes[: metrics.audit_size]
        arrays["timeline.times"] = timeline.times[: timeline.size]
        arrays["timeline.rows"] = timeline.rows[: timeline.size]
        arrays.update({f"timeline.{k}": v[: timeline.size] for k, v in timeline.values.items()})
        for i, (_, _, copies) in enumerate(timeline.checkpoints):
            arrays.update({f"checkpoint.{i}.{k}": v for k, v in copies.items()})
        for scope, rows in self.embeddings.block_rows().items():
            # The rows only: their vectors are in the log (see block_vectors).
            arrays[f"block.{scope}.rows"] = rows
        for scope, codes in self.embeddings.block_codes().items():
            # Their sign codes: a search shortlists by them before the vectors are read.
            arrays[f"block.{scope}.codes"] = codes
        arrays.update({f"passages.{k}": v for k, v in self.passages.arrays().items()})
        return arrays

    @staticmethod
    def discard(directory: Path) -> None:
        """Remove the checkpoint saved in ``directory`` (if any): the next load finds none."""
        for name in ("current", "staging", "old"):
            shutil.rmtree(directory / name, ignore_errors=True)

    @classmethod
    def load(cls, directory: Path, log: NotificationSource) -> ReadModel | None:
        """The views saved in ``directory``, or None if there is no usable checkpoint; the
        vectors of its embedding blocks are read from ``log`` when first needed
        (:meth:`~membrane_es.projections.embeddings.EmbeddingIndex.restore_later`)."""
        current = directory / "current"
        try:
            manifest = msgspec.msgpack.decode((current / "manifest.msgpack").read_bytes())
        except (OSError, msgspec.DecodeError):
            return None
        if manifest.get("version") != CHECKPOINT_VERSION:
            return None
        model = cls()
        table = model.table
        arrays = load_checkpoint_arrays(current)
        n = len(manifest["ids"])
        for columns, prefix in ((table.content, "content"), (table.state, "state")):
            for name in columns:
                data = arrays[f"{prefix}.{name}"]
                columns[name] = np.zeros(max(1024, 2 * n), dtype=data.dtype)
                columns[name][:n] = data
        table.size = n
        table.set_ids(list(manifest["ids"]))
        table.scope_names = list(manifest["scopes"])
        table.scope_ids = {s: i for i, s in enumerate(table.scope_names)}
        timeline = table.timeline
        size = len(arrays["timeline.times"])
        timeline.times = np.zeros(max(1024, 2 * size), dtype="i8")
        timeline.times[:size] = arrays["timeline.times"]
        timeline.rows = np.zeros(max(1024, 2 * size), dtype="i4")
        timeline.rows[:size] = arrays["timeline.rows"]
        for name in timeline.values:
            data = arrays[f"timeline.{name}"]
            timeline.values[name] = np.zeros(max(1024, 2 * size), dtype=data.dtype)
            timeline.values[name][:size] = data
        timeline.size = size
        timeline.interval = manifest["interval"]
        timeline.checkpoints = [
            (count, csize, {k: arrays[f"checkpoint.{i}.{k}"] for k in table.state})
            for i, (count, csize) in enumerate(manifest["checkpoints"])
        ]
        model.metrics.restore(
            arrays["metrics.figures"],
            arrays["metrics.audit_times"],
            arrays["metrics.audit_codes"],
            table.content["type"][:n],
        )
        index = model.embeddings
        index.model, index.dimensions = manifest["model"], manifest["dimensions"]
        index.skipped = manifest["skipped"]
        if "passages.rows" in arrays:
            model.passages.restore(
                arrays["passages.rows"], arrays["passages.numbers"], arrays["passages.vectors"]
            )
        block_rows, block_codes = (
            {
                int(key.split(".")[1]): arrays[key]
                for key in arrays
                if key.startswith("block.") and key.endswith(f".{part}")
            }
            for part in ("rows", "codes")
        )
        position, ids, dimensions = manifest["position"], table.ids, index.dimensions

        def fetch(rows: Any) -> Any:
            return block_vectors(log, position, ids, {0: rows}, dimensions)[0]

        index.restore_later(
            block_rows,
            lambda rows: block_vectors(log, position, ids, rows, dimensions),
            together=not reads_by_key(log),
            block_codes=block_codes,
            stand_in=lambda rows, codes: CodedBlock(dimensions, rows, codes, fetch),
        )
        model.graph.restore_later((current / GRAPH_FILE).read_bytes())
        if (current / APPROXIMATE_FILE).exists():
            index.approximate_saved = (current / APPROXIMATE_FILE).read_bytes()
            held = manifest.get("approximate_index")
            if held is not None:

                def fetch_after(rows: Any, after: int) -> Any:
                    return block_vectors(log, position, ids, {0: rows}, dimensions, after)[0]

                # None (missing, damaged, another FAISS's): built again from the blocks.
                every_row = np.concatenate([np.zeros(0, dtype=np.int64), *block_rows.values()])
                index.approximate_loaded = approximate_file.load(
                    index.approximate_saved,
                    held,
                    current / APPROXIMATE_INDEX_FILE,
                    dimensions,
                    every_row,
                    fetch_after,
                )
        model.speakers.restore(manifest.get("speakers", {}))
        for row, canonical, aliases in manifest["entities"]:
            model.entities.put(row, canonical, tuple(aliases))
        model.facts.restore(manifest["facts"])
        model.text.load(current / "text.sqlite")
        if (current / ENTRIES_FILE).exists():
            model.entries = EntryIndex.load(current / ENTRIES_FILE)
        model.position = position
        return model


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (if it runs) while the log is read, decoded
    and applied: that makes many container objects and no garbage cycles, and the
    collections it would trigger rescan every object the views hold (without the pause,
    most of a rebuild's time at 100k records). It runs again when the catch-up returns."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

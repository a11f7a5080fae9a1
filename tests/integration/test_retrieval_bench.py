"""The retrieval benchmark's floor (a raw scan of the events sub-database) reads every event
of a real store and nothing else: the rows that keep each record's latest version are not
events, and a store written today holds one for every record."""

from __future__ import annotations

from pathlib import Path

from bench.retrieval import raw_scan
from membrane_es import Membrane


def test_the_raw_scan_counts_the_events_and_steps_over_latest_version_rows(
    tmp_path: Path,
) -> None:
    with Membrane.open(tmp_path, embedder=None) as memory:
        records = [
            memory.create_record({"type": "working", "payload": {"thread_id": f"t{i}"}})
            for i in range(3)
        ]
        memory.reinforce(records[0].id, "bench", "useful")
        events = memory.application.recorder.max_notification_id()
    scanned, seconds = raw_scan(str(tmp_path))
    assert scanned == events == 4 and seconds >= 0

"""Real processes on one PostgreSQL log: two writers doing random operations for a bounded
time (one with its clock an hour behind), racing each other on the same records at set
rounds, and two followers that never write, one of them killed mid-stream and restarted
from its checkpoint. All four must converge: their answers (retrieve, retrieve_graph, the
full metrics, now and as of several past moments) equal those of a fresh rebuild, their
checkpointed views equal a rebuild, every operation a writer was told succeeded is in the
log with its effect, each race has one winner and no record is replaced twice, the log's
times follow its order, and ``verify()`` passes. Each process is
``tests/integration/scale_out_worker.py``; the checks are in ``scale_out_checks.py``."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import msgspec
import pytest

from membrane_es.projections.log_pages import event_decoder
from membrane_es.projections.read_model import ReadModel
from tests.integration import scale_out_checks as checks
from tests.integration import scale_out_worker as worker
from tests.views_support import assert_same_views

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
WRITE_SECONDS = 12.0  # each writer's bounded run
SKEW_HOURS = -1.0  # the second writer's clock is an hour behind
MIN_ACKED = 50  # a floor far below what a writer gets done in its run


class Process:
    """A worker process spoken to line by line."""

    def __init__(self, *args: str) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.scale_out_worker", *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def read(self) -> str:
        stdout: IO[str] | None = self.popen.stdout
        assert stdout is not None
        line = stdout.readline()
        assert line, f"worker ended (exit {self.popen.wait()}) without answering"
        return line.strip()

    def send(self, command: dict[str, Any]) -> None:
        stdin = self.popen.stdin
        assert stdin is not None
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()

    def finish(self) -> None:
        """End its input and wait for a clean exit."""
        self._close(self.popen.stdin)
        assert self.popen.wait(timeout=120) == 0
        self._close(self.popen.stdout)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()
        self._close(self.popen.stdin)
        self._close(self.popen.stdout)

    @staticmethod
    def _close(stream: IO[str] | None) -> None:
        if stream is not None and not stream.closed:
            try:
                stream.close()
            except BrokenPipeError:
                pass  # the process is gone


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.kill()


def test_writers_and_followers_in_processes_converge(
    postgres_dsn: str, tmp_path: Path, processes: list[Process]
) -> None:
    def start(*args: str) -> Process:
        process = Process(*args)
        processes.append(process)
        return process

    views = {name: str(tmp_path / name) for name in ("w1", "w2", "f1", "f2", "reader")}
    with worker.open_engine(postgres_dsn, views["reader"], follow=False) as setup:
        for record_id in worker.SHARED + worker.RACE_IDS:
            setup.create_record(worker.fact(random.Random(0), record_id))

    followers = [start("follower", postgres_dsn, views[n]) for n in ("f1", "f2")]
    for follower in followers:
        assert follower.read().startswith("ready")
    rendezvous = tmp_path / "rendezvous"
    rendezvous.mkdir()
    configs = [
        worker.WriterConfig(name=name, seed=seed, seconds=WRITE_SECONDS, rendezvous=str(rendezvous))
        for seed, name in ((1, "w1"), (2, "w2"))
    ]
    configs[1].skew_hours = SKEW_HOURS
    writers = [
        start("writer", postgres_dsn, views[c.name], msgspec.json.encode(c).decode())
        for c in configs
    ]

    # halfway through the writes, the second follower saves its views and is then killed
    assert writers[0].read() == "halfway"
    followers[1].send({"checkpoint": True})
    checkpointed = int(followers[1].read().split()[1])
    assert checkpointed >= len(worker.SHARED + worker.RACE_IDS)
    followers[1].kill()
    followers[1] = start("follower", postgres_dsn, views["f2"])
    resumed = int(followers[1].read().split()[1])
    assert resumed >= checkpointed  # from its checkpoint (or a later periodic one)

    assert writers[1].read() == "halfway"
    reports = [json.loads(writer.read()) for writer in writers]
    for report in reports:  # each kept writing for its whole run, not just the race rounds
        assert len(report["acked"]) >= MIN_ACKED, report["name"]

    # "now" is one instant for every process: later than any clock has said, so decay moved.
    # Each read ticks an engine's clock on by a microsecond, so the answers come first.
    now = datetime.now(UTC) + timedelta(days=2)
    with worker.open_engine(
        postgres_dsn, None, worker.ProcessTime.stopped_at(now), follow=False
    ) as reader:
        app = reader.application
        head = app.recorder.max_notification_id()
        assert head == max(r["position"] for r in reports)
        decode = event_decoder(app.mapper)
        events = [decode(n) for n in app.recorder.select_notifications(1, 100_000)]
        # as of: before anything, a quarter, half, three quarters in, and after the end
        times = [e.timestamp for e in events]
        moments = [times[0] - timedelta(seconds=1)]
        moments += [times[len(times) * k // 4] for k in (1, 2, 3)]
        moments.append(times[-1] + timedelta(seconds=1))
        command = {
            "position": head,
            "now": now.isoformat(),
            "moments": [m.isoformat() for m in moments],
        }
        expected = json.loads(json.dumps(worker.answers(reader, [None, *moments])))
        assert expected["now"]["retrieve"] != expected[moments[-1].isoformat()]["retrieve"]

        checks.check_times(events, skewed=reports[1], other=reports[0])
        checks.check_counts(reports, events)
        checks.check_races(reader, reports)
        checks.check_acknowledged(reader, reports, head)
        assert reader.verify().ok
        rebuilt = ReadModel.rebuild(app)

    # every process, writers and followers alike, answers as the fresh rebuild does
    for process in [*writers, *followers]:
        process.send(command)
        assert json.loads(process.read()) == expected
        process.finish()  # checkpoints its views on close
    with worker.open_engine(
        postgres_dsn, None, worker.ProcessTime.stopped_at(now), follow=False
    ) as reader:
        for name in ("w1", "w2", "f1", "f2"):
            saved = ReadModel.load(Path(views[name]), reader.application)
            assert saved is not None
            assert_same_views(saved, rebuilt)

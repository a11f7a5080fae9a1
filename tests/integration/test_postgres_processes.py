"""Real processes on one PostgreSQL log: two writers doing random operations (racing on shared
records and on each other's) and two followers that never write, one of them killed
mid-stream and restarted from its checkpoint. All of them must converge: the followers'
answers (retrieve, retrieve_graph, metrics, now and as of several past moments) equal each
other's and those of a fresh rebuild, their checkpointed views equal a rebuild, the log's
times follow its order, and ``verify()`` passes. Each process is
``tests/integration/scale_out_worker.py``."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import pytest

from membrane_es.projections.log_pages import event_decoder
from membrane_es.projections.read_model import ReadModel
from tests.integration import scale_out_worker as worker
from tests.views_support import assert_same_views

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
OPS_PER_WRITER = 60


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
        for record_id in worker.SHARED:  # the records both writers race on
            setup.create_record(worker.fact(random.Random(0), record_id))

    followers = [start("follower", postgres_dsn, views[n]) for n in ("f1", "f2")]
    for follower in followers:
        assert follower.read().startswith("ready")
    writers = [
        start("writer", postgres_dsn, views[n], str(seed), str(OPS_PER_WRITER))
        for seed, n in ((1, "w1"), (2, "w2"))
    ]

    # halfway through the writes, the second follower saves its views and is then killed
    assert writers[0].read() == "halfway"
    followers[1].send({"checkpoint": True})
    checkpointed = int(followers[1].read().split()[1])
    assert checkpointed >= len(worker.SHARED)
    followers[1].kill()
    followers[1] = start("follower", postgres_dsn, views["f2"])
    resumed = int(followers[1].read().split()[1])
    assert resumed >= checkpointed  # from its checkpoint (or a later periodic one)

    assert writers[1].read() == "halfway"
    finals = []
    for writer in writers:
        done, position, _conflicts = writer.read().split()
        assert done == "done"
        finals.append(int(position))
        writer.finish()

    with worker.open_engine(postgres_dsn, None, follow=False) as reader:
        app = reader.application
        head = app.recorder.max_notification_id()
        assert head == max(finals)
        decode = event_decoder(app.mapper)
        times = [decode(n).timestamp for n in app.recorder.select_notifications(1, 100_000)]
        assert times == sorted(times) and len(set(times)) == len(times)
        # as of: before anything, a quarter, half, three quarters in, and after the end
        moments = [times[0] - timedelta(seconds=1)]
        moments += [times[len(times) * k // 4] for k in (1, 2, 3)]
        moments.append(times[-1] + timedelta(seconds=1))
        command = {"position": head, "moments": [m.isoformat() for m in moments]}
        expected = json.loads(json.dumps(worker.answers(reader, [None, *moments])))
        assert reader.verify().ok
        rebuilt = ReadModel.rebuild(app)

    for follower in followers:
        follower.send(command)
        assert json.loads(follower.read()) == expected
        follower.finish()  # checkpoints its views on close
    for name in ("f1", "f2"):
        saved = ReadModel.load(Path(views[name]))
        assert saved is not None
        assert_same_views(saved, rebuilt)

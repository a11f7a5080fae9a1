"""What checking the hash chain costs, measured side by side in one run. Run:
``python -m bench.integrity [--events N]``.

On one LMDB store of N events (creates and revisions, durable, in batches):

* a full ``verify()`` (every link of the chain) against a default open (views from their
  sealed checkpoint; the events after it are checked as they are replayed);
* an open with ``verify_on_open=True`` against the default open;
* hashing every event once (what the chain check adds to a replay) against a rebuild of the
  views from the log (which replays, and checks, every event).

The figures decide what an open checks: a full walk is linear in the log, so it is offered
(``verify_on_open``) rather than done on every open; see docs/reliability.md.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.core import _record
from membrane_es import Membrane
from membrane_es.engine.checkpoints import Checkpoints
from membrane_es.projections.read_model import ReadModel

BATCH = 1000


def _seconds(action: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def _fill(path: Path, events: int) -> None:
    with Membrane.open(path, embedder=None) as memory:
        written = 0
        while written < events:
            with memory.batch():
                ids = [memory.create_record(_record(written + i)).id for i in range(BATCH // 2)]
                for record_id in ids:
                    memory.reinforce(record_id, "bench", "used")
            written += BATCH


def _states(memory: Membrane) -> list[bytes]:
    recorder: Any = memory.application.recorder
    states: list[bytes] = []
    head = recorder.max_notification_id() or 0
    while len(states) < head:
        states += recorder.read_log_rows(len(states) + 1, 10_000).states
    return states


def _hash_each(states: list[bytes]) -> None:
    for state in states:
        hashlib.blake2b(state, digest_size=32).digest()


def _seal_check(path: Path) -> None:
    checkpoints = Checkpoints(path / "views", None)
    checkpoints._digest(path / "views" / "current", 0, b"")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.integrity", description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-integrity-") as directory:
        path = Path(directory)
        _fill(path, args.events)
        with Membrane.open(path, embedder=None) as memory:
            head = memory.application.recorder.max_notification_id() or 0
            verify = _seconds(memory.verify)
            states = _states(memory)
            hashing = _seconds(lambda: _hash_each(states))
            rebuild = _seconds(lambda: ReadModel.rebuild(memory.application).close(), repeat=1)
        default_open = _seconds(lambda: Membrane.open(path, embedder=None).close())
        full_open = _seconds(
            lambda: Membrane.open(path, verify_on_open=True, embedder=None).close()
        )
        seal = _seconds(lambda: _seal_check(path))
    print(f"{head} events")
    print(f"full verify():              {verify:.3f} s ({verify / head * 1e6:.1f} µs/event)")
    print(f"default open:               {default_open:.3f} s")
    print(f"  of which the checkpoint's seal check: {seal / default_open:.2f}")
    print(f"  verify() / default open:  {verify / default_open:.1f}x")
    print(f"open with verify_on_open:   {full_open:.3f} s ({full_open / default_open:.1f}x)")
    print(f"rebuild (replays, checks):  {rebuild:.3f} s")
    print(f"  hashing every event / rebuild: {hashing / rebuild:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

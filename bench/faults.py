"""Crash consistency under SIGKILL: a writer process doing random operations through the
public API is killed at random moments, and a fresh process checks the store after each kill.

Run the long version (500 kills: 20–60 minutes on 2 cores, more when they are shared)::

    python -m bench.faults --kills 500

The CI test (tests/faults/test_crash.py) runs the same harness with 30 kills.

How it works. The writer (a forked child) opens the store and does random operations —
creates, captures, supersede, fork, merges of several records, retract, contest, reinforce,
penalize, batches of several — and journals each one durably (fsync) on the side: an
*intent* line (the log head before it, how many events it must write when that is known
beforehand) before the call, a *write* line (how many events the store is handed) just before
each write to the log, an *ack* line (the head after, the events it wrote) after the call
returns, or a *fail* line when it raised. It also checkpoints its read views now and then,
and starts from a map sized to its data, so the map grows often. The harness kills it with
SIGKILL at a random moment, or just after it announced a checkpoint write or a map growth.
Then a fresh (forked) process opens the store and checks:

* every acknowledged operation is there: the log holds exactly the events its ack recorded
  (topic, record, version), and the records it made can be read;
* a failed call wrote nothing;
* an acknowledged operation wrote what its last write line announced, in one write;
* the operation in flight when the writer died is all there or not at all (its events
  counted against its last write line, and against what it must write when that is known:
  no part of a multi-record operation, a capture's included, is visible);
* nothing else is in the log;
* the views, after catching up from their checkpoint, equal views rebuilt from the log;
* ``verify()`` passes;
* closing the store writes a checkpoint at the head (what a killed save left does not stop it).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import select
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membrane_es import MembraneError, Sensitivity, TrustContext
from membrane_es.engine import Membrane
from membrane_es.engine.checkpoints import Checkpoints
from membrane_es.projections.read_model import ReadModel
from membrane_es.stores.lmdb.environment import LMDBEnvironment
from membrane_es.stores.lmdb.recorders import LMDBApplicationRecorder

FULL = TrustContext(max_sensitivity=Sensitivity.HYPER)
JOURNAL = "journal.jsonl"
SMALL_MAP = str(64 * 1024)  # the map starts at the data's size, so it grows soon after a start
CHECKPOINT, GROW = b"C", b"G"  # what the writer announces on its pipe
WORDS = ["orchid", "deploy", "staging", "region", "cache", "alpha", "queue", "ledger"]

# Events an operation writes when it succeeds (None: depends on the store, e.g. capture, whose
# count the journal's write line gives).
EXPECTED = {
    "create": 1,
    "supersede": 2,
    "fork": 2,
    "retract": 1,
    "contest": 1,
    "reinforce": 1,
    "penalize": 1,
    "relate": 2,  # with an inverse edge on the target
}


# --- the writer ------------------------------------------------------------------------------


def _record(rng: random.Random) -> dict[str, Any]:
    return {
        "type": "semantic",
        "sensitivity": "low",
        "scope": rng.choice(["", "project:a", "project:b"]),
        "tags": [rng.choice(WORDS)],
        "payload": {
            "kind": "semantic",
            "subject": rng.choice(WORDS),
            "predicate": "relates_to",
            "object": " ".join(rng.sample(WORDS, 3)) + " " * rng.randrange(2000),
        },
        "provenance": {"sources": [{"kind": "observation", "ref": "crash-writer"}]},
    }


class Writer:
    """Random operations on one store, each journaled durably around the call."""

    def __init__(self, store: Path, rng: random.Random, announce: int) -> None:
        self.memory = Membrane.open(store, env={"LMDB_MAP_SIZE": SMALL_MAP}, embedder=None)
        self.rng = rng
        _cut_torn_tail(store.parent / JOURNAL)
        self.journal = os.open(store.parent / JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self.live, self.replaced = _known_records(store.parent / JOURNAL)
        self.seq = int(time.time() * 1e6)
        self._announce_on(announce)
        self._journal_writes()

    def _announce_on(self, fd: int) -> None:
        """Tell the harness (one byte on its pipe) when a checkpoint write or a map growth
        starts, so it can kill there."""
        save, grow = Checkpoints.save, LMDBEnvironment._set_map_size

        def announced_save(checkpoints: Checkpoints, views: ReadModel) -> None:
            os.write(fd, CHECKPOINT)
            save(checkpoints, views)

        def announced_grow(store: LMDBEnvironment, size: int) -> None:
            os.write(fd, GROW)
            grow(store, size)

        Checkpoints.save = announced_save  # type: ignore[method-assign,assignment]
        LMDBEnvironment._set_map_size = announced_grow  # type: ignore[method-assign,assignment]

    def _journal_writes(self) -> None:
        """Journal how many events each write to the log is handed, before it starts: what
        the checker holds an operation to (all of it or nothing), whatever the store decides
        a capture writes."""
        insert = LMDBApplicationRecorder.insert_events

        def journaled(recorder: LMDBApplicationRecorder, events: Any, **kwargs: Any) -> Any:
            self.log({"k": "write", "i": self.seq, "events": len(events)})
            return insert(recorder, events, **kwargs)

        LMDBApplicationRecorder.insert_events = journaled  # type: ignore[method-assign,assignment]

    def head(self) -> int:
        return self.memory.application.recorder.max_notification_id() or 0

    def log(self, entry: dict[str, Any]) -> None:
        os.write(self.journal, (json.dumps(entry) + "\n").encode())
        os.fsync(self.journal)

    def run(self) -> None:
        while True:
            if self.rng.random() < 0.04:
                self.memory.checkpoint()
                continue
            name, call, expect, made = self.pick()
            self.seq += 1
            before = self.head()
            self.log({"k": "intent", "i": self.seq, "op": name, "head": before, "expect": expect})
            try:
                created = call()
            except MembraneError as error:
                self.log({"k": "fail", "i": self.seq, "head": self.head(), "error": str(error)})
                continue
            after = self.head()
            events = [
                [n.topic, str(n.originator_id), n.originator_version]
                for n in self.memory.application.recorder.select_notifications(
                    before + 1, after - before
                )
            ]
            self.log({"k": "ack", "i": self.seq, "head": after, "made": created, "events": events})
            made()

    def pick(self) -> tuple[str, Callable[[], list[str]], int | None, Callable[[], None]]:
        """An operation: its name, the call (returning the ids of records it made), how
        many events it must write, and what to note once it is acknowledged."""
        rng, m = self.rng, self.memory
        live = [i for i in self.live if i not in self.replaced]
        choice = rng.random()
        if len(live) < 4 or choice < 0.22:
            record = _record(rng)
            return "create", lambda: [m.create_record(record).id], 1, _nothing
        if choice < 0.32:
            # A note writes one event; a fact also an entity, or an edge on an existing one.
            content: dict[str, str] = rng.choice(
                [
                    {"note": f"{rng.choice(WORDS)} {rng.randrange(10**6)}"},
                    {
                        "subject": rng.choice(WORDS),
                        "predicate": "uses",
                        "object": rng.choice(WORDS),
                    },
                ]
            )
            return "capture", lambda: _captured(m.capture_memory(content)), None, _nothing
        if choice < 0.40:
            return self._revision("supersede", rng.choice(live), _record(rng))
        if choice < 0.47:
            source = rng.choice(live)
            return self._revision("fork", source, _record(rng))
        if choice < 0.54:
            sources = rng.sample(live, rng.randint(2, 3))
            return self._merge(sources, _record(rng))
        if choice < 0.60:
            target = rng.choice(live)
            return (
                "retract",
                lambda: _call(m.retract, target, "writer", "wrong"),
                1,
                lambda: self.replaced.add(target),
            )
        if choice < 0.67:
            a, b = rng.sample(live, 2)
            return "contest", lambda: _call(m.contest, a, b, "writer", "doubt"), 1, _nothing
        if choice < 0.75:
            target = rng.choice(live)
            return "reinforce", lambda: _call(m.reinforce, target, "writer", "ok"), 1, _nothing
        if choice < 0.82:
            target, amount = rng.choice(live), rng.random() / 3
            return (
                "penalize",
                lambda: _call(m.penalize, target, amount, "writer", "bad"),
                1,
                _nothing,
            )
        if choice < 0.88:
            a, b = rng.sample(live, 2)
            return (
                "relate",
                lambda: _call(m.add_relation, a, "supports", b, inverse="supported_by"),
                2,
                _nothing,
            )
        return self._batch(live)

    def _revision(
        self, kind: str, source: str, new: dict[str, Any]
    ) -> tuple[str, Callable[[], list[str]], int | None, Callable[[], None]]:
        m = self.memory
        if kind == "supersede":
            return (
                "supersede",
                lambda: [m.supersede(source, new, "writer", "newer").id],
                2,
                lambda: self.replaced.add(source),
            )
        return "fork", lambda: [m.fork(source, new, "writer", "variant").id], 2, _nothing

    def _merge(
        self, sources: list[str], new: dict[str, Any]
    ) -> tuple[str, Callable[[], list[str]], int | None, Callable[[], None]]:
        m = self.memory
        return (
            "merge",
            lambda: [m.merge(sources, new, "writer", "same thing").id],
            len(sources) + 1,
            lambda: self.replaced.update(sources),
        )

    def _batch(
        self, live: list[str]
    ) -> tuple[str, Callable[[], list[str]], int | None, Callable[[], None]]:
        rng, m = self.rng, self.memory
        records = [_record(rng) for _ in range(rng.randint(1, 4))]
        targets = rng.sample(live, 2)

        def batch() -> list[str]:
            with m.batch():
                made = [m.create_record(r).id for r in records]
                m.reinforce(targets[0], "writer", "batched")
                m.penalize(targets[1], 0.05, "writer", "batched")
            return made

        return "batch", batch, len(records) + 2, _nothing


def _captured(result: Any) -> list[str]:
    return [record.id for record in result.created_records]


def _call(operation: Callable[..., None], *args: Any, **kwargs: Any) -> list[str]:
    """Run an operation that makes no record."""
    operation(*args, **kwargs)
    return []


def _nothing() -> None:
    return None


def _known_records(journal: Path) -> tuple[list[str], set[str]]:
    """Records the journal says were made, and those a later acknowledged operation replaced
    or retracted (the writer avoids revising them again)."""
    live: list[str] = []
    replaced: set[str] = set()
    for entry in read_journal(journal):
        if entry["k"] == "ack":
            live.extend(entry["made"])
            for topic, originator, _ in entry["events"]:
                if topic.endswith(("Superseded", "MergedInto", "Retracted")):
                    replaced.add(originator)
    return live, replaced


def _cut_torn_tail(journal: Path) -> None:
    """Drop a line the last kill cut short (a write the kernel stopped at a page boundary),
    so this writer's first line does not run into it. Its operation is then in flight: the
    checker accepts it whole or absent, which is what a torn intent or ack leaves."""
    if not journal.exists():
        return
    data = journal.read_bytes()
    if data and not data.endswith(b"\n"):
        with journal.open("r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
            os.fsync(f.fileno())


def read_journal(journal: Path) -> list[dict[str, Any]]:
    if not journal.exists():
        return []
    entries = []
    for line in journal.read_bytes().splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            break  # a line cut by the kill (its op is then in flight)
    return entries


# --- the checker ---------------------------------------------------------------------------


def check(store: Path) -> dict[str, int]:
    """Everything the module docstring lists; raises AssertionError on a violation. Returns
    what was checked."""
    from tests.views_support import assert_same_views

    entries = read_journal(store.parent / JOURNAL)
    with Membrane.open(store, embedder=None) as memory:
        app = memory.application
        head = app.recorder.max_notification_id() or 0
        notifications = app.recorder.select_notifications(1, head + 1) if head else []
        events = [[n.topic, str(n.originator_id), n.originator_version] for n in notifications]
        acked = 0
        made: list[str] = []
        expected_head = 0
        in_flight: dict[str, Any] | None = None
        for entry in entries:
            if entry["k"] == "write":
                assert in_flight is not None, f"a write outside an operation: {entry}"
                in_flight["writes"] = entry["events"]
            elif entry["k"] == "intent":
                if in_flight is not None:  # the writer died in it: all of it or nothing
                    _all_or_nothing(in_flight, entry["head"])
                else:
                    assert entry["head"] == expected_head, (
                        f"log moved outside an operation: {entry}"
                    )
                expected_head = entry["head"]
                in_flight = entry
            elif entry["k"] == "fail":
                assert in_flight is not None and entry["head"] == in_flight["head"], (
                    f"a failed call wrote events: {entry}"
                )
                in_flight = None
            else:
                assert in_flight is not None
                before, after = in_flight["head"], entry["head"]
                assert events[before:after] == entry["events"], (
                    f"acknowledged operation {in_flight['op']} not in the log as written"
                )
                assert after - before == in_flight.get("writes", 0), (
                    f"{in_flight} wrote {after - before}: not its last write, whole"
                )
                if in_flight["expect"] is not None:
                    assert after - before == in_flight["expect"], (
                        f"{in_flight} wrote {after - before}"
                    )
                made.extend(entry["made"])
                expected_head = after
                acked += 1
                in_flight = None
        if in_flight is None:
            assert head == expected_head, f"log has {head - expected_head} unjournaled events"
        else:
            _all_or_nothing(in_flight, head)
        for record_id in made:
            assert memory.retrieve_by_id(record_id, trust=FULL).id == record_id
        rebuilt = ReadModel.rebuild(app)
        try:
            assert_same_views(memory.views, rebuilt)
        finally:
            rebuilt.close()
        report = memory.verify()
        assert report.ok, str(report)
    # Closing checkpointed the views at the head (whatever a killed save left behind).
    seal = json.loads((store / "views" / "current" / "seal").read_bytes())
    assert seal["position"] == head, f"checkpoint at {seal['position']}, log at {head}"
    return {"operations": acked, "events": head, "records": len(made)}


def _all_or_nothing(in_flight: dict[str, Any], head: int) -> None:
    """The log head found after an operation the writer died in: none or all of its events
    (all: what its last write line announced; none when it died before announcing one)."""
    written = head - in_flight["head"]
    expect = in_flight["expect"]
    whole = in_flight.get("writes", 0)
    assert written in (0, whole) and (expect is None or written in (0, expect)), (
        f"{written} of the in-flight {in_flight['op']}'s events are visible (its write had {whole})"
    )


# --- the harness ---------------------------------------------------------------------------


@dataclass
class Tally:
    kills: int = 0
    at_checkpoint: int = 0
    at_growth: int = 0
    operations: int = 0
    events: int = 0
    failures: list[str] = field(default_factory=list)


def _fork(work: Callable[[], None], report: Path | None = None) -> int:
    """Run ``work`` in a forked child; returns its pid. The child never returns here.

    Garbage is collected in the parent first and what is left is frozen: the child's
    collector must never finalise an object of the parent's (a native library's session
    waits there on threads that exist only in the parent, and the child hangs)."""
    gc.collect()
    gc.freeze()
    pid = os.fork()
    if pid:
        gc.unfreeze()
        return pid
    code = 0
    try:
        work()
    except BaseException:  # noqa: BLE001 - the child reports every failure, then exits
        code = 1
        if report is not None:
            report.write_text(traceback.format_exc())
    os._exit(code)


def kill_once(store: Path, rng: random.Random, mode: str) -> str:
    """Start a writer, kill it (at a random moment, or at the next checkpoint write or map
    growth); returns where the kill landed."""
    read_end, write_end = os.pipe()
    seed = rng.randrange(2**32)

    def write() -> None:
        os.close(read_end)
        Writer(store, random.Random(seed), write_end).run()

    pid = _fork(write)
    os.close(write_end)
    landed = "random"
    deadline = time.monotonic() + (rng.uniform(0.02, 0.6) if mode == "random" else 5.0)
    wanted = {"checkpoint": CHECKPOINT, "growth": GROW}.get(mode)
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            signals = os.read(read_end, 4096)
            if not signals:
                break  # the writer died on its own: reported by the check
            if wanted is not None and wanted in signals:
                # Land inside the write: right away, or a few milliseconds into it.
                delay = rng.choice([0.0, rng.uniform(0, 0.01)])
                if delay:
                    select.select([], [], [], delay)
                landed = mode
                break
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_end)
    return landed


def checked_in_fresh_process(store: Path) -> tuple[dict[str, int] | None, str]:
    result = store.parent / "check.json"
    failure = store.parent / "check.failure"
    for leftover in (result, failure):
        leftover.unlink(missing_ok=True)

    def run_check() -> None:
        result.write_text(json.dumps(check(store)))

    pid = _fork(run_check, failure)
    _, status = os.waitpid(pid, 0)
    if status == 0 and result.exists():
        figures: dict[str, int] = json.loads(result.read_text())
        return figures, ""
    return None, failure.read_text() if failure.exists() else f"checker exited {status}"


def run(
    directory: Path, kills: int, seed: int = 0, log: Callable[[str], None] | None = None
) -> Tally:
    """Kill a writer ``kills`` times over one store in ``directory``, checking after each."""
    rng = random.Random(seed)
    store = directory / "store"
    tally = Tally()
    modes = ["random", "random", "checkpoint", "random", "growth"]
    for round_ in range(kills):
        landed = kill_once(store, rng, modes[round_ % len(modes)])
        tally.kills += 1
        tally.at_checkpoint += landed == "checkpoint"
        tally.at_growth += landed == "growth"
        figures, failure = checked_in_fresh_process(store)
        if figures is None:
            tally.failures.append(f"kill {round_ + 1} ({landed}): {failure}")
            break
        tally.operations, tally.events = figures["operations"], figures["events"]
        if log is not None and (round_ + 1) % 25 == 0:
            log(f"{round_ + 1} kills: {tally.operations} operations, {tally.events} events checked")
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.faults", description=__doc__)
    parser.add_argument("--kills", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="membrane-faults-") as directory:
        tally = run(Path(directory), args.kills, args.seed, log=print)
    seconds = time.perf_counter() - started
    print(
        f"kills survived: {tally.kills - len(tally.failures)} of {tally.kills} "
        f"({tally.at_checkpoint} during a checkpoint write, {tally.at_growth} during map "
        f"growth); acknowledged operations checked after the last kill: {tally.operations} "
        f"({tally.events} events); {seconds:.0f} s"
    )
    for failure in tally.failures:
        print(failure, file=sys.stderr)
    return 1 if tally.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

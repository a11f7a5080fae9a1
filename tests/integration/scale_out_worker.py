"""One process of the scale-out test (``test_postgres_processes.py``), run as
``python -m tests.integration.scale_out_worker ROLE DSN VIEWS_DIR [WRITER]``.

A **writer** (``WRITER``: a JSON object, see :class:`WriterConfig`) writes for a bounded time:
random operations on the shared records and on whatever its views hold (the other writer's
records among them), and at set moments a *race round*, in which both writers supersede or
merge the same records, meeting just before they write (see :class:`StoreWatch`) so that
both have loaded the records first. It prints ``halfway``, then its report (one JSON line:
every operation acknowledged, every refusal, each race's outcome), then serves commands as
a follower does.

A **follower** never writes. It prints ``ready <position its checkpoint held>`` once open.

Both then answer commands, one JSON object a line on stdin: ``{"checkpoint": true}`` saves
the views (answer: ``checkpointed <position>``); ``{"position": P, "now": T, "moments":
[...]}`` waits for the views to reach ``P``, stops the clock at ``T`` (so every process
answers "now" for the same instant) and prints its answers (JSON) to retrieve,
retrieve_graph and get_metrics now and as of each moment. End of input closes the engine
(views checkpointed).
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
from eventsourcing.persistence import IntegrityError as ConcurrentWrite

from membrane_es import ConflictError, Membrane
from membrane_es.embedding import HashingEmbedder
from membrane_es.errors import AlreadyReplacedError, EpisodicImmutableError
from membrane_es.projections.read_model import ReadModel
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext
from membrane_es.timekeeping.clock import MonotonicClock, wall_clock

FULL = TrustContext(max_sensitivity=Sensitivity.HYPER)
SHARED = [f"shared-{index}" for index in range(4)]
# What both writers race on, round by round: supersede one record, or merge two.
RACES: list[tuple[str, list[str]]] = [
    ("supersede", ["race-0"]),
    ("merge", ["race-1", "race-2"]),
    ("supersede", ["race-3"]),
    ("merge", ["race-4", "race-5"]),
    ("supersede", ["race-6"]),
    ("merge", ["race-7", "race-8"]),
]
RACE_IDS = [record_id for _, targets in RACES for record_id in targets]
WORDS = ["orchid", "deploy", "staging", "postgres", "latency", "build", "cache", "token"]
# What racing writers may meet: a lost race, a record the other one replaced first, or an
# episodic record (made by a capture), which refuses revisions.
EXPECTED = (ConflictError, AlreadyReplacedError, EpisodicImmutableError)
MEET_SECONDS = 30.0  # how long a writer waits for the other at a race round
JITTER_SECONDS = 0.004  # then a random pause, a few times the meeting's polling interval


class WriterConfig(msgspec.Struct, kw_only=True):
    name: str
    seed: int
    seconds: float  # how long it writes
    rendezvous: str  # a directory both writers see, where they meet for each race round
    skew_hours: float = 0.0  # how far its clock is off the wall clock


class ProcessTime:
    """The wall clock shifted by ``skew`` (a process whose clock is off), until
    :meth:`freeze` stops it at one instant."""

    def __init__(self, skew: timedelta = timedelta()) -> None:
        self.skew = skew
        self.frozen: datetime | None = None

    def __call__(self) -> datetime:
        return self.frozen if self.frozen is not None else wall_clock() + self.skew

    def freeze(self, moment: datetime) -> None:
        self.frozen = moment

    @classmethod
    def stopped_at(cls, moment: datetime) -> ProcessTime:
        stopped = cls()
        stopped.freeze(moment)
        return stopped


def open_engine(
    dsn: str, views: str | None, process_time: ProcessTime | None = None, **options: Any
) -> Membrane:
    clock = None if process_time is None else MonotonicClock(process_time)
    return Membrane.open_postgres(
        dsn, views_dir=views, embedder=HashingEmbedder(32), clock=clock, **options
    )


def fact(rng: random.Random, record_id: str | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": "semantic",
        "sensitivity": rng.choice(["low", "medium"]),
        "tags": [rng.choice(WORDS)],
        "payload": {
            "kind": "semantic",
            "subject": rng.choice(WORDS),
            "predicate": "relates_to",
            "object": " ".join(rng.sample(WORDS, 2)),
        },
        "provenance": {"sources": [{"kind": "observation", "ref": "scale-out"}]},
    }
    if record_id is not None:
        record["id"] = record_id
    return record


class StoreWatch:
    """Watches this process's saves at the log: counts those it refused (another writer's
    version or later time got there first, and the engine retried), and, armed for a race
    round, holds the round's first save until the other writer's is ready too, so the two
    saves race at the log rather than one writer reading the other's result."""

    def __init__(self, memory: Membrane, rendezvous: Path, name: str, rng: random.Random) -> None:
        self.refusals = 0
        self.armed: int | None = None
        self.met = False  # the armed round's writers met before saving
        self.first_refused = False  # the armed round's first save was refused
        self._rendezvous = rendezvous
        self._name = name
        self._rng = rng
        recorder = memory.application.recorder
        insert: Callable[..., Sequence[int]] = recorder.insert_events

        def insert_events(stored_events: Sequence[Any], **kwargs: Any) -> Sequence[int]:
            race_round, self.armed = self.armed, None
            if race_round is not None:
                self.met = self._meet(race_round)
                # whoever arrives second would see the meeting first and always win
                time.sleep(self._rng.uniform(0, JITTER_SECONDS))
            try:
                return insert(stored_events, **kwargs)
            except ConcurrentWrite:
                self.refusals += 1
                if race_round is not None:
                    self.first_refused = True
                raise

        recorder.insert_events = insert_events  # type: ignore[method-assign]

    def arm(self, race_round: int) -> None:
        self.armed, self.met, self.first_refused = race_round, False, False

    def _meet(self, race_round: int) -> bool:
        (self._rendezvous / f"{race_round}.{self._name}").touch()
        deadline = time.monotonic() + MEET_SECONDS
        while time.monotonic() < deadline:
            if len(list(self._rendezvous.glob(f"{race_round}.*"))) >= 2:
                return True
            time.sleep(0.001)
        return False


@dataclass
class Writer:
    memory: Membrane
    config: WriterConfig
    watch: StoreWatch
    process_time: ProcessTime
    rng: random.Random
    acked: list[dict[str, Any]] = field(default_factory=list)
    races: list[dict[str, Any]] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    attempts: int = 0

    def run(self) -> dict[str, Any]:
        start = time.monotonic()
        seconds = self.config.seconds
        due = [start + (k + 1) * seconds / (len(RACES) + 1) for k in range(len(RACES))]
        halfway = False
        while due or time.monotonic() < start + seconds:
            if not halfway and time.monotonic() >= start + seconds / 2:
                print("halfway", flush=True)
                halfway = True
            if due and time.monotonic() >= due[0]:
                due.pop(0)
                self.race(len(self.races))
            else:
                self.random_operation()
        if not halfway:
            print("halfway", flush=True)
        return {
            "name": self.config.name,
            "position": self.memory.last_position,
            "attempts": self.attempts,
            "acked": self.acked,
            "refused": dict(self.refused),
            "races": self.races,
            "store_refusals": self.watch.refusals,
            # what its own clock said at the end (skewed writers' events carry later times)
            "clock": self.process_time().isoformat(),
        }

    def random_operation(self) -> None:
        memory, rng, name = self.memory, self.rng, self.config.name
        self.attempts += 1
        token = f"[{name}#{self.attempts}]"  # in the rationale, to find the effect later
        # targets: the shared records and whatever this process's views hold (the other
        # writer's records among them), but not the raced ones, which only race rounds touch
        seen = [r.id for r in memory.retrieve(trust=FULL, limit=40).records]
        known = [i for i in dict.fromkeys(seen + SHARED) if i not in RACE_IDS]
        action = rng.random()
        op: dict[str, Any]
        try:
            if action < 0.25:
                # each write is its own record (the check follows it by its token), as given
                made = memory.create_record(fact(rng), actor=name, rationale=token, resolve=False)
                op = {"op": "create", "targets": [], "made": [made.id]}
            elif action < 0.35:
                captured = memory.capture_memory(
                    {"subject": rng.choice(WORDS), "predicate": "owner", "object": "platform"},
                    source_kind="observation",
                )
                records = [captured.primary_record, *captured.created_records]
                op = {"op": "capture", "targets": [], "made": [r.id for r in records]}
            elif action < 0.55:
                target = rng.choice(known)
                memory.reinforce(target, name, token)
                op = {"op": "reinforce", "targets": [target], "made": []}
            elif action < 0.65:
                target = rng.choice(known)
                memory.penalize(target, rng.random() / 4, name, token)
                op = {"op": "penalize", "targets": [target], "made": []}
            elif action < 0.75:
                source, target = rng.sample(known, 2)
                memory.add_relation(
                    source, "supports", target, inverse="supported_by", actor=name, rationale=token
                )
                op = {"op": "relate", "targets": [source, target], "made": []}
            elif action < 0.85:
                target = rng.choice(known)
                made = memory.supersede(target, fact(rng), name, token)
                op = {"op": "supersede", "targets": [target], "made": [made.id]}
            elif action < 0.9:
                target = rng.choice(known)
                memory.pin(target, actor=name, rationale=token)
                op = {"op": "pin", "targets": [target], "made": []}
            elif action < 0.95:
                target = rng.choice(known)
                memory.contest(target, "", name, token)
                op = {"op": "contest", "targets": [target], "made": []}
            else:
                target = rng.choice(known)
                memory.retract(target, name, token)
                op = {"op": "retract", "targets": [target], "made": []}
        except EXPECTED as error:
            self.refused[type(error).__name__] += 1
            return
        self.acked.append({**op, "token": token, "position": memory.last_position})

    def race(self, race_round: int) -> None:
        kind, targets = RACES[race_round]
        name = self.config.name
        self.attempts += 1
        token = f"[{name}#{self.attempts}]"
        made = f"{name}-race-{race_round}"
        outcome: dict[str, Any] = {"round": race_round, "kind": kind, "targets": targets}
        self.watch.arm(race_round)
        try:
            if kind == "supersede":
                self.memory.supersede(targets[0], fact(self.rng, made), name, token)
            else:
                self.memory.merge(targets, fact(self.rng, made), name, token)
            outcome["won"] = made
            op = {"op": kind, "targets": targets, "made": [made], "token": token}
            self.acked.append({**op, "position": self.memory.last_position})
        except AlreadyReplacedError as error:
            outcome.update(refused="AlreadyReplacedError", replaced_by=error.replaced_by)
        except ConflictError:
            outcome["refused"] = "ConflictError"
        finally:
            self.watch.armed = None  # a round that never reached the log must not hold another
        if "refused" in outcome:
            self.refused[outcome["refused"]] += 1
        outcome.update(met=self.watch.met, first_refused=self.watch.first_refused)
        self.races.append(outcome)


def answers(memory: Membrane, moments: list[datetime | None]) -> dict[str, Any]:
    """Retrieve, retrieve_graph and the metrics, now (None) and as of each moment."""
    out: dict[str, Any] = {}
    for moment in moments:
        key = "now" if moment is None else moment.isoformat()
        found = memory.retrieve("orchid deploy", trust=FULL, as_of=moment, include_retracted=True)
        graph = memory.retrieve_graph("orchid", trust=FULL, as_of=moment, node_limit=50)
        out[key] = {
            "retrieve": [(r.id, r.salience) for r in found.records],
            "graph": {
                "nodes": [(n.record.id, n.hop, n.root) for n in graph.nodes],
                "edges": sorted((e.source_id, e.predicate, e.target_id) for e in graph.edges),
            },
            "metrics": memory.get_metrics(as_of=moment),
        }
    return out


def serve(memory: Membrane, views: Path, process_time: ProcessTime) -> None:
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("checkpoint"):
            memory.checkpoint()
            saved = ReadModel.load(
                views, memory.application
            )  # what is on disk (the views move on meanwhile)
            assert saved is not None
            print(f"checkpointed {saved.position}", flush=True)
            saved.close()
            continue
        memory.wait_for_position(command["position"], timeout=60)
        process_time.freeze(datetime.fromisoformat(command["now"]))
        moments = [None, *(datetime.fromisoformat(m) for m in command["moments"])]
        print(json.dumps(answers(memory, moments)), flush=True)


def main(argv: list[str]) -> None:
    role, dsn, views = argv[:3]
    if role == "writer":
        config = msgspec.json.decode(argv[3], type=WriterConfig)
        process_time = ProcessTime(timedelta(hours=config.skew_hours))
        with open_engine(dsn, views, process_time) as memory:
            rng = random.Random(config.seed)
            watch = StoreWatch(memory, Path(config.rendezvous), config.name, rng)
            writer = Writer(memory, config, watch, process_time, rng)
            print(json.dumps(writer.run()), flush=True)
            serve(memory, Path(views), process_time)
    elif role == "follower":
        process_time = ProcessTime()
        with open_engine(dsn, views, process_time, checkpoint_interval=0.2) as memory:
            saved = ReadModel.load(Path(views), memory.application)
            print(f"ready {0 if saved is None else saved.position}", flush=True)
            serve(memory, Path(views), process_time)
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])

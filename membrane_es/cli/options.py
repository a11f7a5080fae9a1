"""What many commands share: the store argument, ``--as-of``, ``--trust``, ``--json``, and the
parsing behind them (strict, one-line errors naming the option)."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import msgspec
import typer

from membrane_es.cli.embedder import announce_loading, embedder_for
from membrane_es.embedding.default import EmbedderChoice
from membrane_es.engine import Membrane
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext
from membrane_es.store_places import announced_if_new
from membrane_es.stores.postgres.database import DEFAULT_SCHEMA

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True)
class StoreAddress:
    """Where a store is: an LMDB directory, or a PostgreSQL database URL and the schema the
    store lives in (written after ``#``: ``postgresql://host/db#tenant_acme``; the daemon's
    default schema without one)."""

    path: Path | None = None
    dsn: str | None = None
    schema: str = DEFAULT_SCHEMA

    def __str__(self) -> str:
        if self.path is not None:
            return str(self.path)
        return f"{_without_password(self.dsn or '')} schema {self.schema}"


def parse_store(text: str) -> StoreAddress:
    if not text.startswith(POSTGRES_SCHEMES):
        return StoreAddress(path=Path(text))
    dsn, _, schema = text.partition("#")
    return StoreAddress(dsn=dsn, schema=schema or DEFAULT_SCHEMA)


def _without_password(dsn: str) -> str:
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


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
Trust = Annotated[
    Sensitivity,
    typer.Option(
        "--trust",
        metavar=choices(Sensitivity),
        help="the reader's ceiling: records above it come back redacted or not at all",
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

# The CLI is run by the store's owner on its own files: full trust unless asked otherwise.
OWNER_TRUST = Sensitivity.HYPER


def trust_context(level: Sensitivity, scopes: list[str] | None) -> TrustContext:
    return TrustContext(max_sensitivity=level, authenticated=True, scopes=list(scopes or []))


def parse_json(text: str, field: str) -> Any:
    """A JSON value given inline, as ``@file``, or as ``-`` (standard input)."""
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as error:
            raise ValidationError(field, f"cannot read {text[1:]}: {error.strerror}") from None
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError as error:
        raise ValidationError(field, f"not JSON: {error}") from None


def open_store(
    store: StoreAddress,
    *,
    create: bool,
    follow: bool = False,
    embedder: str | None = None,
    announce: bool = True,
) -> Membrane:
    """Open the store at ``store``. A PostgreSQL store is opened as one process among
    others: its views are made from the log at open, and follow the others' writes only
    with ``follow`` (a server does; a one-shot command need not). ``embedder``: what
    ``--embedder`` named; None for a command that never embeds (it then loads no model).
    With ``create``, a new directory store is made only inside an existing directory, and
    announced on standard error unless ``announce`` is False (the command says it itself)."""
    choice: EmbedderChoice = None if embedder is None else embedder_for(embedder)
    if store.path is not None:
        if create:
            stream = None if announce else io.StringIO()
            with announced_if_new(store.path, "store", stream):
                memory = Membrane.open(store.path, create=True, embedder=choice)
        else:
            memory = Membrane.open(store.path, create=False, embedder=choice)
    else:
        assert store.dsn is not None
        memory = Membrane.open_postgres(
            store.dsn, schema=store.schema, follow=follow, create=create, embedder=choice
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

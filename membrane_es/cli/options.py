"""What many commands share: the store argument, ``--as-of``, ``--trust``, ``--json``, and the
parsing behind them (strict, one-line errors naming the option)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer

from membrane_es.engine import Membrane
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext

# A command's help ends with an example; the store directory is always the first argument.
Store = Annotated[Path, typer.Argument(help="the store directory", show_default=False)]
RecordId = Annotated[str, typer.Argument(help="a record id", show_default=False)]
AsOf = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        help="answer as the store stood at this RFC 3339 moment, e.g. 2026-11-22T10:00:00Z",
        show_default=False,
    ),
]
Trust = Annotated[
    Sensitivity,
    typer.Option(
        "--trust",
        help="the reader's ceiling: records above it come back redacted or not at all",
        case_sensitive=False,
    ),
]
TrustScopes = Annotated[
    list[str] | None,
    typer.Option(
        "--trust-scope",
        help="a scope the reader may see (repeatable; none: every scope)",
        show_default=False,
    ),
]
Json = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]
Actor = Annotated[str, typer.Option("--actor", help="who makes the change")]
Rationale = Annotated[str, typer.Option("--rationale", "--why", help="why, kept in the audit log")]

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


@contextmanager
def existing_store(path: Path) -> Iterator[Membrane]:
    """The store at ``path``; a path holding none is an error and nothing is created."""
    with Membrane.open(path, create=False) as memory:
        yield memory


@contextmanager
def store_for_writing(path: Path) -> Iterator[Membrane]:
    """The store at ``path``, created if missing (writes may start a new store)."""
    with Membrane.open(path) as memory:
        yield memory

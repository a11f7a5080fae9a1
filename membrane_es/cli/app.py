"""The ``membrane-es`` command line: the Typer application and its one error boundary.

Every command is a thin layer over the :class:`~membrane_es.Membrane` facade. An error is one
line on standard error and a non-zero exit (1: the request failed; 2: bad usage, or a
verification that found tampering), never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperCommand

from membrane_es import __version__
from membrane_es.cli.literal import literal
from membrane_es.errors import MembraneError

F = TypeVar("F", bound=Callable[..., Any])


class Command(TyperCommand):
    """A command whose help names each argument as its usage line and its errors do (STORE,
    RECORD_ID…). Typer would print the argument's Python type beside it (``STORE
    <StoreAddress>``) and wrap it in braces in the usage line (``{STORE}``).

    The context and formatter are typed loosely: recent Typer vendors Click (``typer._click``),
    earlier releases use Click itself."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                pieces.extend(param.get_usage_pieces(ctx))
            elif param.required:
                pieces.append(_shown(param))
            else:
                pieces.append(f"[{_shown(param)}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((_shown(param), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _shown(param: Any) -> str:
    name = str(param.metavar or param.name.upper())
    return name if param.nargs == 1 else f"{name}..."


app = typer.Typer(
    name="membrane-es",
    help="An event-sourced memory engine for AI agents: write, revise and read memories "
    "as of any moment.\n\nThe commands that embed (writes that make records, queries with a "
    "task) take --embedder, or the MEMBRANE_EMBEDDER environment variable: default, none, or "
    "a local sentence-transformers model directory.",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(wanted: bool) -> None:
    if wanted:
        print(f"membrane-es {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """The options that come before a command."""


def command(name: str, example: str, **settings: Any) -> Callable[[F], F]:
    """Register a command whose help ends with ``example``."""
    return app.command(name, cls=Command, epilog=f"Example: {example}", **settings)


class UsageProblem(typer.TyperException):
    """Bad usage found by a command itself: one line, exit status 2."""

    exit_code = 2


class Interrupted(Exception):
    """Ctrl-C stopped a long command; the message says what was done and what was not."""


INTERRUPTED = 130  # the shell's status for a process stopped by SIGINT


@contextmanager
def on_interrupt(says: str | Callable[[], str]) -> Iterator[None]:
    """Turn Ctrl-C inside the block into :class:`Interrupted` with ``says`` (or what it
    returns, when the answer depends on how far the command got)."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(says if isinstance(says, str) else says()) from None


class MissingExtraError(MembraneError):
    """A command needs an optional dependency group that is not installed."""

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(
            f"this command needs the '{extra}' extra ({module} is not installed): "
            f"pip install 'membrane-es[{extra}]'"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status."""
    # Bare ``membrane-es`` shows the help, as ``--help`` does (Typer's no_args_is_help raises
    # it as a usage error, which the boundary below would squeeze into one line).
    args = list(sys.argv[1:] if argv is None else argv) or ["--help"]
    try:
        from membrane_es.cli import commands  # noqa: F401 - registers every command on ``app``

        app.registered_commands.sort(key=_listed_order)
        outcome = typer.main.get_command(app).main(
            args=args,
            prog_name="membrane-es",
            standalone_mode=False,
        )
    except typer.TyperException as error:  # bad usage: exit 2 (Typer's own status)
        return _fail(error.format_message(), error.exit_code)
    except Interrupted as stopped:
        print(f"interrupted: {literal(stopped)}", file=sys.stderr)
        return INTERRUPTED
    except (typer.Abort, KeyboardInterrupt):
        return _fail("interrupted", INTERRUPTED)
    except MembraneError as error:
        return _fail(str(error), 1)
    except OSError as error:
        return _fail(_os_error(error), 1)
    except Exception as error:  # the boundary: a user sees one line, never a traceback
        return _fail(f"{type(error).__name__}: {error}", 1)
    if outcome == INTERRUPTED:  # Typer's answer to Ctrl-C outside on_interrupt (no command
        print("interrupted", file=sys.stderr)  # exits 130 itself): say why it stopped
    return outcome if isinstance(outcome, int) else 0


# The order ``--help`` lists commands in: first steps, writes, reads, upkeep, servers.
LISTED = (
    "demo capture create supersede fork merge retract contest reinforce penalize forget "
    "consolidate list retrieve search context graph get show history changes metrics stats verify "
    "rebuild "
    "export import serve mcp ui"
).split()


def _listed_order(info: typer.models.CommandInfo) -> int:
    return LISTED.index(info.name) if info.name in LISTED else len(LISTED)


def _fail(message: str, status: int) -> int:
    # one line, control characters written as escapes (a message may quote what was given)
    print(f"error: {literal(' '.join(message.split()))}", file=sys.stderr)
    return status


def _os_error(error: OSError) -> str:
    if error.filename is not None and error.strerror:
        return f"{error.strerror}: {error.filename}"
    return str(error)

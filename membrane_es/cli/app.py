"""The ``membrane-es`` command line: the Typer application and its one error boundary.

Every command is a thin layer over the :class:`~membrane_es.Membrane` facade. An error is one
line on standard error and a non-zero exit (1: the request failed; 2: bad usage, or a
verification that found tampering), never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer

from membrane_es.errors import MembraneError

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="membrane-es",
    help="An event-sourced memory engine for AI agents: write, revise and read memories "
    "as of any moment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def command(name: str, example: str, **settings: Any) -> Callable[[F], F]:
    """Register a command whose help ends with ``example``."""
    return app.command(name, epilog=f"Example: {example}", **settings)


class UsageProblem(typer.TyperException):
    """Bad usage found by a command itself: one line, exit status 2."""

    exit_code = 2


class MissingExtraError(MembraneError):
    """A command needs an optional dependency group that is not installed."""

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(
            f"this command needs the '{extra}' extra ({module} is not installed): "
            f"pip install 'membrane-es[{extra}]'"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status."""
    from membrane_es.cli import commands  # noqa: F401 - registers every command on ``app``

    app.registered_commands.sort(key=_listed_order)
    cli = typer.main.get_command(app)
    try:
        outcome = cli.main(
            args=list(sys.argv[1:] if argv is None else argv),
            prog_name="membrane-es",
            standalone_mode=False,
        )
    except typer.TyperException as error:  # bad usage: exit 2 (Typer's own status)
        return _fail(error.format_message(), error.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        return _fail("interrupted", 130)
    except MembraneError as error:
        return _fail(str(error), 1)
    except OSError as error:
        return _fail(_os_error(error), 1)
    except Exception as error:  # the boundary: a user sees one line, never a traceback
        return _fail(f"{type(error).__name__}: {error}", 1)
    return outcome if isinstance(outcome, int) else 0


# The order ``--help`` lists commands in: first steps, writes, reads, upkeep, servers.
LISTED = (
    "demo capture create supersede fork merge retract contest reinforce penalize forget "
    "consolidate list retrieve search graph get show history metrics stats verify rebuild "
    "export import serve mcp"
).split()


def _listed_order(info: typer.models.CommandInfo) -> int:
    return LISTED.index(info.name) if info.name in LISTED else len(LISTED)


def _fail(message: str, status: int) -> int:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return status


def _os_error(error: OSError) -> str:
    if error.filename is not None and error.strerror:
        return f"{error.strerror}: {error.filename}"
    return str(error)

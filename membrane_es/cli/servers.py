"""``serve``: the gRPC daemon on a store, with Membrane's flags.

Their dependencies are optional extras, imported only when the command runs, so the library
and the other commands install lean; a missing extra is named in a one-line error.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

import typer

from membrane_es.cli.app import MissingExtraError, UsageProblem, app
from membrane_es.errors import MembraneError

SERVE_EXAMPLE = "membrane-es serve -db ./memory -addr 127.0.0.1:9090 -config membrane.yaml"


class _Parser(argparse.ArgumentParser):
    """argparse whose errors reach the command line's one error boundary (one line)."""

    def error(self, message: str) -> NoReturn:
        raise UsageProblem(message)


@app.command(
    "serve",
    help="Run the gRPC daemon (membrane.v1) on a store, with membraned's flags "
    "(-db, -addr, -config, -keys, -postgres-dsn). Run `membrane-es serve -h` for them.",
    epilog=f"Example: {SERVE_EXAMPLE}",
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    },
    add_help_option=False,
)
def serve(ctx: typer.Context) -> None:
    try:
        from membrane_es.grpc_server import membraned
    except ImportError as error:
        raise MissingExtraError("server", error.name or "grpcio") from None
    parser = _Parser(
        prog="membrane-es serve",
        description="Run the gRPC daemon (membrane.v1); the same flags and config as membraned.",
        epilog=f"Example: {SERVE_EXAMPLE}",
    )
    membraned.add_flags(parser)
    args = parser.parse_args(ctx.args)
    try:
        config = membraned.config_from_flags(args)
    except membraned.ConfigError as error:
        raise MembraneError(f"configure: {error}") from None
    status = membraned.run(config)
    if status:
        raise typer.Exit(status)

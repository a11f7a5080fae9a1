"""Commands that serve a store: ``serve`` (the gRPC daemon, Membrane's flags) and ``mcp``.

Their dependencies are optional extras, imported only when the command runs, so the library
and the other commands install lean; a missing extra is named in a one-line error.
"""

from __future__ import annotations

import argparse
import os
from typing import Annotated, NoReturn

import typer

from membrane_es.cli.app import Command, MissingExtraError, UsageProblem, app, command
from membrane_es.cli.embedder import EmbedderName
from membrane_es.cli.options import Store, TrustScopes, choices, open_store, trust_context
from membrane_es.errors import MembraneError
from membrane_es.listening import warn_if_open
from membrane_es.schema.enums import Sensitivity

MAX_PORT = 65535
SERVE_EXAMPLE = "membrane-es serve --db ./memory --addr 127.0.0.1:9090 --config membrane.yaml"


class _Parser(argparse.ArgumentParser):
    """argparse whose errors reach the command line's one error boundary (one line)."""

    def error(self, message: str) -> NoReturn:
        raise UsageProblem(message)


@app.command(
    "serve",
    cls=Command,
    help="Run the gRPC daemon (membrane.v1) on a store, with membraned's flags and config "
    "(--db, --addr, --config, --keys, --postgres-dsn; --http adds the HTTP entries API). "
    "Run `membrane-es serve -h` for them.",
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
        description="Run the gRPC daemon (membrane.v1); the same flags and config as "
        "membraned (which also takes them with one dash: -db).",
        epilog=f"Example: {SERVE_EXAMPLE}",
    )
    membraned.add_flags(parser, go_style=False)
    args = parser.parse_args(membraned.double_dashed(ctx.args, parser))
    try:
        config = membraned.config_from_flags(args)
    except membraned.ConfigError as error:
        raise MembraneError(f"configure: {error}") from None
    status = membraned.run(config, http=args.http, grpc=not args.no_grpc)
    if status:
        raise typer.Exit(status)


@command(
    "mcp",
    "membrane-es mcp ./memory --trust medium --trust-scope project:orchid "
    "(stdio), or add --http 127.0.0.1:8765 for streamable HTTP",
)
def mcp(
    store: Store,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="serve streamable HTTP on HOST:PORT (at /mcp) instead of stdio",
            show_default=False,
        ),
    ] = None,
    trust: Annotated[
        Sensitivity,
        typer.Option(
            "--trust",
            metavar=choices(Sensitivity),
            help="the most any client may read; clients can narrow it, never widen it",
            case_sensitive=False,
        ),
    ] = Sensitivity.LOW,
    trust_scope: TrustScopes = None,
    keys_file: Annotated[
        str | None,
        typer.Option(
            "--keys",
            metavar="PATH",
            envvar="MEMBRANE_API_KEYS_FILE",
            help="with --http: an API keys file, as the daemon's (MEMBRANE_API_KEY adds a "
            "shared key); with any key, every request needs one",
            show_default=False,
        ),
    ] = None,
    embedder: EmbedderName = "default",
) -> None:
    """Serve a store to agents over the Model Context Protocol: capture, retrieve,
    retrieve_graph, get, history and the revision operations as tools."""
    if http is not None:  # bad usage is named before the extra is looked for
        host, _, port = http.rpartition(":")
        if not host or not port.isdigit() or int(port) > MAX_PORT:
            raise UsageProblem(f"--http: expected HOST:PORT (a port from 0 to {MAX_PORT})")
    try:
        from membrane_es.access import KeyRing
        from membrane_es.mcp_server import serve_http, serve_stdio
    except ImportError as error:
        raise MissingExtraError("mcp", error.name or "mcp") from None
    ceiling = trust_context(trust, trust_scope)
    keys = KeyRing.load(os.environ.get("MEMBRANE_API_KEY", ""), keys_file)
    with open_store(store, create=True, follow=True, embedder=embedder) as memory:
        if http is None:
            serve_stdio(memory, ceiling)
        else:
            warn_if_open("membrane-es mcp", "MCP", http, keys.enabled)
            # The keys file's changes take effect without a restart.
            watcher = None
            if keys_file:
                from membrane_es.key_reload import KeysFileWatcher

                watcher = KeysFileWatcher(keys, os.environ.get("MEMBRANE_API_KEY", ""), keys_file)
                watcher.start()
            try:
                serve_http(memory, ceiling, host, int(port), keys)
            finally:
                if watcher is not None:
                    watcher.stop()

"""Commands that serve a store: ``serve`` (the gRPC daemon, Membrane's flags) and ``mcp``.

Their dependencies are optional extras, imported only when the command runs, so the library
and the other commands install lean; a missing extra is named in a one-line error.
"""

from __future__ import annotations

import argparse
import os
from typing import Annotated, Any

import typer

from membrane_es.cli.app import Command, MissingExtraError, UsageProblem, app, command
from membrane_es.cli.embedder import EmbedderName
from membrane_es.cli.options import (
    OWNER_TRUST,
    Store,
    TrustScopes,
    choices,
    open_store,
    trust_context,
)
from membrane_es.errors import MembraneError
from membrane_es.schema.enums import Sensitivity
from membrane_es.serving.listening import warn_if_open

MAX_PORT = 65535
PROGRAM = "membrane-es serve"  # how the daemon names itself when run by this command
SERVE_EXAMPLE = "membrane-es serve --db ./memory --addr 127.0.0.1:9090 --config membrane.yaml"


class GoSpelledCommand(Command):
    """A command whose options also take Go's spelling, one dash (``-db x``, ``-addr=:1``),
    as ``membraned`` takes them: commands written for Membrane's daemon still run. (It
    takes no one-letter options but -h, so ``-bogus`` is named as the option it is.)"""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        spelled = []
        for arg in args:
            name = arg.partition("=")[0]
            if name[:1] == "-" and name[:2] != "--" and len(name) > 2:
                arg = f"-{arg}"
            spelled.append(arg)
        return list(super().parse_args(ctx, spelled))


def _flag(name: str, metavar: str, help: str) -> Any:
    return typer.Option(f"--{name}", metavar=metavar, help=help, show_default=False)


@app.command("serve", cls=GoSpelledCommand, epilog=f"Example: {SERVE_EXAMPLE}")
def serve(
    db: Annotated[
        str | None,
        _flag(
            "db",
            "DIR",
            "store directory, or with postgres the views' (overrides db_path; :memory: works); "
            "a new store is made only inside an existing directory, and announced",
        ),
    ] = None,
    addr: Annotated[
        str | None,
        _flag(
            "addr", "ADDR", "gRPC listen address (default 127.0.0.1:9090; :9090 is every interface)"
        ),
    ] = None,
    config: Annotated[str | None, _flag("config", "PATH", "YAML config file")] = None,
    keys: Annotated[
        str | None, _flag("keys", "PATH", "API keys file: tenants and trust ceilings")
    ] = None,
    postgres_dsn: Annotated[
        str | None,
        _flag(
            "postgres-dsn", "DSN", "keep the log in PostgreSQL at this DSN (sets backend=postgres)"
        ),
    ] = None,
    http: Annotated[
        str | None,
        _flag(
            "http",
            "ADDR",
            "also serve the HTTP entries API (/v1/memory/...) here, e.g. 127.0.0.1:8080",
        ),
    ] = None,
    no_grpc: Annotated[
        bool,
        typer.Option(
            "--no-grpc", help="serve only the HTTP entries API (needs --http)", show_default=False
        ),
    ] = False,
    chain_key_file: Annotated[
        str | None,
        _flag(
            "chain-key-file",
            "PATH",
            "file holding the log's hash-chain key (a keyed chain; keep it outside the store)",
        ),
    ] = None,
) -> None:
    """Run the gRPC daemon (membrane.v1) on a store, with the flags and config of Membrane's
    daemon, membraned (which it also takes with one dash: -db); --http adds the HTTP entries
    API. Who may read what comes from the keys file (trust ceilings per key)."""
    try:
        from membrane_es.grpc_server import membraned
    except ImportError as error:
        raise MissingExtraError("server", error.name or "grpcio") from None
    flags = argparse.Namespace(
        config=config,
        db=db,
        postgres_dsn=postgres_dsn,
        addr=addr,
        keys=keys,
        chain_key_file=chain_key_file,
    )
    try:
        daemon_config = membraned.config_from_flags(flags)
    except membraned.ConfigError as error:
        raise MembraneError(f"configure: {error}") from None
    status = membraned.run(daemon_config, http=http, grpc=not no_grpc, program=PROGRAM)
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
            help="the most any client may read or write; clients can narrow it, never widen "
            "it (the default, as for every command, is hyper, the owner's: lower it to give an "
            "agent less)",
            case_sensitive=False,
        ),
    ] = OWNER_TRUST,
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
    """Serve a store to agents over the Model Context Protocol. Its tools: capture,
    create_record, context, retrieve, retrieve_graph, list, get, history, changes, supersede,
    fork, merge, retract, contest, reinforce, penalize and forget."""
    if http is not None:  # bad usage is named before the extra is looked for
        host, _, port = http.rpartition(":")
        if not host or not port.isdigit() or int(port) > MAX_PORT:
            raise UsageProblem(f"--http: expected HOST:PORT (a port from 0 to {MAX_PORT})")
    try:
        from membrane_es.access.keys import KeyRing
        from membrane_es.mcp_server.server import serve_http, serve_stdio
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
                from membrane_es.access.key_reload import KeysFileWatcher

                watcher = KeysFileWatcher(keys, os.environ.get("MEMBRANE_API_KEY", ""), keys_file)
                watcher.start()
            try:
                serve_http(memory, ceiling, host, int(port), keys)
            finally:
                if watcher is not None:
                    watcher.stop()

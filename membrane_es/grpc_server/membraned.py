"""``membraned``: Membrane's daemon command, same flags and configuration (spec §7.2).

Anything that starts Membrane's daemon starts this one::

    MEMBRANE_API_KEY=secret membraned -addr 127.0.0.1:9090 -db ./memory -config membrane.yaml

Flags take one or two dashes and ``-flag value`` or ``-flag=value``, as Go's ``flag``.
``-db`` names the LMDB store directory (``:memory:`` keeps everything in memory); with
``-postgres-dsn`` the log is in PostgreSQL and ``-db`` holds the read views' checkpoints.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

from membrane_es import __version__
from membrane_es.access.key_reload import KeysFileWatcher
from membrane_es.errors import MembraneError
from membrane_es.grpc_server.config import (
    DEFAULT_LISTEN_ADDR,
    ConfigError,
    DaemonConfig,
    apply_overrides,
    load_config,
)
from membrane_es.serving.listening import warn_if_open
from membrane_es.serving.signals import wait_for_stop_signal

if TYPE_CHECKING:
    from membrane_es.access.keys import KeyRing
    from membrane_es.grpc_server.server import Daemon
    from membrane_es.http_api import HttpServer
    from membrane_es.serving.tenants import Tenants

PROGRAM = "membraned"
# How long a thread may hold the interpreter while others wait for it (see _serve).
SWITCH_INTERVAL_SECONDS = 0.001


def add_flags(parser: argparse.ArgumentParser, go_style: bool = True) -> None:
    """Membrane's flags: in Go's spelling (``-db``) and with two dashes (``--db``) for
    ``membraned``; with two dashes alone (``go_style`` False) for ``membrane-es serve``, which
    speaks as the other commands do (:func:`double_dashed` still reads Go's spelling there)."""

    def flag(name: str) -> list[str]:
        return [f"-{name}", f"--{name}"] if go_style else [f"--{name}"]

    parser.add_argument(*flag("config"), metavar="PATH", help="YAML config file")
    parser.add_argument(
        *flag("db"),
        metavar="DIR",
        help="store directory, or with postgres the views' (overrides db_path; :memory: works); "
        "a new store is made only inside an existing directory, and announced",
    )
    parser.add_argument(
        *flag("postgres-dsn"),
        dest="postgres_dsn",
        metavar="DSN",
        help="keep the log in PostgreSQL at this DSN (sets backend=postgres)",
    )
    parser.add_argument(
        *flag("addr"),
        metavar="ADDR",
        help=f"gRPC listen address (default {DEFAULT_LISTEN_ADDR}; :9090 is every interface)",
    )
    parser.add_argument(
        *flag("keys"), metavar="PATH", help="API keys file: tenants and trust ceilings"
    )
    parser.add_argument(
        *flag("http"),
        metavar="ADDR",
        help="also serve the HTTP entries API (/v1/memory/...) here, e.g. 127.0.0.1:8080",
    )
    parser.add_argument(
        *flag("no-grpc"),
        dest="no_grpc",
        action="store_true",
        help="serve only the HTTP entries API (needs the HTTP address)",
    )
    parser.add_argument(
        *flag("chain-key-file"),
        dest="chain_key_file",
        metavar="PATH",
        help="file holding the log's hash-chain key (a keyed chain; keep it outside the store)",
    )
    parser.add_argument(
        *flag("max-open-stores"),
        dest="max_open_stores",
        type=int,
        metavar="N",
        help="tenant stores kept open at once; idle ones beyond are closed (default 100, "
        "0: no bound; env MEMBRANE_MAX_OPEN_STORES)",
    )
    parser.add_argument(
        *flag("memory-budget-mb"),
        dest="memory_budget_mb",
        type=int,
        metavar="MIB",
        help="close idle tenant stores while the process's resident memory is over this "
        "(default 0: no budget; env MEMBRANE_MEMORY_BUDGET_MB)",
    )


def double_dashed(args: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """``args`` with Go-style flags the parser knows only with two dashes (``-db x``,
    ``-addr=:1``) written that way, so commands written for ``membraned`` still run."""
    known = {option for action in parser._actions for option in action.option_strings}
    spelled = []
    for arg in args:
        name, equals, value = arg.partition("=")
        if name.startswith("-") and not name.startswith("--") and f"-{name}" in known:
            arg = f"-{name}{equals}{value}"
        spelled.append(arg)
    return spelled


def config_from_flags(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> DaemonConfig:
    config = apply_overrides(
        load_config(args.config),
        db=args.db,
        postgres_dsn=args.postgres_dsn,
        addr=args.addr,
        environ=environ,
        # namespaces built without these flags leave the bounds as configured
        max_open_stores=getattr(args, "max_open_stores", None),
        memory_budget_mb=getattr(args, "memory_budget_mb", None),
    )
    if args.keys:
        config = msgspec.structs.replace(config, api_keys_file=args.keys)
    chain_key_file = getattr(args, "chain_key_file", None)  # namespaces built without it
    if chain_key_file:
        config = msgspec.structs.replace(config, chain_key_file=chain_key_file)
    config.validate()
    return config


def run(
    config: DaemonConfig, http: str | None = None, grpc: bool = True, program: str = PROGRAM
) -> int:
    """Builds the daemon (gRPC, and the HTTP entries API on ``http``; or that alone), serves
    until SIGINT/SIGTERM, exits 0; setup errors exit 1. ``program``: the name it says
    things under (``membrane-es serve`` runs it as itself)."""
    from membrane_es.grpc_server.server import Daemon, open_stores
    from membrane_es.http_api import HttpServer, create_app

    logging.basicConfig(
        level=os.environ.get("MEMBRANE_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not grpc and not http:
        dash = "-" if program == PROGRAM else "--"  # as the flags are spelled there
        print(f"failed to run {program}: {dash}no-grpc needs {dash}http", file=sys.stderr)
        return 1
    daemon: Daemon | None = None
    try:
        if not grpc:
            tenants, keys = open_stores(config)
        else:
            daemon = Daemon(config)
            tenants, keys = daemon.tenants, daemon.keys
        try:
            web = None if http is None else HttpServer(create_app(tenants, keys), http)
        except (OSError, ValueError):
            tenants.close()
            raise
    except (ConfigError, MembraneError, OSError, ValueError) as error:
        print(f"failed to run {program}: initialize membrane: {error}", file=sys.stderr)
        return 1
    # The keys file's changes (and SIGHUP) take effect without a restart.
    watcher = None
    if config.api_keys_file:
        watcher = KeysFileWatcher(keys, config.api_key, config.api_keys_file).start()
    try:
        return _serve(config, tenants, keys, web, http, daemon, watcher, program)
    finally:
        if watcher is not None:
            watcher.stop()


def _serve(
    config: DaemonConfig,
    tenants: Tenants,
    keys: KeyRing,
    web: HttpServer | None,
    http: str | None,
    daemon: Daemon | None,
    watcher: KeysFileWatcher | None,
    program: str,
) -> int:
    grpc = daemon is not None
    reload = None if watcher is None else watcher.reload
    # What is alive now (modules, the embedder, the default store) lives as long as the
    # daemon: out of the collector's way, so each full collection (which pauses every
    # request) walks only what serving made.
    gc.freeze()
    # A request's thread lets go of the interpreter at every read of a store and must get it
    # back from threads opening other tenants' stores: a thread holding it is asked to let
    # go after 1 ms rather than Python's 5 (measured, 500 tenants, one run each on a loaded
    # machine: a hot tenant's p99 355 → 273 ms with stores bounded, 274 → 132 ms without).
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    if grpc:
        warn_if_open(program, "gRPC", config.listen_addr, keys.enabled)
    if http is not None:
        warn_if_open(program, "the HTTP entries API", http, keys.enabled)
    if not grpc:
        assert web is not None
        try:
            web.start()
            _announce(web, http, program)
            wait_for_stop_signal(reload)
        finally:
            web.stop()  # requests in flight finish, then the stores close
            tenants.close()
        return 0
    assert daemon is not None
    daemon.start()
    if web is not None:
        daemon.also_stop(web.stop)  # HTTP finishes its requests before the stores close
        web.start()
        _announce(web, http, program)
    print(f"{program} listening on {config.listen_addr} (port {daemon.port})", file=sys.stderr)
    daemon.serve_until_signalled(reload)
    return 0


def _announce(web: HttpServer, address: str | None, program: str) -> None:
    print(f"{program} HTTP entries API on {address} (port {web.port})", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="membrane_es daemon: Membrane's membrane.v1 gRPC API."
    )
    add_flags(parser)
    parser.add_argument("-version", "--version", action="store_true", help="print the version")
    args = parser.parse_args(argv)
    if args.version:
        print(f"{PROGRAM} {__version__}")
        return 0
    try:
        config = config_from_flags(args)
    except ConfigError as error:
        print(f"failed to run {PROGRAM}: configure: {error}", file=sys.stderr)
        return 1
    return run(config, http=args.http, grpc=not args.no_grpc)


if __name__ == "__main__":
    raise SystemExit(main())

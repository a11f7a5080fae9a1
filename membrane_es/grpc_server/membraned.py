"""``membraned``: Membrane's daemon command, same flags and configuration (spec §7.2).

Anything that starts Membrane's daemon starts this one::

    MEMBRANE_API_KEY=secret membraned -addr 127.0.0.1:9090 -db ./memory -config membrane.yaml

Flags take one or two dashes and ``-flag value`` or ``-flag=value``, as Go's ``flag``.
``-db`` names the LMDB store directory (``:memory:`` keeps everything in memory); with
``-postgres-dsn`` the log is in PostgreSQL and ``-db`` holds the read views' checkpoints.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence

import msgspec

from membrane_es import __version__
from membrane_es.errors import MembraneError
from membrane_es.grpc_server.config import ConfigError, DaemonConfig, apply_overrides, load_config

PROGRAM = "membraned"


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Membrane's flags, each in its Go spelling and with two dashes."""
    parser.add_argument("-config", "--config", metavar="PATH", help="YAML config file")
    parser.add_argument(
        "-db",
        "--db",
        metavar="DIR",
        help="store directory, or with postgres the views' (overrides db_path; :memory: works)",
    )
    parser.add_argument(
        "-postgres-dsn",
        "--postgres-dsn",
        dest="postgres_dsn",
        metavar="DSN",
        help="keep the log in PostgreSQL at this DSN (sets backend=postgres)",
    )
    parser.add_argument("-addr", "--addr", metavar="ADDR", help="listen address, e.g. :9090")
    parser.add_argument(
        "-keys", "--keys", metavar="PATH", help="API keys file: tenants and trust ceilings"
    )
    parser.add_argument(
        "-chain-key-file",
        "--chain-key-file",
        dest="chain_key_file",
        metavar="PATH",
        help="file holding the log's hash-chain key (a keyed chain; keep it outside the store)",
    )


def config_from_flags(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> DaemonConfig:
    config = apply_overrides(
        load_config(args.config),
        db=args.db,
        postgres_dsn=args.postgres_dsn,
        addr=args.addr,
        environ=environ,
    )
    if args.keys:
        config = msgspec.structs.replace(config, api_keys_file=args.keys)
    chain_key_file = getattr(args, "chain_key_file", None)  # namespaces built without it
    if chain_key_file:
        config = msgspec.structs.replace(config, chain_key_file=chain_key_file)
    config.validate()
    return config


def run(config: DaemonConfig) -> int:
    """Builds the daemon, serves until SIGINT/SIGTERM, exits 0; setup errors exit 1."""
    from membrane_es.grpc_server.server import Daemon

    logging.basicConfig(
        level=os.environ.get("MEMBRANE_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        daemon = Daemon(config)
    except (ConfigError, MembraneError, OSError) as error:
        print(f"failed to run {PROGRAM}: initialize membrane: {error}", file=sys.stderr)
        return 1
    daemon.start()
    print(f"{PROGRAM} listening on {config.listen_addr} (port {daemon.port})", file=sys.stderr)
    daemon.serve_until_signalled()
    return 0


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
    return run(config)


if __name__ == "__main__":
    raise SystemExit(main())

"""The daemon's configuration: Membrane's YAML keys (spec §7.1), defaults and precedence.

Precedence, as ``membraned``: defaults < config file < flags; then ``MEMBRANE_API_KEY`` if
``api_key`` is still empty. ``backend``: ``sqlite`` (Membrane's default, also ``""``) and
``lmdb`` keep the event log in LMDB, ``db_path`` being the store directory; ``postgres``
keeps it in PostgreSQL (eventsourcing's ``eventsourcing.postgres``) at ``postgres_dsn``
(else env ``MEMBRANE_POSTGRES_DSN``), ``db_path`` then holding only the read views'
checkpoints, each tenant in its own schema. ``encryption_key`` encrypts every stored event on
either (AES-GCM, keyed by the SHA-256 of the passphrase).

Our additions: ``api_keys_file`` (keys with tenants and trust ceilings, see
:mod:`membrane_es.access.keys`; env ``MEMBRANE_API_KEYS_FILE``) and
``embedding_model``: empty (the default) uses all-MiniLM-L6-v2, loaded offline from the
``embeddings`` extra, when that is installed and ranks by salience and text only when it is
not; ``all-MiniLM-L6-v2`` asks for that model (an error without the extra); ``none`` for no
embedder; ``hashing`` for the test embedder; else a local sentence-transformers model.

``max_open_stores`` (default 100; 0: no bound) and ``memory_budget_mb`` (default 0: none)
bound the tenant stores a process keeps open: the least used idle ones are closed,
checkpointed, and opened again on demand (:mod:`membrane_es.serving.tenants`). The environment's
``MEMBRANE_MAX_OPEN_STORES`` and ``MEMBRANE_MEMORY_BUDGET_MB`` override the file; flags
override both.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml

from membrane_es.engine import (
    DEFAULT_EDGE_LIMIT,
    DEFAULT_MAX_HOPS,
    DEFAULT_NODE_LIMIT,
    DEFAULT_ROOT_LIMIT,
    IN_MEMORY,
    StoreAddress,
)
from membrane_es.schema.enums import Sensitivity
from membrane_es.serving.tenants import DEFAULT_MAX_OPEN

_BOUND_ENV = {
    "max_open_stores": "MEMBRANE_MAX_OPEN_STORES",
    "memory_budget_mb": "MEMBRANE_MEMORY_BUDGET_MB",
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


# Loopback unless told otherwise (Membrane's daemon listens on every interface, ":9090"):
# a daemon reachable from elsewhere is a choice made by naming the address.
DEFAULT_LISTEN_ADDR = "127.0.0.1:9090"
MAX_PORT = 65535


class ConfigError(ValueError):
    """A configuration that cannot be used; the message says which key and why."""


class DaemonConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Every key of Membrane's config file, plus ours; unknown keys are an error."""

    backend: str = "sqlite"
    db_path: str = "membrane.db"
    postgres_dsn: str = ""
    listen_addr: str = DEFAULT_LISTEN_ADDR
    decay_interval: str = "1h"
    consolidation_interval: str = "6h"
    default_sensitivity: str = "low"
    selection_confidence_threshold: float = 0.7
    encryption_key: str = ""
    embedding_endpoint: str = ""
    embedding_model: str = ""
    embedding_dimensions: int = 1536
    embedding_api_key: str = ""
    llm_endpoint: str = ""
    llm_model: str = ""
    llm_api_key: str = ""
    ingest_llm_enabled: bool = False
    ingest_llm_endpoint: str = ""
    ingest_llm_model: str = ""
    ingest_llm_api_key: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    api_key: str = ""
    rate_limit_per_second: int = 100
    graph_default_root_limit: int = DEFAULT_ROOT_LIMIT
    graph_default_node_limit: int = DEFAULT_NODE_LIMIT
    graph_default_edge_limit: int = DEFAULT_EDGE_LIMIT
    graph_default_max_hops: int = DEFAULT_MAX_HOPS
    # membrane_es additions
    api_keys_file: str = ""
    # a file holding the log's hash-chain key (kept outside the store): a keyed chain
    chain_key_file: str = ""
    # resolution on write (repeated facts reinforce, changed single-valued facts supersede):
    # off by default, as Membrane's own clients expect every write to add a record; a call
    # may still ask for it (x-membrane-resolve: true)
    resolve_writes: bool = False
    single_valued_predicates: list[str] = msgspec.field(default_factory=list)
    many_valued_predicates: list[str] = msgspec.field(default_factory=list)
    # tenant stores kept open at once (0: no bound), and a resident-memory budget (0: none)
    max_open_stores: int = DEFAULT_MAX_OPEN
    memory_budget_mb: int = 0

    def consolidation_seconds(self) -> float:
        return parse_duration("consolidation_interval", self.consolidation_interval)

    def decay_seconds(self) -> float:
        return parse_duration("decay_interval", self.decay_interval)

    def engine_env(self) -> dict[str, str]:
        """eventsourcing settings for the store: the cipher when a key is configured, the
        chain key when a chain key file is."""
        settings = self._chain_settings()
        key = self.encryption_key or os.environ.get("MEMBRANE_ENCRYPTION_KEY", "")
        if not key:
            return settings
        derived = base64.b64encode(hashlib.sha256(key.encode()).digest()).decode()
        return {"CIPHER_TOPIC": "eventsourcing.cipher:AESCipher", "CIPHER_KEY": derived, **settings}

    def _chain_settings(self) -> dict[str, str]:
        if not self.chain_key_file:
            return {}
        try:
            key = Path(self.chain_key_file).read_bytes()
        except OSError as error:
            raise ConfigError(f"membrane: read chain_key_file: {error}") from None
        if not key:
            raise ConfigError("membrane: chain_key_file is empty")
        return {"LMDB_CHAIN_KEY": key.hex(), "POSTGRES_CHAIN_KEY": key.hex()}

    def store_address(self) -> StoreAddress:
        """The default tenant's store: the LMDB directory ``db_path`` (``:memory:``: kept in
        memory), or with ``backend: postgres`` the database's default schema, its read views
        checkpointed in ``db_path/views`` (``:memory:``: not checkpointed). Every other
        tenant's store is beside it (:meth:`StoreAddress.tenant`)."""
        if self.backend != "postgres":
            return StoreAddress.parse(self.db_path)
        views = None if self.db_path == IN_MEMORY else Path(self.db_path) / "views"
        return StoreAddress(dsn=self.dsn(), views_dir=views)

    def dsn(self) -> str:
        """The PostgreSQL DSN: ``postgres_dsn``, else env ``MEMBRANE_POSTGRES_DSN`` (spec §7.1)."""
        return self.postgres_dsn or os.environ.get("MEMBRANE_POSTGRES_DSN", "")

    def validate(self) -> None:
        if self.backend not in ("", "sqlite", "lmdb", "postgres"):
            raise ConfigError(f'membrane: unsupported backend "{self.backend}"')
        if self.backend == "postgres" and not self.dsn():
            raise ConfigError("membrane: postgres_dsn is required when backend=postgres")
        if self.default_sensitivity not in {level.value for level in Sensitivity}:
            raise ConfigError(f'membrane: invalid default sensitivity "{self.default_sensitivity}"')
        if not 0.0 <= self.selection_confidence_threshold <= 1.0:
            raise ConfigError("selection_confidence_threshold must be in [0, 1]")
        if self.rate_limit_per_second < 0:
            raise ConfigError("rate_limit_per_second must be >= 0")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ConfigError("tls_cert_file and tls_key_file must be set together")
        for key in ("root", "node", "edge"):
            if getattr(self, f"graph_default_{key}_limit") < 1:
                raise ConfigError(f"graph_default_{key}_limit must be >= 1")
        if self.max_open_stores < 0:
            raise ConfigError("max_open_stores must be >= 0 (0: no bound)")
        if self.memory_budget_mb < 0:
            raise ConfigError("memory_budget_mb must be >= 0 (0: no budget)")
        if self.graph_default_max_hops < 0:
            raise ConfigError("graph_default_max_hops must be >= 0")
        # gRPC's own parser wraps a port past 65535 around (99999 listens on 34463).
        _, colon, port = self.listen_addr.rpartition(":")
        if not colon or not port.isdigit() or int(port) > MAX_PORT:
            raise ConfigError(
                f'membrane: listen_addr "{self.listen_addr}": expected HOST:PORT '
                f"(or :PORT) with a port from 0 to {MAX_PORT}"
            )
        self.consolidation_seconds()
        self.decay_seconds()


def load_config(path: str | Path | None) -> DaemonConfig:
    """Defaults overlaid with a YAML file (when given); messages as the reference's."""
    if not path:
        return DaemonConfig()
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ConfigError(f"read config file: {error}") from None
    try:
        raw: Any = yaml.safe_load(text) or {}
        return msgspec.convert(raw, DaemonConfig)
    except (yaml.YAMLError, msgspec.ValidationError) as error:
        raise ConfigError(f"parse config file: {error}") from None


def apply_overrides(
    config: DaemonConfig,
    *,
    db: str | None = None,
    postgres_dsn: str | None = None,
    addr: str | None = None,
    environ: Mapping[str, str] | None = None,
    max_open_stores: int | None = None,
    memory_budget_mb: int | None = None,
) -> DaemonConfig:
    """Flags over the file, then the environment's fallbacks (spec §7.2); the bounds on open
    stores: flags over the environment over the file."""
    environ = os.environ if environ is None else environ
    changes: dict[str, Any] = {}
    for field, variable in _BOUND_ENV.items():
        text = environ.get(variable, "").strip()
        if text:
            if not (text.isascii() and text.isdigit()):
                raise ConfigError(f"{variable}: {text!r} is not a whole number >= 0")
            changes[field] = int(text)
    if max_open_stores is not None:
        changes["max_open_stores"] = max_open_stores
    if memory_budget_mb is not None:
        changes["memory_budget_mb"] = memory_budget_mb
    if db:
        changes["db_path"] = db
    if postgres_dsn:
        changes["backend"] = "postgres"
        changes["postgres_dsn"] = postgres_dsn
    if addr:
        changes["listen_addr"] = addr
    updated = msgspec.structs.replace(config, **changes)
    if not updated.api_key and environ.get("MEMBRANE_API_KEY"):
        updated = msgspec.structs.replace(updated, api_key=environ["MEMBRANE_API_KEY"])
    if not updated.api_keys_file and environ.get("MEMBRANE_API_KEYS_FILE"):
        updated = msgspec.structs.replace(updated, api_keys_file=environ["MEMBRANE_API_KEYS_FILE"])
    return updated


def parse_duration(field: str, text: str) -> float:
    """Go's duration strings (``"1h"``, ``"30m"``, ``"1h30m"``, ``"500ms"``) in seconds."""
    if text in ("0", ""):
        return 0.0
    position, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(text) or position == 0:
        raise ConfigError(f"{field}: invalid duration {text!r}")
    return total


def listen_target(listen_addr: str) -> str:
    """Go's ``:9090`` (every interface) in grpc's form."""
    return f"[::]{listen_addr}" if listen_addr.startswith(":") else listen_addr

"""The daemon: engines, the gRPC server, health, TLS, schedules and an orderly shutdown.

Startup follows ``membraned`` (spec §7.2): open the store (LMDB, or PostgreSQL with
``backend: postgres``), build the server and listen, start the schedules, serve. Shutdown
(SIGINT/SIGTERM or :meth:`Daemon.stop`): health goes NOT_SERVING, the server stops
gracefully (5 s, then hard), schedules stop, stores close — their read views checkpointed
so the next start resumes where this one stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from membrane_es.access.keys import DEFAULT_TENANT, KeyRing
from membrane_es.embedding.default import named, resolve
from membrane_es.embedding.protocol import Embedder
from membrane_es.engine import EngineOptions, Membrane
from membrane_es.grpc_server.config import ConfigError, DaemonConfig, listen_target
from membrane_es.grpc_server.extensions import MembraneEsService
from membrane_es.grpc_server.interceptors import GuardInterceptor
from membrane_es.grpc_server.ratelimit import TokenBuckets
from membrane_es.grpc_server.service import GraphDefaults, MembraneService
from membrane_es.grpc_server.wire.membrane.v1 import membrane_pb2_grpc as pb_grpc
from membrane_es.grpc_server.wire.membrane_es.v1 import membrane_es_pb2_grpc as es_pb_grpc
from membrane_es.serving.signals import wait_for_stop_signal
from membrane_es.serving.store_places import announced_if_new
from membrane_es.serving.tenants import StoreBounds, Tenants

SERVICE_NAME = "membrane.v1.MembraneService"
EXTENSIONS_NAME = "membrane_es.v1.MembraneEsService"
MAX_RECEIVE_BYTES = 11_534_336
GRACE_SECONDS = 5.0
WORKERS = 16

log = logging.getLogger("membrane_es.daemon")


class Daemon:
    """A running daemon. ``port`` is the bound port (useful with ``127.0.0.1:0``)."""

    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.tenants, self.keys = open_stores(config)
        keys = self.keys

        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="membrane-rpc"),
            interceptors=[
                GuardInterceptor(
                    keys, TokenBuckets(config.rate_limit_per_second), self.tenants.serving
                )
            ],
            options=[("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)],
        )
        defaults = GraphDefaults(
            root_limit=config.graph_default_root_limit,
            node_limit=config.graph_default_node_limit,
            edge_limit=config.graph_default_edge_limit,
            max_hops=config.graph_default_max_hops,
        )
        membrane = MembraneService(self.tenants, defaults)
        pb_grpc.add_MembraneServiceServicer_to_server(membrane, self._server)
        es_pb_grpc.add_MembraneEsServiceServicer_to_server(
            MembraneEsService(membrane), self._server
        )
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        target = listen_target(config.listen_addr)
        try:
            if config.tls_cert_file:
                self.port = self._server.add_secure_port(target, _tls(config))
            else:
                self.port = self._server.add_insecure_port(target)
        except RuntimeError as error:
            self.tenants.close()
            raise ConfigError(
                f"create grpc server: listen on {config.listen_addr}: {error}"
            ) from None
        self._stopped = threading.Event()
        self._also_stop: list[Callable[[], None]] = []

    def also_stop(self, stop: Callable[[], None]) -> None:
        """Run ``stop`` (another server over these stores) before the stores close."""
        self._also_stop.append(stop)

    def start(self) -> Daemon:
        self._server.start()
        for service in ("", SERVICE_NAME, EXTENSIONS_NAME):
            self.health.set(service, health_pb2.HealthCheckResponse.SERVING)
        log.info("membrane_es serving on port %d", self.port)
        return self

    def stop(self, grace: float = GRACE_SECONDS) -> None:
        """Idempotent: NOT_SERVING, graceful stop, then the stores close."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        for service in ("", SERVICE_NAME, EXTENSIONS_NAME):
            self.health.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        self._server.stop(grace).wait()
        for stop in self._also_stop:
            stop()
        self.tenants.close()

    def serve_until_signalled(self, on_hangup: Callable[[], object] | None = None) -> None:
        """Blocks until SIGINT or SIGTERM, then stops (main thread only); SIGHUP meanwhile
        calls ``on_hangup`` (the keys file's reload)."""
        try:
            wait_for_stop_signal(on_hangup)
        finally:
            self.stop()

    def __enter__(self) -> Daemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def open_stores(config: DaemonConfig) -> tuple[Tenants, KeyRing]:
    """Every tenant's store as the configuration says, and the keys. The default tenant's
    store is opened now (made, and announced, if new; a path whose directory is missing
    fails here); every other tenant's is opened by its first request (so a daemon with
    thousands of tenants starts at once, and one tenant's damaged store fails that tenant's
    requests, not the daemon), and made by its first write, never by a read."""
    config.validate()
    keys = KeyRing.load(config.api_key, config.api_keys_file or None)
    options = EngineOptions(
        embedder=_embedder(config),
        selection_threshold=config.selection_confidence_threshold,
        default_sensitivity=config.default_sensitivity,
        env=config.engine_env(),
        resolve_writes=config.resolve_writes,
        single_valued=tuple(config.single_valued_predicates),
        many_valued=tuple(config.many_valued_predicates),
    )
    if config.ingest_llm_enabled or config.llm_endpoint or config.embedding_endpoint:
        log.warning(
            "hosted LLM and embedding endpoints are not used by membrane_es; "
            "capture uses its rule-based interpretation, embeddings come from embedding_model"
        )
    tenants = Tenants(
        config.db_path,
        lambda tenant, _: _open_engine(config, tenant, options),
        lambda tenant, _: _open_engine(config, tenant, options, create=False),
        StoreBounds(max_open=config.max_open_stores, memory_budget=config.memory_budget_mb * 2**20),
    )
    interval = config.consolidation_seconds()
    if interval > 0:
        tenants.on_open(lambda engine: _schedule(engine, interval))
    # A store opened from its checkpoint reads its vectors back while the daemon serves.
    tenants.on_open(_read_vectors_back)
    try:
        with announced_if_new(config.store_address(), "db_path"):
            tenants.get(DEFAULT_TENANT)
    except BaseException:
        tenants.close()
        raise
    return tenants, keys


def _open_engine(
    config: DaemonConfig,
    tenant: str,
    options: EngineOptions,
    *,
    create: bool = True,
) -> Membrane:
    """A tenant's store, where the configuration puts it (:meth:`DaemonConfig.store_address`);
    with ``create`` False, a store that does not exist yet is a StoreNotFoundError."""
    address = config.store_address()
    if tenant != DEFAULT_TENANT:
        address = address.tenant(tenant)
    return Membrane.connect(address, options, create=create)


def _read_vectors_back(engine: Membrane) -> None:
    engine.start_reading_vectors()


def _schedule(engine: Membrane, interval: float) -> None:
    engine.start_consolidation(interval)


def _embedder(config: DaemonConfig) -> Embedder | None:
    """The one embedder every tenant's store shares: the default is resolved here, once, so
    the model is loaded once, not per tenant."""
    return resolve(named(config.embedding_model))


def _tls(config: DaemonConfig) -> grpc.ServerCredentials:
    try:
        key = Path(config.tls_key_file).read_bytes()
        cert = Path(config.tls_cert_file).read_bytes()
    except OSError as error:
        raise ConfigError(f"create grpc server: load TLS credentials: {error}") from None
    return grpc.ssl_server_credentials([(key, cert)])

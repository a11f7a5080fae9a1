"""``membrane-es ui``: the browser inspector over a local store, read-only, on loopback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from membrane_es.cli.app import MissingExtraError, UsageProblem, command
from membrane_es.cli.embedder import EmbedderName, announce_loading, embedder_for
from membrane_es.cli.options import Store, StoreAddress
from membrane_es.engine import Membrane
from membrane_es.errors import MembraneError
from membrane_es.serving.signals import wait_for_stop_signal

LOOPBACK = "127.0.0.1"
MAX_PORT = 65535


def _open_read_only(store: StoreAddress, embedder: str) -> Membrane:
    """The store, opened so nothing can write to it, following other processes' writes."""
    memory = Membrane.connect(
        store, create=False, read_only=True, follow=True, embedder=embedder_for(embedder)
    )
    announce_loading(memory)
    return memory


@command("ui", "membrane-es ui ./memory --port 8700")
def ui(
    store: Store,
    port: Annotated[
        int,
        typer.Option(
            "--port",
            metavar="PORT",
            help="the port on 127.0.0.1 (0: a free one, printed)",
            show_default=True,
        ),
    ] = 0,
    embedder: EmbedderName = "default",
) -> None:
    """Open a store read-only in a browser: search explained, each record's timeline,
    relations, metrics and integrity, at any moment. Serves on 127.0.0.1 only, until
    interrupted; prints the address."""
    if not 0 <= port <= MAX_PORT:
        raise UsageProblem(f"--port: expected a port from 0 to {MAX_PORT}")
    try:
        from membrane_es.http_api import HttpServer
        from membrane_es.http_api.ui.standalone import inspector_app
        from membrane_es.serving.tenants import Tenants
    except ImportError as error:
        raise MissingExtraError("server", error.name or "litestar") from None
    memory = _open_read_only(store, embedder)

    def only_this_store(tenant: str, path: Path | None) -> Membrane:
        if tenant:
            raise MembraneError(f"the inspector serves one store; no tenant {tenant!r}")
        return memory

    tenants = Tenants(str(store.path or ":memory:"), only_this_store)
    with memory, HttpServer(inspector_app(tenants), f"{LOOPBACK}:{port}") as server:
        address = f"http://{LOOPBACK}:{server.port}/ui/"
        print(f"membrane-es ui: {store} (read-only) listening on {address}", file=sys.stderr)
        print(address, flush=True)
        wait_for_stop_signal()  # a handler that set an Event here could hang the stop

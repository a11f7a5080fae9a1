"""Serving the entries API: uvicorn on one address, in this thread or beside the gRPC daemon.

The socket is bound when the server is made (so ``port`` is known at once, ``:0`` included).
``stop`` asks uvicorn to finish: it stops accepting, lets requests in flight complete (up to
``GRACE_SECONDS``) and returns; whoever owns the stores closes them after.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

GRACE_SECONDS = 5


def split_address(address: str) -> tuple[str, int]:
    """``host:port``, ``:port`` (every interface) or ``[v6]:port``."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65_535:
        raise ValueError(f"HTTP listen address {address!r} is not host:port")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def _bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to the address. Its protocol is named (IPPROTO_TCP), so asyncio
    turns Nagle's algorithm off on the connections it accepts: otherwise a response written
    in two parts waits for the client's delayed ACK (about 40 ms a request)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        # "Address already in use" alone does not say which: name the address and port
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise OSError(error.errno, f"{error.strerror} ({where})") from error
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, telling when it accepts connections."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Whoever runs the server handles signals, and stops it before closing the stores
        # (uvicorn's own handling would re-raise SIGTERM and end the process first).
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


class HttpServer:
    """The entries API on ``address`` (``host:port``; port 0 picks a free one)."""

    def __init__(self, app: Any, address: str) -> None:
        host, port = split_address(address)
        self.config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACE_SECONDS,
        )
        self._socket = _bind(host, port)
        self.port: int = self._socket.getsockname()[1]
        self._server = _Server(self.config)
        self._thread: threading.Thread | None = None

    def start(self) -> HttpServer:
        """Serve on a thread of its own; returns once connections are accepted."""
        self._thread = threading.Thread(target=self._run, name="membrane-http", daemon=True)
        self._thread.start()
        while not self._server.ready.wait(0.05):
            if not self._thread.is_alive():
                raise RuntimeError("the HTTP server failed to start")
        return self

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._socket]))
        self._socket.close()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def stop(self) -> None:
        """Stop accepting, finish requests in flight, return when done (idempotent)."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

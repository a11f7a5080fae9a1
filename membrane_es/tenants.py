"""One engine per tenant: the default tenant's store at the daemon's path, every other
tenant's in ``<path>/tenants/<name>`` (on PostgreSQL: its own schema, with its read views in
that directory). Separate stores make isolation structural: no query, however it is phrased,
can reach another tenant's records, and each tenant's metrics count only its own. Engines
open on first use and close with the daemon.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from membrane_es.access import DEFAULT_TENANT
from membrane_es.engine import IN_MEMORY, Membrane, holds_store
from membrane_es.errors import StoreNotFoundError


class Tenants:
    """Engines by tenant name, opened lazily with ``open_engine(tenant, path or None)``.

    A write opens (and so may create) a tenant's store: :meth:`get`. A read never creates
    one: :meth:`reader` answers for a tenant that has no store yet from an empty store kept
    in memory. ``open_existing(tenant, path)`` opens a tenant's store only if it exists,
    raising :class:`~membrane_es.errors.StoreNotFoundError` otherwise; without it, a store is
    an LMDB directory holding its data file."""

    def __init__(
        self,
        root: str,
        open_engine: Callable[[str, Path | None], Membrane],
        open_existing: Callable[[str, Path | None], Membrane] | None = None,
    ) -> None:
        self._root = root
        self._open = open_engine
        self._open_existing = open_existing
        self._engines: dict[str, Membrane] = {}
        self._lock = threading.Lock()
        self._on_open: list[Callable[[Membrane], None]] = []
        self._empty: Membrane | None = None

    def path_of(self, tenant: str) -> Path | None:
        if self._root == IN_MEMORY:
            return None
        root = Path(self._root)
        return root if tenant == DEFAULT_TENANT else root / "tenants" / tenant

    def get(self, tenant: str) -> Membrane:
        engine = self._engines.get(tenant)
        if engine is not None:
            return engine
        with self._lock:
            engine = self._engines.get(tenant)
            if engine is None:
                path = self.path_of(tenant)
                if tenant != DEFAULT_TENANT and path is not None:
                    # the tenants' directory is this registry's layout, made with the first
                    # tenant's store (a store is made only inside a directory that exists)
                    path.parent.mkdir(parents=True, exist_ok=True)
                engine = self._open(tenant, path)
                for hook in self._on_open:
                    hook(engine)
                self._engines[tenant] = engine
            return engine

    def reader(self, tenant: str) -> Membrane:
        """The engine a read of ``tenant`` uses: its store, if it has one (opened now if need
        be), else an empty store in memory; nothing is created on disk for a read."""
        engine = self._engines.get(tenant)
        if engine is not None:
            return engine
        path = self.path_of(tenant)
        if tenant == DEFAULT_TENANT or path is None:
            return self.get(tenant)  # the default store is opened at startup
        with self._lock:
            engine = self._engines.get(tenant)
            if engine is not None:
                return engine
            try:
                engine = self._existing(tenant, path)
            except StoreNotFoundError:
                return self._empty_store()
            for hook in self._on_open:
                hook(engine)
            self._engines[tenant] = engine
            return engine

    def open_existing(self, tenant: str) -> None:
        """Open ``tenant``'s store if it has one (so a damaged one fails now); create none."""
        self.reader(tenant)

    def _existing(self, tenant: str, path: Path) -> Membrane:
        if self._open_existing is not None:
            return self._open_existing(tenant, path)
        if not holds_store(path):
            raise StoreNotFoundError(str(path))
        return self._open(tenant, path)

    def _empty_store(self) -> Membrane:
        """One empty in-memory store answers every read of a tenant without a store (held
        under the lock)."""
        if self._empty is None:
            self._empty = Membrane.in_memory(embedder=None)
        return self._empty

    def on_open(self, hook: Callable[[Membrane], None]) -> None:
        """Runs ``hook`` on every engine opened from now on (and on those already open)."""
        with self._lock:
            self._on_open.append(hook)
            for engine in self._engines.values():
                hook(engine)

    def close(self) -> None:
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
            if self._empty is not None:
                engines.append(self._empty)
                self._empty = None
        for engine in engines:
            engine.close()

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
from membrane_es.engine import Membrane

IN_MEMORY = ":memory:"


class Tenants:
    """Engines by tenant name, opened lazily with ``open_engine(tenant, path or None)``."""

    def __init__(self, root: str, open_engine: Callable[[str, Path | None], Membrane]) -> None:
        self._root = root
        self._open = open_engine
        self._engines: dict[str, Membrane] = {}
        self._lock = threading.Lock()
        self._on_open: list[Callable[[Membrane], None]] = []

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
                engine = self._open(tenant, self.path_of(tenant))
                for hook in self._on_open:
                    hook(engine)
                self._engines[tenant] = engine
            return engine

    def on_open(self, hook: Callable[[Membrane], None]) -> None:
        """Runs ``hook`` on every engine opened from now on (and on those already open)."""
        with self._lock:
            self._on_open.append(hook)
            for engine in self._engines.values():
                hook(engine)

    def close(self) -> None:
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.close()

"""Dependencies point one way, floor by floor (README, "Code layout"):

    storage and vocabulary (schema, codec, the stores)  ←  aggregates  ←  application
    aggregates  ←  commands          projections  ←  queries
    the engine composes them all; the edges (servers, CLI, MCP) sit on top; nothing imports them.
    the framework adapters (integrations) use the public API only: what ``membrane_es`` exports.

Each floor below the engine may import only what is listed for it: anything else is a
dependency pointing up or sideways."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "membrane_es"

# Storage and vocabulary: bytes, files, time and the words of the domain; no domain logic.
STORAGE = (
    "membrane_es.errors",
    "membrane_es.codec",
    # the backends and what they agree on (one package: see its docstring)
    "membrane_es.stores",
)
VOCABULARY = ("membrane_es.errors", "membrane_es.schema", "membrane_es.decay", "membrane_es.clock")
EMBEDDING = ("membrane_es.embedding",)
AGGREGATES = ("membrane_es.aggregates",)
PROJECTIONS = ("membrane_es.projections",)

# module prefix → the only membrane_es modules it may import (besides its own package)
ALLOWED: dict[str, tuple[str, ...]] = {
    **{module: STORAGE for module in STORAGE},
    "membrane_es.errors": (),
    "membrane_es.schema": ("membrane_es.errors",),
    "membrane_es.decay": ("membrane_es.schema",),
    "membrane_es.embedding": VOCABULARY,
    "membrane_es.aggregates": (*VOCABULARY, *EMBEDDING, "membrane_es.stores.key_store"),
    # the eventsourcing wiring: the aggregates, their bytes and where they are kept
    "membrane_es.application": (
        *STORAGE,
        *AGGREGATES,
        "membrane_es.record_cache",
        "membrane_es.key_binding",
    ),
    "membrane_es.key_binding": (*STORAGE, *AGGREGATES),
    "membrane_es.record_cache": AGGREGATES,
    "membrane_es.commands": (*VOCABULARY, *EMBEDDING, *AGGREGATES),
    "membrane_es.projections": (
        *VOCABULARY,
        *EMBEDDING,
        *AGGREGATES,
        "membrane_es.codec",
        # what a recorder offers the read side (declarations only: no backend)
        "membrane_es.stores.abilities",
    ),
    "membrane_es.queries": (*VOCABULARY, *EMBEDDING, *AGGREGATES, *PROJECTIONS),
}
# module prefix → membrane_es modules it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # the HTTP edge shares keys and tenants with the gRPC daemon through neutral modules
    "membrane_es.http_api": ("membrane_es.grpc_server", "membrane_es.cli"),
}
# The framework adapters hold what a user holds: the names ``membrane_es`` itself exports.
INTEGRATIONS = "membrane_es.integrations"
PUBLIC_API = "membrane_es"
EDGES = (
    "membrane_es.cli",
    "membrane_es.grpc_server",
    "membrane_es.http_api",
    "membrane_es.mcp_server",
    INTEGRATIONS,
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n for n in names if n.startswith("membrane_es")}


MODULES = {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports_only_what_its_floor_may(module: str) -> None:
    for prefix, allowed in ALLOWED.items():
        if _within(module, (prefix,)):
            bad = {i for i in MODULES[module] if not _within(i, (prefix, *allowed))}
            assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports_point_inward(module: str) -> None:
    for prefix, banned in FORBIDDEN.items():
        if _within(module, (prefix,)):
            bad = {i for i in MODULES[module] if _within(i, banned)}
            assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_nothing_imports_the_edges(module: str) -> None:
    if module == "membrane_es.__main__" or any(
        module == edge or module.startswith(edge + ".") for edge in EDGES
    ):
        return  # an edge (or a module inside an edge package) may use the edges
    assert not {i for i in MODULES[module] if i in EDGES}, module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _within(m, (INTEGRATIONS,))))
def test_integrations_use_the_public_api_only(module: str) -> None:
    bad = {i for i in MODULES[module] if i != PUBLIC_API and not _within(i, (INTEGRATIONS,))}
    assert not bad, f"{module} imports {sorted(bad)}: adapters use what membrane_es exports"


def test_the_integrations_package_imports_no_framework() -> None:
    package = PACKAGE / "integrations" / "__init__.py"
    tree = ast.parse(package.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


# Inside the stores a backend uses the neutral pieces (the chain, keys, event times, record
# numbers), never another backend: a new backend is a package beside these two.
BACKENDS = ("membrane_es.stores.lmdb", "membrane_es.stores.postgres")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _within(m, BACKENDS)))
def test_a_backend_never_imports_another(module: str) -> None:
    own = next(backend for backend in BACKENDS if _within(module, (backend,)))
    others = tuple(backend for backend in BACKENDS if backend != own)
    assert not {i for i in MODULES[module] if _within(i, others)}, module

"""Dependencies point one way: schema ← aggregates ← commands; schema ← projections ← queries;
the engine composes them; servers and the CLI use the engine only; nothing imports them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "membrane_es"

# module prefix → membrane_es modules it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "membrane_es.schema": (
        "membrane_es.aggregates",
        "membrane_es.commands",
        "membrane_es.projections",
        "membrane_es.queries",
        "membrane_es.engine",
        "membrane_es.application",
    ),
    "membrane_es.aggregates": (
        "membrane_es.commands",
        "membrane_es.projections",
        "membrane_es.queries",
        "membrane_es.engine",
        "membrane_es.application",
        "membrane_es.lmdb_store",
    ),
    "membrane_es.commands": (
        "membrane_es.projections",
        "membrane_es.queries",
        "membrane_es.engine",
        "membrane_es.application",
        "membrane_es.lmdb_store",
    ),
    "membrane_es.projections": (
        "membrane_es.commands",
        "membrane_es.queries",
        "membrane_es.engine",
    ),
    "membrane_es.queries": ("membrane_es.commands", "membrane_es.engine"),
    "membrane_es.codec": ("membrane_es.aggregates", "membrane_es.engine"),
    "membrane_es.lmdb_store": ("membrane_es.aggregates", "membrane_es.engine"),
    # the HTTP edge shares keys and tenants with the gRPC daemon through neutral modules
    "membrane_es.http_api": ("membrane_es.grpc_server", "membrane_es.cli"),
}
EDGES = (
    "membrane_es.cli",
    "membrane_es.grpc_server",
    "membrane_es.http_api",
    "membrane_es.mcp_server",
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


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports_point_inward(module: str) -> None:
    for prefix, banned in FORBIDDEN.items():
        if module == prefix or module.startswith(prefix + "."):
            bad = {i for i in MODULES[module] for b in banned if i == b or i.startswith(b + ".")}
            assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_nothing_imports_the_edges(module: str) -> None:
    if module == "membrane_es.__main__" or any(
        module == edge or module.startswith(edge + ".") for edge in EDGES
    ):
        return  # an edge (or a module inside an edge package) may use the edges
    assert not {i for i in MODULES[module] if i in EDGES}, module

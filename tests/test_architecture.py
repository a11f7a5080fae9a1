"""Dependencies point one way, floor by floor (README, "Code layout"):

    storage and vocabulary (schema, codec, the stores)  ←  aggregates  ←  application
    aggregates  ←  commands          projections  ←  queries
    the engine composes them all; the edges (servers, CLI, MCP) sit on top; nothing imports them.
    the framework adapters (integrations) use the public API only: what ``membrane_es`` exports.

Each floor below the engine may import only what is listed for it: anything else is a
dependency pointing up or sideways.

The edges (the CLI, the gRPC daemon, the HTTP API and its inspector, the MCP server, and the
modules they share: keys and callers, tenants, where a store may be made, listening) use the
engine through its public surface only: ``membrane_es`` and ``membrane_es.engine`` (the
package, not its modules: what their ``__init__`` exports), and the vocabulary a caller
speaks in — ``membrane_es.errors``, ``membrane_es.schema``, ``membrane_es.embedding`` (the
embedders a caller hands the engine). Besides that an edge may import the other edges and
the neutral modules they share (``ceiling``: what a caller may see; ``signals``: stopping on
SIGTERM). Queries, projections, commands, aggregates, the application and the stores are
the engine's own: what an edge needs of them is a method or a name the engine exports, so a
new store is opened, checked and measured through the engine alone."""

from __future__ import annotations

import ast
from pathlib import Path

import eventsourcing
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "membrane_es"

# Storage and vocabulary: bytes, files, time and the words of the domain; no domain logic.
STORAGE = (
    "membrane_es.errors",
    # the log's bytes (codec), the backends and what they agree on (one package: see its docstring)
    "membrane_es.stores",
)
VOCABULARY = ("membrane_es.errors", "membrane_es.schema", "membrane_es.timekeeping")
EMBEDDING = ("membrane_es.embedding",)
AGGREGATES = ("membrane_es.aggregates",)
PROJECTIONS = ("membrane_es.projections",)

# module prefix → the only membrane_es modules it may import (besides its own package)
ALLOWED: dict[str, tuple[str, ...]] = {
    **{module: STORAGE for module in STORAGE},
    "membrane_es.errors": (),
    "membrane_es.schema": ("membrane_es.errors",),
    "membrane_es.timekeeping": ("membrane_es.errors", "membrane_es.schema"),
    "membrane_es.embedding": VOCABULARY,
    "membrane_es.aggregates": (*VOCABULARY, *EMBEDDING, "membrane_es.stores.key_store"),
    # the eventsourcing wiring: the aggregates, their bytes and where they are kept
    "membrane_es.wiring": (*STORAGE, *AGGREGATES),
    "membrane_es.commands": (*VOCABULARY, *EMBEDDING, *AGGREGATES),
    "membrane_es.projections": (
        *VOCABULARY,
        *EMBEDDING,
        *AGGREGATES,
        "membrane_es.stores.codec",
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


# The edges, and what every edge may import besides the other edges (see the docstring).
EDGE_MODULES = (
    "membrane_es.cli",
    "membrane_es.grpc_server",
    "membrane_es.http_api",
    "membrane_es.mcp_server",
    # trust and keys, and what every server shares (tenants, where stores and servers live)
    "membrane_es.access",
    "membrane_es.serving",
)
ENGINE_SURFACE = ("membrane_es", "membrane_es.engine")  # the packages themselves only
EDGE_VOCABULARY = ("membrane_es.errors", "membrane_es.schema", "membrane_es.embedding")
EDGE_NEUTRAL = ("membrane_es.access.ceiling", "membrane_es.serving.signals")


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


def _edge_may_import(name: str) -> bool:
    return name in ENGINE_SURFACE or _within(name, (*EDGE_VOCABULARY, *EDGE_NEUTRAL, *EDGE_MODULES))


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _within(m, EDGE_MODULES)))
def test_edges_use_the_engine_through_its_public_surface(module: str) -> None:
    bad = {i for i in MODULES[module] if not _edge_may_import(i)}
    assert not bad, f"{module} imports {sorted(bad)}: an edge uses what the engine exports"


# What an engine holds that an edge must not reach through it: the eventsourcing application
# and its recorder (the log, a database's connections) and the read views. An edge asks the
# engine instead (``event_count``, ``stored_bytes``, ``census``, ``relations_to``…).
ENGINE_INSIDES = {"application", "recorder", "datastore", "views"}


def _attributes(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}


@pytest.mark.parametrize(
    "path",
    sorted(
        (p for p in PACKAGE.rglob("*.py") if _within(_module_name(p), EDGE_MODULES)),
        key=str,
    ),
    ids=lambda p: _module_name(p),
)
def test_edges_never_reach_inside_the_engine(path: Path) -> None:
    reached = _attributes(path) & ENGINE_INSIDES
    assert not reached, f"{_module_name(path)} reaches {sorted(reached)} of an engine"


# eventsourcing is used through its public API and the extension points it documents: nothing
# here reads or sets a ``_`` member the library defines. Three ways one would be touched:
# through a name imported from eventsourcing (``PostgresAggregateRecorder._insert...``), from
# inside a subclass of one of its classes (``self._pending_events``: also where an attribute of
# our own would clobber one of the library's), or on another object, under a name only the
# library defines (``aggregate._pending_events``).
EVENTSOURCING = Path(eventsourcing.__file__).resolve().parent


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_private_names(paths: list[Path]) -> set[str]:
    """The ``_`` names these modules define: functions, attributes a class sets on itself or
    its instances, and class-level names."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                names.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                for statement in node.body:
                    targets = (
                        statement.targets
                        if isinstance(statement, ast.Assign)
                        else [statement.target]
                        if isinstance(statement, ast.AnnAssign)
                        else []
                    )
                    names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {name for name in names if _private(name)}


LIBRARY_PRIVATE = _defined_private_names(
    [p for p in EVENTSOURCING.rglob("*.py") if "tests" not in p.relative_to(EVENTSOURCING).parts]
)
OURS_PRIVATE = _defined_private_names(sorted(PACKAGE.rglob("*.py")))
TREES = {_module_name(p): ast.parse(p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))}


def _library_names(tree: ast.Module) -> set[str]:
    """The names a module binds to eventsourcing's modules and the things in them."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eventsourcing"):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(
                alias.asname or alias.name.split(".")[0]
                for alias in node.names
                if alias.name.startswith("eventsourcing")
            )
    return names


def _base_names(node: ast.ClassDef) -> set[str]:
    return {
        base.id if isinstance(base, ast.Name) else base.attr
        for base in (b.value if isinstance(b, ast.Subscript) else b for b in node.bases)
        if isinstance(base, ast.Name | ast.Attribute)
    }


def _library_subclasses() -> set[str]:
    """Names of the classes here that derive, directly or through others here, from one of
    eventsourcing's."""
    bases: dict[str, set[str]] = {}
    derived: set[str] = set()
    for tree in TREES.values():
        library = _library_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, set()).update(_base_names(node))
                if _base_names(node) & library:
                    derived.add(node.name)
    grown = True
    while grown:
        more = {name for name, of in bases.items() if of & derived} - derived
        derived |= more
        grown = bool(more)
    return derived


LIBRARY_SUBCLASSES = _library_subclasses()


def _library_internals(tree: ast.Module) -> list[str]:
    library = _library_names(tree)
    found: list[str] = []

    def visit(node: ast.AST, in_subclass: bool) -> None:
        if isinstance(node, ast.ClassDef):
            in_subclass = node.name in LIBRARY_SUBCLASSES
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            own = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            via_super = (
                isinstance(owner, ast.Call)
                and isinstance(owner.func, ast.Name)
                and owner.func.id == "super"
            )
            if isinstance(owner, ast.Name) and owner.id in library:
                found.append(f"line {node.lineno}: {owner.id}.{node.attr}")
            elif (own or via_super) and in_subclass and node.attr in LIBRARY_PRIVATE:
                found.append(f"line {node.lineno}: {node.attr} of a subclass of the library's")
            elif not own and node.attr in LIBRARY_PRIVATE - OURS_PRIVATE:
                found.append(f"line {node.lineno}: .{node.attr}")
        for child in ast.iter_child_nodes(node):
            visit(child, in_subclass)

    visit(tree, False)
    return found


@pytest.mark.parametrize("module", sorted(TREES))
def test_no_module_touches_eventsourcing_internals(module: str) -> None:
    found = _library_internals(TREES[module])
    assert not found, f"{module} uses eventsourcing's private members: {found}"


ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


@pytest.mark.parametrize(
    "path",
    sorted(
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.name != "__init__.py" and "wire" not in p.parts
    ),
)
def test_the_architecture_page_names_every_module(path: str) -> None:
    """docs/architecture.md is the map a new maintainer reads: a module it does not name is
    one they cannot find."""
    assert f"`{path}`" in ARCHITECTURE.read_text(), f"docs/architecture.md does not name {path}"

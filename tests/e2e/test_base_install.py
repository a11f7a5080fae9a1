"""The base install (``pip install membrane-es``, no extras) runs what the README promises it:
the engine, the command line and its demo. Each optional package is made unimportable in a
fresh interpreter, as on a machine that never installed it; a module that imports one
eagerly (a backend's driver, a server's framework) fails here before it fails a user."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The top-level import names of every optional extra's packages.
OPTIONAL = (
    "psycopg",
    "psycopg_pool",
    "grpc",
    "grpc_health",
    "google.protobuf",
    "yaml",
    "litestar",
    "uvicorn",
    "jinja2",
    "mcp",
    "langgraph",
    "langchain_core",
    "agents",
    "onnxruntime",
    "sentence_transformers",
    "torch",
    "transformers",
    "tokenizers",
    "chromadb",
    "lancedb",
    "faiss",
)

# A name set to None in sys.modules is what Python makes of a package that is not there:
# ``import`` raises ModuleNotFoundError and ``importlib.util.find_spec`` answers None.
BLOCKER = textwrap.dedent(
    f"""
    import sys
    for name in {OPTIONAL!r}:
        sys.modules[name] = None
    """
)


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_engine_and_the_command_line_import_without_any_extra(tmp_path: Path) -> None:
    done = _run(
        """
        import membrane_es, membrane_es.cli, membrane_es.engine
        from membrane_es import Membrane
        memory = Membrane.connect(":memory:")
        memory.capture_memory({"text": "the base install works"})
        print(len(memory.retrieve("base install").records))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


def test_the_demo_runs_on_the_base_install(tmp_path: Path) -> None:
    done = _run(
        """
        import sys
        from membrane_es.cli import main
        sys.argv = ["membrane-es", "demo"]
        main()
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verify: OK" in done.stdout

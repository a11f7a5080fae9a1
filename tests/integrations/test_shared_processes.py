"""Adapters in two processes on one store — an LMDB directory, and a PostgreSQL log (tests
marked ``postgres``): puts of the same keys, pops from one session, re-adds of the same
document ids, all at once. The last put of each key wins, every item is popped exactly
once, and no key or id is ever left with two live records. Each process is
``tests/integrations/shared_worker.py``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from membrane_es import Membrane
from membrane_es.integrations.langchain_vectorstore import LangChainEmbedder, MembraneVectorStore
from membrane_es.integrations.langgraph_store import MembraneStore
from membrane_es.integrations.openai_agents_session import MembraneSession
from tests.integration.conftest import postgres_dsn, postgres_server
from tests.integrations import shared_worker as worker
from tests.integrations.shared_support import Hooked

__all__ = ["postgres_dsn", "postgres_server"]  # the fixtures the PostgreSQL runs use

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 300


def both(address: str, kind: str) -> list[dict[str, Any]]:
    """Run two workers at once on the store at ``address``; what each did."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.integrations.shared_worker", address, name, kind],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("p1", "p2")
    ]
    outputs = []
    try:
        for process in processes:
            out, _ = process.communicate(timeout=TIMEOUT_SECONDS)
            outputs.append((process.returncode, out))
    finally:  # a worker left running or a pipe left open would fail a later test
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
    done = []
    for returncode, out in outputs:
        assert returncode == 0, f"a worker failed (exit {returncode})"
        done.append(json.loads(out.strip().splitlines()[-1]))
    return done


def check_store(address: str) -> None:
    both(address, "store")
    with Membrane.connect(address, embedder=None) as memory:
        items = MembraneStore(memory).search(("ns",), limit=100)
        assert sorted(item.key for item in items) == [f"k{i}" for i in range(worker.KEYS)]
        for item in items:  # the last put of one of the two processes
            n = int(item.key[1:])
            assert item.value["n"] == max(m for m in range(worker.PUTS) if m % worker.KEYS == n)


def check_session(address: str) -> None:
    with Membrane.connect(address, embedder=None) as memory:
        items: list[Any] = [{"content": str(i)} for i in range(2 * worker.POPS)]
        asyncio.run(MembraneSession("chat", memory).add_items(items))
    popped = [item["content"] for run in both(address, "session") for item in run["popped"]]
    assert sorted(popped, key=int) == [str(i) for i in range(2 * worker.POPS)]
    with Membrane.connect(address, embedder=None) as memory:
        assert asyncio.run(MembraneSession("chat", memory).get_items()) == []


def check_vectors(address: str) -> None:
    both(address, "vectors")
    embedder = Hooked()
    with Membrane.connect(address, embedder=LangChainEmbedder(embedder)) as memory:
        found = MembraneVectorStore(memory, embedder).similarity_search("x", k=100)
        assert sorted(d.id or "" for d in found) == [f"doc{i}" for i in range(7)]


@pytest.mark.parametrize("check", [check_store, check_session, check_vectors])
def test_two_processes_on_one_lmdb_directory(tmp_path: Path, check: Any) -> None:
    check(str(tmp_path / "store"))


@pytest.mark.postgres
@pytest.mark.parametrize("check", [check_store, check_session, check_vectors])
def test_two_processes_on_one_postgresql_log(postgres_dsn: str, check: Any) -> None:
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    # An address as Membrane.connect reads one: a postgresql:// URL (a key=value DSN would
    # name a directory).
    parts = conninfo_to_dict(postgres_dsn)
    user, password = (
        quote(str(parts.get("user", "")), safe=""),
        quote(str(parts.get("password", "")), safe=""),
    )
    url = (
        f"postgresql://{user}:{password}@{parts.get('host', '127.0.0.1')}:"
        f"{parts.get('port', 5432)}/{parts['dbname']}"
    )
    check(url)
    assert not any(Path.cwd().glob("user=*"))  # nothing was opened as a directory

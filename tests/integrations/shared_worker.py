"""One process of ``test_shared_processes``: opens the store at an address and works through
one adapter on it at the same time as another process does, then prints what it did as one
JSON line. ``python -m tests.integrations.shared_worker ADDRESS NAME KIND``."""

from __future__ import annotations

import asyncio
import json
import sys

from membrane_es import Membrane
from membrane_es.integrations.langchain_vectorstore import LangChainEmbedder, MembraneVectorStore
from membrane_es.integrations.langgraph_store import MembraneStore
from membrane_es.integrations.openai_agents_session import MembraneSession
from tests.integrations.shared_support import Hooked

KEYS = 5
PUTS = 30
POPS = 10
ADDS = 20


def run(address: str, name: str, kind: str) -> dict[str, object]:
    embedder = Hooked()
    with Membrane.connect(
        address, embedder=LangChainEmbedder(embedder) if kind == "vectors" else None
    ) as memory:
        if kind == "store":
            store = MembraneStore(memory)
            last: dict[str, int] = {}
            for n in range(PUTS):
                key = f"k{n % KEYS}"
                store.put(("ns",), key, {"by": name, "n": n})
                item = store.get(("ns",), key)
                assert item is not None  # its own write, or another's later one
                last[key] = n
            return {"last": last}
        if kind == "session":
            session = MembraneSession("chat", memory)

            async def pops() -> list[object]:
                return [await session.pop_item() for _ in range(POPS)]

            return {"popped": asyncio.run(pops())}
        vectors = MembraneVectorStore(memory, embedder)
        for n in range(ADDS):
            vectors.add_texts([f"{name} {n}"], ids=[f"doc{n % 7}"])
        return {"added": ADDS}


if __name__ == "__main__":
    print(json.dumps(run(*sys.argv[1:4])), flush=True)

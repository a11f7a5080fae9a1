"""LangGraph's long-term memory (``langgraph.store.base.BaseStore``) over a membrane_es engine.

:class:`MembraneStore` is a LangGraph store whose items are records: a namespace is a scope,
a put of an existing key supersedes the item's record, a delete retracts it. So every value
an item held is kept, :meth:`MembraneStore.history` lists them, and
:meth:`MembraneStore.as_of` reads the store as it stood at any past moment.
"""

from __future__ import annotations

try:
    import langgraph.store.base  # noqa: F401
except ImportError as missing:
    raise ImportError(
        "the LangGraph store adapter needs LangGraph: pip install 'membrane-es[langgraph]'"
    ) from missing

from membrane_es.integrations.langgraph_store.items import Revision
from membrane_es.integrations.langgraph_store.store import MembraneStore

__all__ = ["MembraneStore", "Revision"]

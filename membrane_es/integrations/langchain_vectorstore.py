"""LangChain: a ``VectorStore`` (and so a retriever, ``as_retriever()``) over membrane_es records.

A document is a semantic record: its id as the subject, :data:`DOCUMENT` as the predicate, and
``{"page_content", "metadata"}`` as the object, with the vector the caller's LangChain
``Embeddings`` made of its page content. Adding a document under an id it already holds is a
revision (the old record retracted, the new one related to it by ``supersedes``, in one
write); deleting retracts. Nothing is overwritten, so :meth:`MembraneVectorStore.history`
lists every revision and :meth:`MembraneVectorStore.as_of` reads the store as it was.

Search covers every record the trust context admits, not only documents written here: a
captured turn, a fact or a skill comes back as a document too (its text as page content,
``record_id``, ``type``, ``scope``, ``tags`` and ``sensitivity`` as metadata). A ``filter``
is a callable over documents, or a dict mapping ``scope``, ``type`` and ``tags`` onto the
engine's scopes, memory types and tags, and any other key onto metadata equality.

Only :mod:`membrane_es`'s public API is used. Needs the ``langchain`` extra.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import msgspec
import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from membrane_es import (
    MAX_RESULTS,
    CompetencePayload,
    EntityPayload,
    EpisodicPayload,
    HistoryEntry,
    Membrane,
    MemoryRecord,
    MemoryType,
    PlanGraphPayload,
    ReadOnlyError,
    SemanticPayload,
    TrustContext,
    ValidationError,
    WorkingPayload,
)
from membrane_es.integrations._reach import checked_scope, checked_sensitivity, checked_trust

DOCUMENT = "langchain_document"
"""The predicate of a record that holds a LangChain document (its subject is the id)."""
ACTOR = "langchain"
SearchFilter = Callable[[Document], bool] | Mapping[str, Any]
_FILTER_KEYS = ("scope", "type", "tags")  # mapped onto the engine; any other key: metadata
_FETCH_GROWTH = 4  # a filtered search asks for this many times more each round


def _asked(wanted: int) -> int:
    """The engine's ``limit`` for ``wanted`` records: past the most one read returns, every
    candidate (``limit=0``), so a large ``k`` or a rare filter match is still found."""
    return wanted if wanted <= MAX_RESULTS else 0


class LangChainEmbedder:
    """A LangChain ``Embeddings`` as the engine's embedder (``Membrane.open(embedder=...)``),
    so every record the engine embeds — captured turns, facts — is comparable with the
    documents a :class:`MembraneVectorStore` holds.

    :param model: the name stored with the vectors (a store refuses an embedder of another
        name); by default the class's import path and its ``model``/``model_name`` if any.
    """

    def __init__(self, embeddings: Embeddings, *, model: str | None = None) -> None:
        if not isinstance(embeddings, Embeddings):
            raise ValidationError("embedding", "must be a langchain_core Embeddings")
        self.embeddings = embeddings
        self._model = model or _model_name(embeddings)
        self._dimensions: int | None = None

    @property
    def model(self) -> str:
        return self._model

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:  # the interface does not say: ask once
            self._dimensions = len(self.embeddings.embed_query("dimensions"))
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Unit-length float32 rows (all zeros for a blank text), as the engine expects."""
        texts = list(texts)
        rows = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        filled = [i for i, text in enumerate(texts) if text.strip()]
        if filled:
            vectors = self.embeddings.embed_documents([texts[i] for i in filled])
            rows[filled] = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def _model_name(embeddings: Embeddings) -> str:
    kind = type(embeddings)
    name = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
    base = f"langchain:{kind.__module__}.{kind.__qualname__}"
    return f"{base}:{name}" if isinstance(name, str) and name else base


class _Held(msgspec.Struct, frozen=True):
    """A document id's current record, and what it says (to spot a no-op re-add)."""

    record_id: str
    body: bytes


class MembraneVectorStore(VectorStore):
    """A LangChain vector store whose documents are membrane_es records.

    :param memory: the engine; open it with ``embedder=LangChainEmbedder(embedding)`` (or
        none) — or use :meth:`open`, which does.
    :param embedding: the LangChain ``Embeddings`` documents and queries are embedded with.
    :param trust: who reads and writes: search and get return only what it may read in full
        (never a record above its ceiling, never one outside its scopes), and a write it
        could not read back is refused.
    :param scope: the scope documents are written to (and ids are unique within).
    :param sensitivity: the sensitivity documents are written with (at most the ceiling).
    :param tags: tags every document written gets.
    :param pinned: documents do not decay (a vector store's ranking is similarity alone).
    """

    def __init__(
        self,
        memory: Membrane,
        embedding: Embeddings,
        *,
        trust: TrustContext | None = None,
        scope: str = "",
        sensitivity: str = "low",
        tags: Sequence[str] = (),
        pinned: bool = True,
        as_of: datetime | None = None,
    ) -> None:
        if not isinstance(memory, Membrane):
            raise ValidationError("memory", f"must be a Membrane, not {type(memory).__name__}")
        engine_model = LangChainEmbedder(embedding).model
        if memory.embedder is not None and memory.embedder.model != engine_model:
            raise ValidationError(
                "embedding",
                f"the store embeds with {memory.embedder.model!r}: open it with "
                "embedder=LangChainEmbedder(embedding) so its vectors and these compare",
            )
        self._memory = memory
        self._embedding = embedding
        self._trust = checked_trust(TrustContext() if trust is None else trust)
        self._scope = checked_scope(self._trust, scope)
        self._sensitivity = checked_sensitivity(self._trust, sensitivity).value
        if isinstance(tags, str) or not all(isinstance(tag, str) for tag in tags):
            raise ValidationError("tags", "must be a list of strings")
        self._tags = list(dict.fromkeys(tags))
        self._pinned = bool(pinned)
        self._as_of = as_of
        self._owned = False
        self._lock = threading.RLock()
        self._held: dict[str, _Held] | None = None
        self._seen = -1  # the log position the held ids were read at

    @classmethod
    def open(cls, path: str | Path, embedding: Embeddings, **options: Any) -> MembraneVectorStore:
        """A durable store in directory ``path`` (LMDB), its embedder ``embedding``; closed by
        :meth:`close` (or ``with``). ``options``: those of the constructor."""
        memory = Membrane.open(path, embedder=LangChainEmbedder(embedding))
        try:
            store = cls(memory, embedding, **options)
        except BaseException:
            memory.close()
            raise
        store._owned = True
        return store

    def close(self) -> None:
        """Close the engine, if :meth:`open` opened it."""
        if self._owned:
            self._memory.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    @property
    def memory(self) -> Membrane:
        return self._memory

    # --- what membrane_es adds ------------------------------------------------------------

    def as_of(self, moment: datetime) -> MembraneVectorStore:
        """This store as it stood at ``moment``: search and get answer as they did then;
        writes raise :class:`~membrane_es.ReadOnlyError`."""
        if not isinstance(moment, datetime) or moment.tzinfo is None:
            raise ValidationError("as_of", "must be an aware datetime")
        return MembraneVectorStore(
            self._memory,
            self._embedding,
            trust=self._trust,
            scope=self._scope,
            sensitivity=self._sensitivity,
            tags=self._tags,
            pinned=self._pinned,
            as_of=moment,
        )

    def history(self, id: str) -> list[HistoryEntry]:
        """Every event of every revision document ``id`` has had in this scope, oldest
        first (who wrote, revised or deleted it, when and why)."""
        records = self._documents(include_retracted=True)
        entries = [
            entry
            for record in records
            if _document_id(record) == id
            for entry in self._memory.history(record.id, trust=self._trust)
        ]
        return sorted(entries, key=lambda entry: entry.timestamp)

    # --- writes ---------------------------------------------------------------------------

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Add documents, or revise those whose id is already held; one atomic write.

        A document equal to the one its id holds is left as it is (nothing is written)."""
        texts = list(texts)
        if ids is not None and len(ids) != len(texts):
            raise ValidationError("ids", f"{len(ids)} ids for {len(texts)} texts")
        if metadatas is not None and len(metadatas) != len(texts):
            raise ValidationError("metadatas", f"{len(metadatas)} metadatas for {len(texts)} texts")
        if kwargs:
            raise ValidationError(next(iter(kwargs)), "not an option of add_texts")
        documents = [
            _checked_document(
                i,
                text,
                {} if metadatas is None else metadatas[i],
                ids[i] if ids is not None and ids[i] else str(uuid.uuid4()),
            )
            for i, text in enumerate(texts)
        ]
        self._check_writable()
        latest = {doc_id: (text, body) for doc_id, text, body in documents}  # last one wins
        with self._lock:
            held = self._sync()
            changed = [
                (doc_id, text, body)
                for doc_id, (text, body) in latest.items()
                if doc_id not in held or held[doc_id].body != body
            ]
            if not changed:
                return [doc_id for doc_id, _, _ in documents]
            vectors = self._embedding.embed_documents([text for _, text, _ in changed])
            written: dict[str, _Held] = {}
            with self._memory.batch():
                for (doc_id, _, body), vector in zip(changed, vectors, strict=True):
                    record = self._memory.create_record(
                        self._record(doc_id, body),
                        actor=ACTOR,
                        rationale="document added",
                        embedding=vector,
                        resolve=False,  # a document is its own record, whatever it says
                    )
                    old = held.get(doc_id)
                    if old is not None:
                        self._memory.retract(
                            old.record_id, ACTOR, f"document revised: superseded by {record.id}"
                        )
                        self._memory.add_relation(
                            record.id, "supersedes", old.record_id, actor=ACTOR
                        )
                    written[doc_id] = _Held(record.id, body)
            self._wrote(held, written, ())
        return [doc_id for doc_id, _, _ in documents]

    def delete(self, ids: Sequence[str] | None = None, **kwargs: Any) -> bool | None:
        """Retract the documents with these ids (every document of this scope for None);
        ids not held are ignored. Their records stay in history and ``as_of`` reads."""
        if kwargs:
            raise ValidationError(next(iter(kwargs)), "not an option of delete")
        if ids is not None and (
            isinstance(ids, str) or not all(isinstance(doc_id, str) for doc_id in ids)
        ):
            raise ValidationError("ids", "must be a list of strings")
        self._check_writable()
        with self._lock:
            held = self._sync()
            gone = [doc_id for doc_id in dict.fromkeys(held if ids is None else ids)]
            gone = [doc_id for doc_id in gone if doc_id in held]
            if gone:
                with self._memory.batch():
                    for doc_id in gone:
                        self._memory.retract(held[doc_id].record_id, ACTOR, "document deleted")
            self._wrote(held, {}, gone)
        return True

    # --- reads ----------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents held under these ids (missing ones left out), in the order asked."""
        if isinstance(ids, str) or not all(isinstance(doc_id, str) for doc_id in ids):
            raise ValidationError("ids", "must be a list of strings")
        with self._lock:
            held = self._sync()
            found = [held[doc_id].record_id for doc_id in dict.fromkeys(ids) if doc_id in held]
        documents = []
        for record_id in found:
            record = self._memory.retrieve_by_id(record_id, trust=self._trust, as_of=self._as_of)
            documents.append(_to_document(record))
        return documents

    def similarity_search(
        self, query: str, k: int = 4, filter: SearchFilter | None = None, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` records most similar to ``query`` that the trust context may read."""
        return self.similarity_search_by_vector(
            self._embedding.embed_query(query), k, filter=filter, **kwargs
        )

    def similarity_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: SearchFilter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        return [doc for doc, _ in self._search(embedding, k, filter, kwargs, explain=False)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: SearchFilter | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """As :meth:`similarity_search`, with each record's cosine similarity to the query."""
        vector = self._embedding.embed_query(query)
        return self._search(vector, k, filter, kwargs, explain=True)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # [-1, 1] onto LangChain's [0, 1]; float32 cosines of equal vectors reach 1.00002.
        return lambda cosine: min(1.0, max(0.0, (cosine + 1.0) / 2.0))

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> MembraneVectorStore:
        """A store holding ``texts``: in ``memory=`` (a Membrane) if given, else in a durable
        store at ``path=``, else in memory only. Other options: those of the constructor."""
        memory = kwargs.pop("memory", None)
        path = kwargs.pop("path", None)
        if memory is not None:
            store = cls(memory, embedding, **kwargs)
        elif path is not None:
            store = cls.open(path, embedding, **kwargs)
        else:
            engine = Membrane.in_memory(embedder=LangChainEmbedder(embedding))
            store = cls(engine, embedding, **kwargs)
            store._owned = True
        store.add_texts(texts, metadatas, ids=ids)
        return store

    # --- helpers --------------------------------------------------------------------------

    def _search(
        self,
        vector: Sequence[float],
        k: int,
        filter: SearchFilter | None,
        options: Mapping[str, Any],
        *,
        explain: bool,
    ) -> list[tuple[Document, float]]:
        if options:
            raise ValidationError(next(iter(options)), "not a search option")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValidationError("k", f"must be a whole number >= 0, not {k!r}")
        trust, types, keep = self._plan(filter)
        if k == 0 or trust is None:
            return []
        wanted = _asked(k if keep is None else k * _FETCH_GROWTH)
        while True:
            result = self._memory.retrieve(
                trust=trust,
                memory_types=types,
                limit=wanted,
                query_embedding=list(vector),
                as_of=self._as_of,
                explain=explain,
            )
            similarities = [
                why.vector_similarity for why in getattr(result, "explanations", [])
            ] or [None] * len(result.records)
            hits: list[tuple[Document, float]] = []
            for record, similarity in zip(result.records, similarities, strict=True):
                if record.payload is None:  # a redacted copy: nothing to show
                    continue
                document = _to_document(record)
                if keep is None or keep(record, document):
                    hits.append((document, 0.0 if similarity is None else float(similarity)))
            if len(hits) >= k or wanted == 0 or len(result.records) < wanted:
                return hits[:k]
            wanted = _asked(wanted * _FETCH_GROWTH)

    def _plan(
        self, filter: SearchFilter | None
    ) -> tuple[
        TrustContext | None,
        list[str] | None,
        Callable[[MemoryRecord, Document], bool] | None,
    ]:
        """The trust and memory types a filtered search asks the engine for, and the test
        each record it returns must pass (None: every one does). Trust None: nothing can
        match (the filter names only scopes the caller may not read)."""
        if filter is None:
            return self._trust, None, None
        if callable(filter):
            test = filter
            return self._trust, None, lambda _, document: bool(test(document))
        if not isinstance(filter, Mapping):
            raise ValidationError("filter", "must be a dict or a callable over documents")
        trust: TrustContext | None = self._trust
        scopes = _names("filter.scope", filter.get("scope"))
        types = _names("filter.type", filter.get("type"))
        tags = _names("filter.tags", filter.get("tags"))
        if types is not None:
            known = {kind.value for kind in MemoryType}
            for kind in types:
                if kind not in known:
                    raise ValidationError("filter.type", f"{kind!r} is not a memory type")
        if scopes is not None:
            allowed = [s for s in scopes if not self._trust.scopes or s in self._trust.scopes]
            admitted = [s for s in allowed if s]  # "" asks for unscoped records
            trust = (
                None
                if not allowed
                else msgspec.structs.replace(self._trust, scopes=admitted or self._trust.scopes)
            )
        metadata = {key: value for key, value in filter.items() if key not in _FILTER_KEYS}

        def keep(record: MemoryRecord, document: Document) -> bool:
            return (
                (scopes is None or record.scope in scopes)
                and (tags is None or all(tag in record.tags for tag in tags))
                and all(
                    key in document.metadata and document.metadata[key] == value
                    for key, value in metadata.items()
                )
            )

        return trust, types, keep

    def _documents(self, *, include_retracted: bool = False) -> list[MemoryRecord]:
        """The records holding documents of this scope the trust context may read."""
        trust = self._trust
        if self._scope:
            trust = msgspec.structs.replace(trust, scopes=[self._scope])
        result = self._memory.retrieve(
            trust=trust,
            memory_types=[MemoryType.SEMANTIC.value],
            as_of=self._as_of,
            include_retracted=include_retracted,
        )
        records = [
            record
            for record in result.records
            if record.scope == self._scope and _document_id(record) is not None
        ]
        return sorted(records, key=_creation)

    def _sync(self) -> dict[str, _Held]:
        """The document ids held now (and their records): read again from the store when
        anything was written since they were last read, except by this store itself.

        Only writes and ``get_by_ids`` need them (a search reads the engine directly), so a
        store that other code writes to meanwhile pays one read of its documents at its next
        write, not at every search."""
        # Waiting for position 0 returns at once, once the views have caught up with the
        # log: writes other processes made to the same store count as well.
        self._memory.wait_for_position(0)
        position = self._memory.position
        if self._held is None or position != self._seen:
            held: dict[str, _Held] = {}
            for record in self._documents():  # oldest first: a later revision wins
                assert isinstance(record.payload, SemanticPayload)
                held[str(record.payload.subject)] = _Held(
                    record.id, _body_of(record.payload.object)
                )
            self._held, self._seen = held, self._memory.position
        return self._held

    def _wrote(
        self, held: dict[str, _Held], written: dict[str, _Held], gone: Iterable[str]
    ) -> None:
        """Bring the held ids up to date with this store's own write."""
        for doc_id in gone:
            held.pop(doc_id, None)
        held.update(written)
        self._seen = self._memory.position

    def _check_writable(self) -> None:
        if self._as_of is not None:
            raise ReadOnlyError("a store read as of a past moment cannot be written")

    def _record(self, doc_id: str, body: bytes) -> dict[str, Any]:
        return {
            "type": MemoryType.SEMANTIC.value,
            "scope": self._scope,
            "sensitivity": self._sensitivity,
            "tags": self._tags,
            "payload": {
                "kind": MemoryType.SEMANTIC.value,
                "subject": doc_id,
                "predicate": DOCUMENT,
                "object": msgspec.json.decode(body),
            },
            "provenance": {"sources": [{"kind": "artifact", "ref": f"langchain:{doc_id}"}]},
            "lifecycle": {"pinned": self._pinned},
        }


def _checked_document(
    i: int, text: object, metadata: object, doc_id: object
) -> tuple[str, str, bytes]:
    """(id, text, the object stored) for one document; bad input names its field."""
    if not isinstance(text, str):
        raise ValidationError(f"texts[{i}]", f"must be a string, not {type(text).__name__}")
    if not isinstance(doc_id, str):
        raise ValidationError(f"ids[{i}]", f"must be a string, not {type(doc_id).__name__}")
    if not isinstance(metadata, dict) or not all(isinstance(key, str) for key in metadata):
        raise ValidationError(f"metadatas[{i}]", "must be a dict with string keys")
    stored = {"page_content": text, "metadata": metadata}
    try:
        body = msgspec.json.encode(stored)
    except (TypeError, msgspec.EncodeError) as error:
        raise ValidationError(f"metadatas[{i}]", f"must be JSON values: {error}") from None
    if msgspec.json.decode(body) != stored:  # a datetime, a tuple: would read back changed
        raise ValidationError(
            f"metadatas[{i}]", "must be JSON values (str, number, bool, None, list, dict)"
        )
    return doc_id, text, body


def _creation(record: MemoryRecord) -> tuple[datetime, str]:
    return (record.created_at or datetime.min.replace(tzinfo=UTC), record.id)


def _body_of(value: Any) -> bytes:
    return msgspec.json.encode(value)


def _document_id(record: MemoryRecord) -> str | None:
    payload = record.payload
    if (
        isinstance(payload, SemanticPayload)
        and payload.predicate == DOCUMENT
        and isinstance(payload.object, dict)
        and isinstance(payload.object.get("page_content"), str)
    ):
        return str(payload.subject)
    return None


def _to_document(record: MemoryRecord) -> Document:
    """A record as a LangChain document: a document written here as it was given; any
    other record as its text, with where it comes from as metadata."""
    doc_id = _document_id(record)
    if doc_id is not None:
        assert isinstance(record.payload, SemanticPayload)
        stored = record.payload.object
        return Document(
            id=doc_id, page_content=stored["page_content"], metadata=dict(stored["metadata"])
        )
    return Document(
        id=record.id,
        page_content=record_words(record),
        metadata={
            "record_id": record.id,
            "type": str(record.type),
            "scope": record.scope,
            "tags": list(record.tags),
            "sensitivity": str(record.sensitivity),
        },
    )


def record_words(record: MemoryRecord) -> str:
    """What a record says, in words, for a reader (a LangChain document's page content)."""
    payload = record.payload
    parts: list[str]
    if isinstance(payload, SemanticPayload):
        parts = [str(payload.subject), str(payload.predicate), _words(payload.object)]
    elif isinstance(payload, EpisodicPayload):
        parts = [event.summary for event in payload.timeline]
        if payload.environment is not None and not any(parts):
            parts = [_words(payload.environment.context.get("capture_content"))]
    elif isinstance(payload, WorkingPayload):
        parts = [payload.context_summary, *payload.next_actions, *payload.open_questions]
    elif isinstance(payload, CompetencePayload):
        parts = [payload.skill_name, *(step.step for step in payload.recipe)]
    elif isinstance(payload, PlanGraphPayload):
        parts = [payload.intent]
    elif isinstance(payload, EntityPayload):
        parts = [payload.canonical_name, payload.summary]
    else:
        parts = []
    return " ".join(part for part in parts if part)


def _words(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def _names(field: str, value: object) -> list[str] | None:
    """A filter's value for ``scope``, ``type`` or ``tags``: one string or a list of them."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(name, str) for name in value):
        return list(value)
    raise ValidationError(field, "must be a string or a list of strings")

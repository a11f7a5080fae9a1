"""LangChain: a ``VectorStore`` (and so a retriever, ``as_retriever()``) over membrane_es records.

A document is a semantic record: its id as the subject, :data:`DOCUMENT` as the predicate, and
``{"page_content", "metadata"}`` as the object, with the vector the caller's LangChain
``Embeddings`` made of its page content. Adding a document under an id it already holds is a
revision (the old record superseded by the new one, in one write); deleting retracts.

Many stores may share one engine, from many threads and processes. Each applies what the
log gained since it last looked before a read or a write (only the records the new events
touched, :mod:`membrane_es.integrations._following`), so it sees every write acknowledged
before the call; a write names the record it replaces and gives the new one an id made from
it, so two writers of one id collide in the engine and the loser writes again on top of the
winner: an id never holds two live documents. Nothing is overwritten, so
:meth:`MembraneVectorStore.history` lists every revision and
:meth:`MembraneVectorStore.as_of` reads the store as it was.

Search covers the store's own scope, as a collection of another vector store is its own
world; ``all_scopes=True`` (or a filter naming scopes) widens it to every scope the trust
context admits. Every record there is found, not only documents written here: a captured
turn, a fact or a skill comes back as a document too (its text as page content,
``record_id``, ``type``, ``scope``, ``tags`` and ``sensitivity`` as metadata). A ``filter``
is a callable over documents, or a dict mapping ``scope``, ``type`` and ``tags`` onto the
engine's scopes, memory types and tags, and any other key onto the metadata, with Chroma's
operators (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``, ``$nin``,
``$and``, ``$or``: :mod:`membrane_es.integrations._filters`). Results are ranked by cosine
similarity, best first, whatever its sign; :meth:`MembraneVectorStore.max_marginal_relevance_search`
re-ranks them for diversity.

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
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from membrane_es import (
    MAX_RESULTS,
    AlreadyExistsError,
    CompetencePayload,
    EntityPayload,
    EpisodicPayload,
    ExplainedRetrieveResult,
    HistoryEntry,
    Membrane,
    MembraneError,
    MemoryRecord,
    MemoryType,
    PlanGraphPayload,
    ReadOnlyError,
    SemanticPayload,
    TrustContext,
    ValidationError,
    WorkingPayload,
)
from membrane_es.integrations._filters import check_condition, holds
from membrane_es.integrations._following import (
    changes_since,
    first_id,
    retrying,
    successor_id,
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
    :param all_scopes: search every scope the trust context admits, not only ``scope``.
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
        all_scopes: bool = False,
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
        self._all_scopes = bool(all_scopes)
        self._as_of = as_of
        self._owned = False
        self._lock = threading.RLock()
        self._held: dict[str, _Held] | None = None
        self._doc_of: dict[str, str] = {}  # the document id of each held record
        self._last: dict[str, str] = {}  # a deleted id's last record (what follows it)
        self._seen: int | None = None  # the log position the held ids reflect
        self._pending: list[str] = []  # the ids the write under way writes

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
            all_scopes=self._all_scopes,
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
        # Options LangChain passes on (``batch_size`` from ``index``, ...) mean nothing here:
        # every call is one atomic write.
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
            wanted = [
                (doc_id, text, body)
                for doc_id, (text, body) in latest.items()
                if doc_id not in held or held[doc_id].body != body
            ]
            if wanted:
                # Embedded once, outside any retry: a race lost changes what is replaced,
                # never what is written.
                vectors = dict(
                    zip(
                        [doc_id for doc_id, _, _ in wanted],
                        self._embedding.embed_documents([text for _, text, _ in wanted]),
                        strict=True,
                    )
                )
                retrying(lambda: self._add(latest, vectors), self._lost_race)
        return [doc_id for doc_id, _, _ in documents]

    def _add(self, latest: dict[str, tuple[str, bytes]], vectors: dict[str, list[float]]) -> None:
        held = self._sync()
        changed = [
            (doc_id, body)
            for doc_id, (_, body) in latest.items()
            if doc_id not in held or held[doc_id].body != body
        ]
        if not changed:
            return  # what a concurrent writer left is already this
        self._pending = [doc_id for doc_id, _ in changed]
        with self._memory.batch():
            for doc_id, body in changed:
                vector = vectors.get(doc_id)
                if vector is None:  # written meanwhile with this body, then changed again
                    vector = self._embedding.embed_documents([_text_of(body)])[0]
                old = held.get(doc_id)
                if old is None:
                    last = self._last.get(doc_id)
                    record_id = (
                        first_id("langchain", self._scope, doc_id)
                        if last is None
                        else successor_id(last)
                    )
                    self._memory.create_record(
                        self._record(record_id, doc_id, body),
                        actor=ACTOR,
                        rationale="document added",
                        embedding=vector,
                        resolve=False,  # a document is its own record, whatever it says
                    )
                else:
                    self._memory.supersede(
                        old.record_id,
                        self._record(successor_id(old.record_id), doc_id, body),
                        ACTOR,
                        "document revised",
                        embedding=vector,
                    )
        self._sync()

    def _lost_race(self, error: Exception) -> None:
        """Another writer got there first: follow the log to what it wrote; a record id
        already taken for an id this store thought deleted sends it to the id's history."""
        held = self._sync()
        if isinstance(error, AlreadyExistsError):
            for doc_id in self._pending:
                if doc_id not in held:
                    self._last.pop(doc_id, None)
                    revisions = [
                        r
                        for r in self._documents(include_retracted=True)
                        if _document_id(r) == doc_id
                    ]
                    if revisions:
                        self._last[doc_id] = revisions[-1].id

    def delete(self, ids: Sequence[str] | None = None, **kwargs: Any) -> bool | None:
        """Retract the documents with these ids (every document of this scope for None);
        ids not held are ignored. Their records stay in history and ``as_of`` reads."""
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
                self._sync()
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
        return [doc for doc, _ in self._search(embedding, k, filter, kwargs)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: SearchFilter | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """As :meth:`similarity_search`, with each record's cosine similarity to the query."""
        vector = self._embedding.embed_query(query)
        return self._search(vector, k, filter, kwargs)

    def similarity_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: SearchFilter | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """As :meth:`similarity_search_with_score`, for a query's vector."""
        return self._search(embedding, k, filter, kwargs)

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: SearchFilter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """The ``k`` documents, of the ``fetch_k`` most similar to ``query``, that are both
        relevant and unlike each other (maximal marginal relevance; ``lambda_mult`` 1: only
        relevance, 0: only diversity)."""
        return self.max_marginal_relevance_search_by_vector(
            self._embedding.embed_query(query), k, fetch_k, lambda_mult, filter=filter, **kwargs
        )

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: SearchFilter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """As :meth:`max_marginal_relevance_search`, for a query's vector. The candidates'
        page contents are embedded again to compare them with each other (the engine keeps
        its vectors at half precision, for ranking)."""
        if isinstance(fetch_k, bool) or not isinstance(fetch_k, int) or fetch_k < 0:
            raise ValidationError("fetch_k", f"must be a whole number >= 0, not {fetch_k!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValidationError("k", f"must be a whole number >= 0, not {k!r}")
        if isinstance(lambda_mult, bool) or not isinstance(lambda_mult, int | float):
            raise ValidationError("lambda_mult", f"must be a number, not {lambda_mult!r}")
        if not 0.0 <= lambda_mult <= 1.0:
            raise ValidationError("lambda_mult", f"must be between 0 and 1, not {lambda_mult!r}")
        hits = self._search(embedding, max(fetch_k, k), filter, kwargs)
        if not hits or k == 0:
            return []
        vectors = self._embedding.embed_documents([document.page_content for document, _ in hits])
        chosen = maximal_marginal_relevance(
            np.asarray(embedding, dtype=np.float32),
            [list(vector) for vector in vectors],
            lambda_mult=float(lambda_mult),
            k=min(k, len(hits)),
        )
        return [hits[i][0] for i in chosen]

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
    ) -> list[tuple[Document, float]]:
        if options:
            raise ValidationError(next(iter(options)), "not a search option")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValidationError("k", f"must be a whole number >= 0, not {k!r}")
        trust, types, keep = self._plan(filter)
        if k == 0 or trust is None:
            return []
        asked = _asked(k if keep is None else k * _FETCH_GROWTH)
        while True:
            result = self._memory.retrieve(
                trust=trust,
                memory_types=types,
                limit=asked,
                query_embedding=list(vector),
                as_of=self._as_of,
                explain=True,
            )
            assert isinstance(result, ExplainedRetrieveResult)
            similarity = {why.record_id: why.vector_similarity for why in result.explanations}
            hits: list[tuple[Document, float | None]] = []
            for record in result.records:
                if record.payload is None:  # a redacted copy: nothing to show
                    continue
                document = _to_document(record)
                if keep is None or keep(record, document):
                    hits.append((document, similarity.get(record.id)))
            if asked == 0 or len(result.records) < asked:
                break  # every candidate
            if len(hits) >= k:
                # The engine ranks positive similarities exactly, the rest by salience and
                # age: below zero, only every candidate says which are closest.
                last = hits[k - 1][1]
                if last is not None and last > 0:
                    break
                asked = 0
            else:
                asked = _asked(asked * _FETCH_GROWTH)
        # Stable: the engine's order stands among equal similarities; no vector goes last.
        hits.sort(key=lambda hit: -hit[1] if hit[1] is not None else float("inf"))
        return [(document, 0.0 if score is None else float(score)) for document, score in hits[:k]]

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
        if filter is None and self._all_scopes:
            return self._trust, None, None
        if filter is None:
            filter = {}
        if callable(filter):
            test = filter
            return self._within(lambda _, document: bool(test(document)))
        if not isinstance(filter, Mapping):
            raise ValidationError("filter", "must be a dict or a callable over documents")
        trust: TrustContext | None = self._trust
        scopes = _names("filter.scope", filter.get("scope"))
        if scopes is None and not self._all_scopes:
            scopes = [self._scope]  # the store's own scope unless widened
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
        check_condition(metadata)

        def keep(record: MemoryRecord, document: Document) -> bool:
            return (
                (scopes is None or record.scope in scopes)
                and (tags is None or all(tag in record.tags for tag in tags))
                and holds(document.metadata, metadata)
            )

        return trust, types, keep

    def _within(
        self, test: Callable[[MemoryRecord, Document], bool]
    ) -> tuple[TrustContext | None, list[str] | None, Callable[[MemoryRecord, Document], bool]]:
        """The plan of a callable filter: the store's scope (unless widened), then ``test``."""
        trust, types, keep = self._plan({})
        assert keep is not None
        return (
            trust,
            types,
            lambda record, document: keep(record, document) and test(record, document),
        )

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
        """The document ids held now (and their records), after applying what the log
        gained since they were last read (every write acknowledged before now, by anyone):
        only the records its new events touched are read."""
        if self._as_of is not None and self._held is not None:
            return self._held  # the past does not move
        changes = None if self._held is None else changes_since(self._memory, self._seen)
        if changes is None or self._held is None:
            self._seen = self._memory.position
            held: dict[str, _Held] = {}
            for record in self._documents():  # oldest first: a later revision wins
                assert isinstance(record.payload, SemanticPayload)
                held[str(record.payload.subject)] = _Held(
                    record.id, _body_of(record.payload.object)
                )
            self._held = held
            self._doc_of = {kept.record_id: doc_id for doc_id, kept in held.items()}
            self._last = {}
            if self._as_of is not None:
                return held
            return self._sync()  # and what came while they were read
        held = self._held
        for change in changes.records:
            doc_id = self._doc_of.get(change.record_id)
            if not change.active:
                if doc_id is not None:
                    del held[doc_id], self._doc_of[change.record_id]
                    self._last[doc_id] = change.record_id
                continue
            if doc_id is not None:
                continue  # held already
            try:
                record = self._memory.retrieve_by_id(change.record_id, trust=self._trust)
            except MembraneError:  # not this reader's to read, or forgotten meanwhile
                continue
            doc_id = _document_id(record)
            if doc_id is None or record.scope != self._scope:
                continue
            assert isinstance(record.payload, SemanticPayload)
            previous = held.get(doc_id)
            if previous is not None:
                del self._doc_of[previous.record_id]
            held[doc_id] = _Held(record.id, _body_of(record.payload.object))
            self._doc_of[record.id] = doc_id
            self._last.pop(doc_id, None)
        self._seen = changes.position
        return held

    def _check_writable(self) -> None:
        if self._as_of is not None:
            raise ReadOnlyError("a store read as of a past moment cannot be written")

    def _record(self, record_id: str, doc_id: str, body: bytes) -> dict[str, Any]:
        return {
            "id": record_id,
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


def _text_of(body: bytes) -> str:
    text: str = msgspec.json.decode(body)["page_content"]
    return text


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

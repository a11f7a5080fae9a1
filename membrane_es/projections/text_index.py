"""The text index: BM25 over each record's search text (SQLite FTS5, Porter stemming).

Append-only like the content it indexes. Documents and queries go through one tokenizer,
FTS5's own (:mod:`membrane_es.projections.tokens`). Queries are natural language: their
stop words are dropped and the rest OR-ed, because FTS5's implicit AND of every word of a
question matches almost nothing (notes/retrieval.md).

FTS5's own ``bm25()`` weighs terms by statistics of the whole index, so a record written
later changes the scores of older ones. For answers "as of" a moment, :meth:`TextIndex.postings`
and :meth:`TextIndex.corpus` give the raw statistics (term occurrences per row, document
lengths, document count) restricted to the rows that existed then; rows are table rows, in
log order, so "existed at T" is "row below the table size at T".

A conversation turn is searched as if its document went on with the turns it was said after
(:mod:`membrane_es.projections.said_after`): :meth:`TextIndex.postings`, :meth:`TextIndex.lengths`
and :meth:`TextIndex.corpus` count their words for it. :meth:`TextIndex.search` (FTS5's own
ranking of the documents alone) does not.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from membrane_es.projections.folding import fold
from membrane_es.projections.said_after import WEIGHT, SaidAfter, share
from membrane_es.projections.tokens import STOP_TERMS, TOKENIZER, query_terms, stem, tokens

Array = npt.NDArray[Any]

_JSON = msgspec.json.Encoder()
_SAID_AFTER = "said_after"  # the table a saved index keeps its turns' links in
_LENGTHS = "doc_lengths"  # the table a saved index keeps its documents' lengths in, as one blob
# Documents added one write at a time are held and indexed together, in one transaction, when
# this many are waiting or before anything reads the index: FTS5 then writes one segment for
# them all, where a statement per document costs about five times as much each (a segment
# per document, merged again later).
HELD_DOCUMENTS = 256


class TextIndex:
    """The index, held in an in-memory SQLite database made on first use: an index loaded
    from a checkpoint (:meth:`load`) is kept as the saved file's bytes until something
    reads or changes it, so a store opened for a request that never searches text (the
    entries API answers from its own view) pays nothing for it."""

    def __init__(self) -> None:
        self._conn: sqlite3.Connection | None = None
        # A saved index (the bytes of its file) not read into the database yet.
        self._saved: bytes | None = None
        self._connect_lock = threading.Lock()
        self._closed = False
        # (lengths version, below, documents, tokens) of the last corpus(); the version
        # counts writes to the lengths, so a memo taken before one is never used after it.
        self._corpus_memo: tuple[int, int, int, float] | None = None
        self._lengths_version = 0
        # Tokens in each row's document; -1 for rows without one.
        self._lengths_array = np.full(1024, -1, dtype=np.int32)
        self._said_after = SaidAfter()
        # Documents added but not indexed yet (folded), in row order: every read of the index
        # indexes them first (:meth:`index_held`), so no reader can tell they were held.
        self._held: list[tuple[int, str]] = []
        self._held_lock = threading.RLock()

    # --- the database, made (or read from a checkpoint) on first use ------------------------

    @property
    def _db(self) -> sqlite3.Connection:
        conn = self._conn
        return conn if conn is not None else self._connect()

    @property
    def _lengths(self) -> npt.NDArray[np.int32]:
        if self._conn is None:
            self._connect()
        return self._lengths_array

    @_lengths.setter
    def _lengths(self, value: npt.NDArray[np.int32]) -> None:
        self._lengths_array = value

    @property
    def said_after(self) -> SaidAfter:
        """The turns each conversation turn was said after."""
        if self._conn is None:
            self._connect()
        return self._said_after

    def _connect(self) -> sqlite3.Connection:
        with self._connect_lock:
            if self._conn is not None:
                return self._conn
            if self._closed:
                raise sqlite3.ProgrammingError("the text index is closed")
            # Autocommit: no transaction is ever left open, so a backup can always proceed.
            db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            try:
                if self._saved is None:
                    self._create(db)
                else:
                    self._read_saved(db, self._saved)
                # Helper in the temp schema (never part of a saved index): every term
                # occurrence.
                db.execute(
                    "CREATE VIRTUAL TABLE temp.doc_terms USING fts5vocab(main, docs, instance)"
                )
            except BaseException:
                db.close()
                raise
            self._saved = None
            self._conn = db
            return db

    @staticmethod
    def _create(db: sqlite3.Connection) -> None:
        # Deleted documents (erasure) are overwritten, so no saved copy of the index holds them.
        db.execute("PRAGMA secure_delete = ON")
        db.execute(
            f'CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(body, tokenize="{TOKENIZER}")'
        )

    def _read_saved(self, db: sqlite3.Connection, saved: bytes) -> None:
        """Read an index :meth:`save` wrote into ``db``: its documents, every row's length
        and the turns' links, the last two moved out of the database into memory."""
        db.deserialize(saved)
        db.execute("PRAGMA secure_delete = ON")
        (lengths,) = db.execute(f"SELECT data FROM {_LENGTHS}").fetchone()
        self._lengths_array = np.frombuffer(lengths, dtype="<i4").astype(np.int32)  # a copy
        self._lengths_version += 1
        db.execute(f"DROP TABLE {_LENGTHS}")
        # Saved by :meth:`save` (absent from indexes saved before turns were linked).
        exists = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        if db.execute(exists, (_SAID_AFTER,)).fetchone():
            pairs = db.execute(f"SELECT turn, earlier FROM {_SAID_AFTER} ORDER BY rowid")
            turn, earlier = np.array(pairs.fetchall(), dtype=np.int64).reshape(-1, 2).T
            self._said_after.load(turn, earlier)
            db.execute(f"DROP TABLE {_SAID_AFTER}")
        else:
            self._said_after = SaidAfter()

    # --- writing ----------------------------------------------------------------------------

    def add(self, row: int, text: str) -> None:
        self.add_many([(row, text)])

    def add_many(self, documents: list[tuple[int, str]]) -> None:
        """Index each ``(row, text)`` of rows not indexed yet (blank texts are not indexed).

        A few documents (one write's) are held and indexed with the next ones, at the latest
        before the index is next read; many are indexed at once, in one transaction."""
        documents = [(row, fold(text)) for row, text in documents if text.strip()]
        if not documents:
            return
        with self._held_lock:
            self._held.extend(documents)
            if len(self._held) >= HELD_DOCUMENTS:
                self.index_held()

    def index_held(self) -> None:
        """Index the documents held by :meth:`add_many`, in one transaction."""
        with self._held_lock:
            documents, self._held = self._held, []
            if documents:
                self._insert_now(documents)

    def _insert_now(self, documents: list[tuple[int, str]]) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            db.executemany("INSERT INTO docs(rowid, body) VALUES (?, ?)", documents)
            sizes = db.execute(
                "SELECT id, sz FROM docs_docsize WHERE id BETWEEN ? AND ?",
                (min(row for row, _ in documents), max(row for row, _ in documents)),
            ).fetchall()
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        rows = np.array([row for row, _ in sizes], dtype=np.int64)
        self._reserve(int(rows.max()))
        self._lengths[rows] = [_varint(size) for _, size in sizes]
        self._lengths_version += 1

    def insert_many(self, documents: list[tuple[int, str]]) -> None:
        """Index ``(row, text)`` documents of rows not indexed yet, without noting their
        lengths (:meth:`note_lengths` does, once every insert is in).

        The documents go in as one statement over a JSON array, which SQLite runs from start
        to end without the GIL: on another thread, this leaves the caller's thread running
        Python the whole time (``executemany`` takes the GIL back for every row, and waits
        for it). JSON text cannot carry a NUL character, so documents with one are bound
        row by row."""
        self.index_held()
        documents = [(row, fold(text)) for row, text in documents if text.strip()]
        if any("\x00" in text for _, text in documents):
            self._db.execute("BEGIN")
            try:
                self._db.executemany("INSERT INTO docs(rowid, body) VALUES (?, ?)", documents)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        elif documents:
            self._db.execute(
                "INSERT INTO docs(rowid, body) SELECT value ->> 0, value ->> 1 FROM json_each(?)",
                (_JSON.encode(documents),),
            )

    def note_lengths(self, first: int, last: int) -> None:
        """Note the lengths of the documents of rows ``first`` to ``last`` (inclusive) that
        :meth:`insert_many` indexed."""
        self.index_held()
        sizes = self._db.execute(
            "SELECT id, sz FROM docs_docsize WHERE id BETWEEN ? AND ?", (first, last)
        ).fetchall()
        if sizes:
            rows = np.array([row for row, _ in sizes], dtype=np.int64)
            self._reserve(int(rows.max()))
            self._lengths[rows] = [_varint(size) for _, size in sizes]
            self._lengths_version += 1

    def link(self, links: list[tuple[int, list[int]]]) -> None:
        """Note the turns each ``(turn row, [earlier rows])`` was said after (turns ascending,
        after every turn noted before)."""
        if links:
            self.said_after.add(links)
            self._lengths_version += 1

    def delete(self, rows: list[int]) -> None:
        """Remove the documents of these rows for good (erasure): the rows, their terms in the
        index's segments (merged anew without them), and every page that held them zeroed."""
        if not rows:
            return
        with self._held_lock:  # a document held is dropped: it never reaches the index
            gone = set(rows)
            self._held = [document for document in self._held if document[0] not in gone]
        self.index_held()
        db = self._db
        db.execute("BEGIN")
        try:
            db.executemany("DELETE FROM docs WHERE rowid = ?", [(row,) for row in rows])
            db.execute("INSERT INTO docs(docs) VALUES ('optimize')")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        for row in rows:
            if row < len(self._lengths):
                self._lengths[row] = -1
        self.said_after.remove(rows)
        self._lengths_version += 1

    def _reserve(self, row: int) -> None:
        if row >= len(self._lengths):
            grown = np.full(max(2 * len(self._lengths), row + 1), -1, dtype=np.int32)
            grown[: len(self._lengths)] = self._lengths
            self._lengths = grown

    def postings(self, query: str, below: int) -> list[tuple[Array, Array]]:
        """For each distinct content term of ``query`` (tokenized as documents are): the rows
        under ``below`` whose document contains it, and how many times (a turn's document
        going on with the turns it was said after)."""
        return self.term_postings(query_terms(query), below)

    def term_postings(self, terms: list[str], below: int) -> list[tuple[Array, Array]]:
        """:meth:`postings` of terms already tokenized (:func:`~.tokens.query_terms`)."""
        return [(rows, counts) for rows, counts, _, _ in self.term_postings_with_own(terms, below)]

    def postings_with_own(self, query: str, below: int) -> list[tuple[Array, Array, Array, Array]]:
        """:meth:`postings`, each beside the rows and counts of documents alone (no turn
        counting the words of the turns it was said after)."""
        return self.term_postings_with_own(query_terms(query), below)

    def term_postings_with_own(
        self, terms: list[str], below: int
    ) -> list[tuple[Array, Array, Array, Array]]:
        """:meth:`postings_with_own` of terms already tokenized."""
        self.index_held()
        result = []
        for term, again in dict.fromkeys((term, stem(term)) for term in terms):
            # One string of every occurrence's row, counted here: several times faster
            # than a row per document, grouped by SQLite, through the Python API.
            (joined,) = self._db.execute(
                "SELECT group_concat(doc) FROM temp.doc_terms WHERE term IN (?, ?) AND doc < ?",
                (term, again, below),
            ).fetchone()
            if joined:
                rows, counts = np.unique(
                    np.fromstring(joined, dtype=np.int64, sep=","), return_counts=True
                )
                own = counts.astype(np.float64)
                result.append((*self._with_replies(rows, own, below), rows, own))
            else:
                empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
                result.append((*empty, *empty))
        return result

    def _with_replies(self, rows: Array, counts: Array, below: int) -> tuple[Array, Array]:
        """Postings of documents alone → postings of documents with the turns each was said
        after: every occurrence also counts for the replies below ``below`` to its row."""
        turns, places = self.said_after.replies(rows)
        if len(turns):
            keep = (turns < below) & (self.own_lengths(turns) >= 0)
            turns, places = turns[keep], places[keep]
        if not len(turns):
            return rows, counts
        merged, where = np.unique(np.concatenate([rows, turns]), return_inverse=True)
        lent = share(self.own_lengths(turns), self.own_lengths(rows[places]))
        weights = np.concatenate([counts, WEIGHT * lent * counts[places]])
        return merged, np.bincount(where, weights=weights, minlength=len(merged))

    def corpus(self, below: int) -> tuple[int, float]:
        """(documents, tokens in them — a turn's earlier turns' at their weight) among the rows
        under ``below``.

        The last answer is kept until the index changes (a pass over every row's length
        costs ms in a large store; reads between writes ask the same question)."""
        self.index_held()
        version = self._lengths_version  # read first: a write meanwhile makes the memo stale
        memo = self._corpus_memo
        if memo is not None and memo[0] == version and memo[1] == below:
            return memo[2], memo[3]
        lengths = self._lengths[: max(0, below)]
        present = lengths >= 0
        documents = int(present.sum())
        tokens = float(lengths[present].sum(dtype=np.int64))
        turns, earlier = self.said_after.below(below)
        if len(turns):
            own, said = self.own_lengths(turns), np.maximum(self.own_lengths(earlier), 0)
            tokens += WEIGHT * float((share(own, said) * said).sum())
        self._corpus_memo = (version, below, documents, tokens)
        return documents, tokens

    def lengths(self, rows: Array) -> Array:
        """Tokens in each row's document, with those of the turns it was said after at their
        weight (-1 for rows without a document)."""
        rows = np.asarray(rows, dtype=np.int64)
        self.index_held()
        out = self.own_lengths(rows).astype(np.float64)
        places, earlier = self.said_after.earlier_of(rows)
        if len(places):
            said = np.maximum(self.own_lengths(earlier), 0)
            lent = share(self.own_lengths(rows[places]), said) * said
            extra = WEIGHT * np.bincount(places, weights=lent, minlength=len(rows))
            out = np.where(out >= 0, out + extra, out)
        return out

    def own_lengths(self, rows: Array) -> Array:
        """Tokens in each row's own document (-1 for rows without one)."""
        self.index_held()
        rows = np.asarray(rows, dtype=np.int64)
        out = np.full(len(rows), -1, dtype=np.int64)
        known = rows < len(self._lengths)
        out[known] = self._lengths[rows[known]]
        return out

    def search(self, query: str, limit: int = 1000) -> tuple[Array, Array]:
        """(rows, BM25 score — higher is better) of the best ``limit`` matches."""
        self.index_held()
        # The query's own words, quoted: FTS5 tokenizes each as it did the documents.
        words = [w for w in fold(query).split() if set(tokens(w)) - STOP_TERMS]
        if not words:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        match = " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
        found = self._db.execute(
            "SELECT rowid, -bm25(docs) FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
            (match, limit),
        ).fetchall()
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        rows, scores = zip(*found, strict=True)
        return np.asarray(rows, dtype=np.int64), np.asarray(scores, dtype=np.float64)

    def save(self, path: Path) -> None:
        """The index, the turns each turn was said after (table ``said_after``) and every
        row's document length (table ``doc_lengths``: one blob of little-endian int32s, so a
        load takes them in one read rather than decoding FTS5's size of each document)."""
        self.index_held()
        target = sqlite3.connect(path)
        try:
            self._db.backup(target)
            with target:
                target.execute(f"CREATE TABLE {_SAID_AFTER} (turn INTEGER, earlier INTEGER)")
                pairs = zip(*(column.tolist() for column in self.said_after.pairs()), strict=True)
                target.executemany(f"INSERT INTO {_SAID_AFTER} VALUES (?, ?)", pairs)
                target.execute(f"CREATE TABLE {_LENGTHS} (data BLOB)")
                lengths = self._lengths.astype("<i4").tobytes()
                target.execute(f"INSERT INTO {_LENGTHS} VALUES (?)", (lengths,))
        finally:
            target.close()

    def load(self, path: Path) -> None:
        """Take the index :meth:`save` wrote to ``path`` in place of this one (empty, never
        used): its bytes are read now, into the database when it is first used."""
        saved = path.read_bytes()
        if not saved.startswith(b"SQLite format 3\x00"):
            raise ValueError(f"{path} is not a saved text index")
        with self._connect_lock:
            if self._conn is not None:
                raise RuntimeError("a text index is loaded before it is used")
            with self._held_lock:
                self._held = []  # replaced by the loaded index
            self._saved = saved

    def close(self) -> None:
        with self._connect_lock:
            self._saved = None
            self._closed = True
            if self._conn is not None:
                self._conn.close()


def _varint(blob: bytes) -> int:
    """The first SQLite varint in ``blob`` (FTS5 stores document sizes this way)."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value

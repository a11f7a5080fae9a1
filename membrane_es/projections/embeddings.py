"""The embedding matrix, partitioned by scope: float32, L2-normalised, in fixed-size chunks.

Rows of one scope are stored together, so a query limited to a few scopes multiplies only
their rows — at 5 % selectivity a per-scope block is far faster than masking a global matrix
(notes/vector-search.md). A query over every scope visits every block.

Each block is a list of chunks of :data:`CHUNK_ROWS` rows. Growth appends a chunk: nothing is
ever copied (doubling a matrix briefly holds both copies and leaves half of the new one
spare), and a chunk's unused tail is zero pages the process never touches.

Scores come from ``einsum`` over each chunk's written rows: it computes every row's dot
product the same way wherever the row sits and however many rows there are, so a similarity
read "as of" a moment equals, to the bit, the one computed at that moment, however many rows
were appended since. BLAS (sgemv) over fixed-shape chunks would be exact too, but measured
on these 2-core machines it was no faster (about 1.2–1.3× FAISS's one-thread scan either
way, docs/benchmarks.md): the scan is bound by memory bandwidth, a 1,024-row call is too
short for OpenBLAS's second thread to pay, and its spinning threads slow whatever the process
runs next; and it computes a partly filled chunk whole.

Once the index holds :data:`CODED_MIN_ROWS` vectors, every block also keeps each vector's
sign code (one bit per dimension: 48 bytes for 384 dimensions, a 32nd of the vector), in
column-major chunks of :data:`CODE_CHUNK_ROWS` rows. Hamming distance between codes tracks
the angle between vectors, so a query can shortlist its nearest rows from the codes at a
small fraction of the memory traffic of a full scan and compute exact scores for the
shortlist only (:mod:`membrane_es.queries.vectors`). Codes are a function of the vector
alone: a row's code, like its score, never depends on when or in what batch it was added.

Restored from a checkpoint, the index knows each block's rows at once but reads a block's
vectors (from the log, :mod:`membrane_es.projections.block_vectors`) only when a search
first visits it (:meth:`EmbeddingIndex.restore_later`): opening a large store to read a
record, list, write or checkpoint reads no vector, and a scoped search reads its scopes'
blocks alone. Vectors added or erased meanwhile are noted and applied, in order, once their
block is read, so the index ends as if it had been read at once. Where the checkpoint kept
the blocks' sign codes, a search that shortlists by codes does not wait for that read: it
scans a stand-in holding the rows and codes and reads only its picks' vectors
(:mod:`membrane_es.projections.coded_blocks`).

Kept on request (:meth:`EmbeddingIndex.keep_approximate`), an approximate index over every
vector (:mod:`membrane_es.projections.approximate`) follows the blocks from its threshold on;
when it is built and how it follows them is :mod:`membrane_es.projections.approximate_keeper`.
Blocks a checkpoint left in the log are read back behind a read that needs them all
(:mod:`membrane_es.projections.vector_read_back`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.approximate import ApproximateIndex
from membrane_es.projections.approximate_keeper import ApproximateKeeper
from membrane_es.projections.row_places import RowPlaces
from membrane_es.projections.vector_read_back import start_read_back

Array = npt.NDArray[Any]
StandIn = Callable[[Array, Array], "Block"]  # a stand-in block searched by (rows, codes)

CHUNK_ROWS = 1024  # 1.5 MB of 384-dimension vectors: few calls per scan, little spare
CODE_CHUNK_ROWS = 16_384  # 768 kB of 384-bit codes: few numpy calls per scan, stays in cache
CODED_MIN_ROWS = 16_384  # about where a shortlist starts to beat an exact scan and admission
FEW_ROWS = 32  # vectors gathered one by one rather than chunk by chunk


def code_words(dimensions: int) -> int:
    """64-bit words in one vector's sign code."""
    return -(-dimensions // 64)


def sign_codes(vectors: Array) -> Array:
    """Each vector's sign code, column-major: ``(code_words, len(vectors))`` uint64, bit ``d``
    of a code set when dimension ``d`` is positive (unused trailing bits 0)."""
    vectors = np.atleast_2d(vectors)
    words = code_words(vectors.shape[1])
    bits = np.packbits(vectors > 0, axis=1, bitorder="little")
    padded = np.zeros((len(vectors), words * 8), dtype=np.uint8)
    padded[:, : bits.shape[1]] = bits
    return np.ascontiguousarray(padded.view(np.uint64).T)


class Block:
    """The vectors of one scope and the table rows they belong to (ascending: appended in
    log order)."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.chunks: list[Array] = []  # (CHUNK_ROWS, dimensions) float32 each
        self.row_chunks: list[Array] = []  # (CHUNK_ROWS,) int64 each
        self.code_chunks: list[Array] | None = None  # (code_words, CODE_CHUNK_ROWS) uint64
        self.size = 0
        # Every row in one array (capacity doubling), filled from the chunks when a lookup
        # asks (:meth:`flat_rows`): finding rows' places costs no copy of the block's rows.
        self._flat = np.zeros(0, dtype=np.int64)
        self._flat_size = 0
        self._flat_lock = threading.Lock()

    @classmethod
    def of(cls, dimensions: int, rows: Array, matrix: Array) -> Block:
        """A block holding these rows and vectors (from a checkpoint)."""
        block = cls(dimensions)
        for first in range(0, len(rows), CHUNK_ROWS):
            chunk, row_chunk = block._new_chunk()
            last = min(len(rows), first + CHUNK_ROWS)
            chunk[: last - first] = matrix[first:last]
            row_chunk[: last - first] = rows[first:last]
        block.size = len(rows)
        return block

    def append(self, row: int, vector: Array) -> None:
        chunk, offset = divmod(self.size, CHUNK_ROWS)
        if chunk == len(self.chunks):
            self._new_chunk()
        self.chunks[chunk][offset] = vector
        self.row_chunks[chunk][offset] = row
        if self.code_chunks is not None:
            self._write_codes(self.size, sign_codes(self.chunks[chunk][offset : offset + 1]))
        self.size += 1

    def extend(self, rows: Array, vectors: Array) -> None:
        """Append many rows at once (the same as appending them one by one)."""
        done = 0
        while done < len(rows):
            chunk, offset = divmod(self.size, CHUNK_ROWS)
            if chunk == len(self.chunks):
                self._new_chunk()
            take = min(CHUNK_ROWS - offset, len(rows) - done)
            self.chunks[chunk][offset : offset + take] = vectors[done : done + take]
            self.row_chunks[chunk][offset : offset + take] = rows[done : done + take]
            if self.code_chunks is not None:
                self._write_codes(self.size, sign_codes(self.chunks[chunk][offset : offset + take]))
            done += take
            self.size += take  # after the data: a reader never sees a row not yet written

    def erase(self, row: int) -> bool:
        """Zero the vector (and sign code) of ``row`` if this block holds it (erasure): the
        row stays in place, scoring nothing, so every other position is unchanged."""
        for chunk, rows in enumerate(self.row_chunks):
            filled = min(CHUNK_ROWS, self.size - chunk * CHUNK_ROWS)
            if filled <= 0 or rows[0] > row or rows[filled - 1] < row:
                continue
            offset = int(np.searchsorted(rows[:filled], row))
            if rows[offset] != row:
                return False
            self.chunks[chunk][offset] = 0.0
            if self.code_chunks is not None:
                position = chunk * CHUNK_ROWS + offset
                self._write_codes(position, sign_codes(self.chunks[chunk][offset : offset + 1]))
            return True
        return False

    def keep_codes(self) -> None:
        """Start keeping sign codes: of every row so far, and of each row appended."""
        if self.code_chunks is not None:
            return
        self.code_chunks = []
        for first in range(0, self.size, CHUNK_ROWS):
            take = min(CHUNK_ROWS, self.size - first)
            self._write_codes(first, sign_codes(self.chunks[first // CHUNK_ROWS][:take]))

    def _write_codes(self, first: int, codes: Array) -> None:
        """Store the codes of rows ``first, first + 1, …`` (column-major, as sign_codes)."""
        assert self.code_chunks is not None
        done = 0
        while done < codes.shape[1]:
            chunk, offset = divmod(first + done, CODE_CHUNK_ROWS)
            if chunk == len(self.code_chunks):
                words = code_words(self.dimensions)
                self.code_chunks.append(np.zeros((words, CODE_CHUNK_ROWS), dtype=np.uint64))
            take = min(CODE_CHUNK_ROWS - offset, codes.shape[1] - done)
            self.code_chunks[chunk][:, offset : offset + take] = codes[:, done : done + take]
            done += take

    def _new_chunk(self) -> tuple[Array, Array]:
        chunk = np.zeros((CHUNK_ROWS, self.dimensions), dtype=np.float32)
        rows = np.zeros(CHUNK_ROWS, dtype=np.int64)
        self.chunks.append(chunk)
        self.row_chunks.append(rows)
        return chunk, rows

    def flat_rows(self) -> Array:
        """Every row, in order, as one array (a view: rows appended since are filled in
        first, so each row is copied into it once)."""
        with self._flat_lock:
            size, done = self.size, self._flat_size
            if done < size:
                if len(self._flat) < size:
                    grown = np.zeros(max(size, 2 * len(self._flat), CHUNK_ROWS), dtype=np.int64)
                    grown[:done] = self._flat[:done]
                    self._flat = grown
                while done < size:
                    chunk, offset = divmod(done, CHUNK_ROWS)
                    take = min(CHUNK_ROWS - offset, size - done)
                    self._flat[done : done + take] = self.row_chunks[chunk][offset : offset + take]
                    done += take
                self._flat_size = size
            return self._flat[:size]

    @property
    def rows(self) -> Array:
        """Every row, in order (a copy)."""
        return _joined(self.row_chunks, self.size, np.int64)

    @property
    def matrix(self) -> Array:
        """Every vector, in order (a copy)."""
        if not self.chunks:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.concatenate(self.chunks)[: self.size]

    def count_below(self, below: int | None) -> int:
        """How many of the block's rows are under ``below`` (all when None): a prefix."""
        size = self.size
        if below is None or size == 0:
            return size
        last = size - 1
        if self.row_chunks[last // CHUNK_ROWS][last % CHUNK_ROWS] < below:
            return size  # the usual case: every row (a live read)
        # Chunks hold ascending rows: find the chunk where ``below`` falls, then inside it.
        firsts = [int(r[0]) for r in self.row_chunks[: last // CHUNK_ROWS + 1]]
        chunk = int(np.searchsorted(firsts, below, side="left")) - 1
        if chunk < 0:
            return 0
        filled = min(CHUNK_ROWS, size - chunk * CHUNK_ROWS)
        inside = int(np.searchsorted(self.row_chunks[chunk][:filled], below, side="left"))
        return chunk * CHUNK_ROWS + inside

    def score_into(self, query: Array, count: int, rows: Array, scores: Array) -> None:
        """Write the first ``count`` rows and their scores into ``rows`` and ``scores``."""
        # By index, up to ``count``: a writer may be appending a chunk meanwhile.
        for chunk in range(-(-count // CHUNK_ROWS)):
            first = chunk * CHUNK_ROWS
            take = min(CHUNK_ROWS, count - first)
            rows[first : first + take] = self.row_chunks[chunk][:take]
            np.einsum("ij,j->i", self.chunks[chunk][:take], query, out=scores[first : first + take])

    def distances_into(self, code: Array, count: int, rows: Array, distances: Array) -> None:
        """Write the first ``count`` rows and the Hamming distances of their sign codes to
        ``code`` (one query's, column-major) into ``rows`` and ``distances`` (uint16)."""
        codes = self.code_chunks
        if codes is None:
            raise RuntimeError("this block keeps no sign codes")
        full, tail = divmod(count, CHUNK_ROWS)
        parts = [*self.row_chunks[:full], *([self.row_chunks[full][:tail]] if tail else [])]
        if parts:
            np.concatenate(parts, out=rows)
        for chunk in range(-(-count // CODE_CHUNK_ROWS)):
            first = chunk * CODE_CHUNK_ROWS
            take = min(CODE_CHUNK_ROWS, count - first)
            differing = np.bitwise_count(np.bitwise_xor(codes[chunk][:, :take], code))
            differing.sum(axis=0, dtype=np.uint16, out=distances[first : first + take])

    def gather_into(self, positions: Array, out: Array) -> None:
        """Copy the vectors at ``positions`` (ascending) into ``out``."""
        if not len(positions):
            return
        if len(positions) <= FEW_ROWS:  # a few rows (an index's candidates): one at a time
            chunks, offsets = np.divmod(positions, CHUNK_ROWS)
            pairs = zip(chunks.tolist(), offsets.tolist(), strict=True)
            for i, (chunk, offset) in enumerate(pairs):
                out[i] = self.chunks[chunk][offset]
            return
        first, last = int(positions[0]) // CHUNK_ROWS, int(positions[-1]) // CHUNK_ROWS
        edges = np.arange(first, last + 2) * CHUNK_ROWS
        bounds = np.searchsorted(positions, edges).tolist()
        for chunk in range(first, last + 1):
            start, end = bounds[chunk - first], bounds[chunk - first + 1]
            if start < end:
                offsets = positions[start:end] - chunk * CHUNK_ROWS
                np.take(self.chunks[chunk], offsets, axis=0, out=out[start:end])

    def used_bytes(self) -> int:
        return self.size * (self.dimensions * 4 + 8 + self._code_bytes())

    def reserved_bytes(self) -> int:
        floats = len(self.chunks) * CHUNK_ROWS * (self.dimensions * 4 + 8)
        codes = len(self.code_chunks or ()) * CODE_CHUNK_ROWS * self._code_bytes()
        return floats + codes

    def _code_bytes(self) -> int:
        return 0 if self.code_chunks is None else 8 * code_words(self.dimensions)


def _used_codes(chunks: list[Array], size: int, dimensions: int) -> Array:
    """The codes of a block's ``size`` rows from its code chunks, in one array (a copy of
    the used columns alone: a chunk's spare capacity, up to ``CODE_CHUNK_ROWS`` columns of
    zeros, is not copied; a checkpoint holds every block's copy at once)."""
    parts = [
        chunk[:, : min(CODE_CHUNK_ROWS, size - first)]
        for first, chunk in zip(range(0, size, CODE_CHUNK_ROWS), chunks, strict=False)
    ]
    if not parts:
        return np.zeros((code_words(dimensions), 0), dtype=np.uint64)
    return np.concatenate(parts, axis=1)


class EmbeddingIndex:
    """Vectors by scope; one model and one dimension for the whole store."""

    def __init__(self) -> None:
        self.model = ""
        self.dimensions = 0
        self._blocks: dict[int, Block] = {}  # the blocks read, by scope id
        self._order: list[int] = []  # every block's scope id, in the order blocks were made
        self.skipped = 0  # vectors from another model or of another size, not indexed
        self.size = 0  # vectors indexed
        self.coded = False  # whether blocks keep sign codes (from CODED_MIN_ROWS vectors on)
        # A checkpoint's blocks not read yet (restore_later), by scope id: their rows, and
        # what was written to each since (rows with their vectors; rows erased: None), to
        # apply in order once it is read; ``_read`` reads blocks' matrices given their rows.
        self._unread: dict[int, Array] = {}
        self._since: dict[int, list[tuple[Array, Array | None]]] = {}
        self._read: Callable[[dict[int, Array]], dict[int, Array]] | None = None
        self._together = False
        # Unread blocks whose codes the checkpoint kept, and the stand-ins searched by them
        # (made when first scanned, kept up to date with what is written until the read).
        self._unread_codes: dict[int, Array] = {}
        self._stand_ins: dict[int, Block] = {}
        self._stand_in: StandIn | None = None
        self._reading = threading.Lock()  # guards the unread blocks and what is noted for them
        self._io = threading.Lock()  # one read back at a time
        # Held while vectors are written or erased, and while a build of the approximate
        # index takes the blocks' rows or publishes the index: between two writes.
        self.writing = threading.RLock()
        self.closed = False  # once closed, nothing is read back from the log
        self.approximate = ApproximateKeeper(self)  # the approximate index, when kept
        self._places = RowPlaces()  # each row's block and position, for vectors_at
        self._read_back: threading.Thread | None = None  # see _start_read_back

    @property
    def blocks(self) -> dict[int, Block]:
        """Every block by scope id, in the order they were made (read back first if need be)."""
        if self._unread:
            self._read_scopes(list(self._unread))
        return {scope: self._blocks[scope] for scope in self._order}

    def add(self, row: int, scope: int, model: str, vector: Array) -> None:
        if not self.dimensions:
            self.model, self.dimensions = model, len(vector)
        if len(vector) != self.dimensions:
            self.skipped += 1
            return
        rows, matrix = np.array([row], dtype=np.int64), np.atleast_2d(vector)
        with self.writing:
            self._prepare(1)
            self._write(scope, rows, matrix)
            self.size += 1
            self.approximate.follow(rows, matrix, unread=bool(self._unread))

    def add_many(self, entries: list[tuple[int, int, str, bytes]]) -> None:
        """:meth:`add` for each ``(row, scope, model, float32 little-endian bytes)``, in
        order, appended to each scope's block in bulk."""
        if not entries:
            return
        if not self.dimensions:
            _, _, model, data = entries[0]
            self.model, self.dimensions = model, len(data) // 4
        width = 4 * self.dimensions
        kept = [entry for entry in entries if len(entry[3]) == width]
        self.skipped += len(entries) - len(kept)
        if not kept:
            return
        data = b"".join(entry[3] for entry in kept)
        matrix = np.frombuffer(data, dtype="<f4").reshape(len(kept), self.dimensions)
        rows = np.array([entry[0] for entry in kept], dtype=np.int64)
        scopes = np.array([entry[1] for entry in kept], dtype=np.int64)
        with self.writing:
            self._prepare(len(kept))
            for scope in dict.fromkeys(entry[1] for entry in kept):
                picks = np.flatnonzero(scopes == scope)
                self._write(scope, rows[picks], matrix[picks])
            self.size += len(kept)
            self.approximate.follow(rows, matrix, unread=bool(self._unread))

    def restore(self, blocks: dict[int, Block]) -> None:
        """Take the blocks of a checkpoint (their codes are recomputed when kept)."""
        self._blocks, self._order = dict(blocks), list(blocks)
        self._unread, self._since, self._read = {}, {}, None
        self._unread_codes, self._stand_ins, self._stand_in = {}, {}, None
        self.size = sum(block.size for block in blocks.values())
        self.coded = False
        self._prepare(0)
        with self.writing:
            self.approximate.reset()

    def restore_later(
        self,
        block_rows: dict[int, Array],
        read: Callable[[dict[int, Array]], dict[int, Array]],
        *,
        together: bool = False,
        block_codes: dict[int, Array] | None = None,
        stand_in: StandIn | None = None,
    ) -> None:
        """Take the blocks of a checkpoint by their rows: ``read(rows by scope)`` gives those
        blocks' matrices (their rows' vectors, in row order), and is called for a block when
        its vectors are first needed — for a scoped search, that scope's block alone; for
        every block at once when ``together`` (a log that can only be scanned whole).

        ``block_codes``: the sign codes the checkpoint kept of some blocks (column-major, as
        :func:`sign_codes`); until such a block is read, a shortlisting search scans
        ``stand_in(rows, codes)`` instead (see the module doc)."""
        self.restore({})
        self._together = together
        self._order = list(block_rows)
        self._unread = dict(block_rows)
        self._since = {scope: [] for scope in block_rows}
        self._read = read
        self.size = sum(len(rows) for rows in block_rows.values())
        self._prepare(0)
        if self.coded and stand_in is not None and block_codes:
            self._unread_codes = {
                scope: codes
                for scope, codes in block_codes.items()
                if scope in block_rows and codes.shape[1] == len(block_rows[scope])
            }
            self._stand_in = stand_in

    def block_rows(self) -> dict[int, Array]:
        """Each block's rows, in the order the blocks were made, without reading a vector."""
        with self._reading:
            out = {}
            for scope in self._order:
                block = self._blocks.get(scope)
                if block is not None:
                    out[scope] = block.rows[: block.size]
                    continue
                added = [rows for rows, vectors in self._since[scope] if vectors is not None]
                out[scope] = np.concatenate([self._unread[scope], *added])
            return out

    def unread_scopes(self) -> list[int]:
        """Scope ids of the blocks whose vectors are not read back yet, in block order."""
        unread = self._unread
        return [scope for scope in list(self._order) if scope in unread]

    def read_scope(self, scope: int) -> None:
        """Read one scope's block back now, if it is not yet (see :meth:`restore_later`)."""
        self._read_scopes([scope])

    def _write(self, scope: int, rows: Array, vectors: Array) -> None:
        """Append rows to a scope's block, or note them until that block is read."""
        with self._reading:
            if scope in self._unread:
                self._since[scope].append((rows, vectors))
                stand_in = self._stand_ins.get(scope)
                if stand_in is not None:
                    stand_in.extend(rows, vectors)
                return
        self._block(scope).extend(rows, vectors)

    def _read_scopes(self, scopes: list[int]) -> None:
        """Read the vectors of these scopes' blocks back, then apply what was written to each
        since, in order. One read back at a time; writes are not held up by its reading (they
        are noted for the blocks being read, and applied once they are)."""
        with self._io:
            with self._reading:
                if self._together:
                    scopes = list(self._unread)
                wanted = {s: self._unread[s] for s in scopes if s in self._unread}
                read = self._read
            if not wanted or read is None or self.closed:
                return
            matrices = read(wanted)  # raises (damage in the log) with nothing changed
            with self._reading:
                for scope, rows in wanted.items():
                    block = Block.of(self.dimensions, rows, matrices[scope])
                    if self.coded:
                        block.keep_codes()
                    for added, vectors in self._since.pop(scope):
                        if vectors is None:
                            block.erase(int(added[0]))
                        else:
                            block.extend(added, vectors)
                    self._blocks[scope] = block
                    del self._unread[scope]
                    self._unread_codes.pop(scope, None)
                    self._stand_ins.pop(scope, None)

    def _prepare(self, incoming: int) -> None:
        """Start keeping codes before the rows that reach :data:`CODED_MIN_ROWS` land, so a
        reader that counts that many rows always finds their codes (blocks not read yet get
        theirs when they are)."""
        if not self.coded and self.size + incoming >= CODED_MIN_ROWS:
            with self._reading:  # a block being read back gets its codes either way
                for block in self._blocks.values():
                    block.keep_codes()
                self.coded = True

    def _block(self, scope: int) -> Block:
        block = self._blocks.get(scope)
        if block is None:
            block = self._blocks[scope] = Block(self.dimensions)
            self._order.append(scope)
            if self.coded:
                block.keep_codes()
        return block

    def erase(self, row: int) -> None:
        """Zero the vector of ``row``, wherever it is indexed (erasure)."""
        with self.writing:
            self._erase(row)
            self.approximate.erase(row)

    def _erase(self, row: int) -> None:
        with self._reading:
            for pending in self._since.values():  # blocks not read: whichever holds the row
                pending.append((np.array([row], dtype=np.int64), None))
            for stand_in in self._stand_ins.values():
                stand_in.erase(row)
            read = list(self._blocks.values())  # a search may be reading one back meanwhile
        for block in read:
            if block.erase(row):
                return

    def __len__(self) -> int:
        return self.size

    # --- the approximate index (kept by membrane_es.projections.approximate_keeper) ---------

    @property
    def approximate_from(self) -> int | None:
        """From how many vectors on the approximate index is kept (None: not kept)."""
        return self.approximate.start

    @property
    def approximate_saved(self) -> bytes:
        """A checkpoint's trained index (:meth:`ApproximateIndex.saved`)."""
        return self.approximate.saved

    @approximate_saved.setter
    def approximate_saved(self, data: bytes) -> None:
        self.approximate.saved = data

    @property
    def approximate_loaded(self) -> ApproximateIndex | None:
        """A checkpoint's whole index, taken up by :meth:`keep_approximate`."""
        return self.approximate.loaded

    @approximate_loaded.setter
    def approximate_loaded(self, loaded: ApproximateIndex | None) -> None:
        self.approximate.loaded = loaded

    def keep_approximate(self, min_vectors: int | None) -> None:
        """Keep an approximate index from ``min_vectors`` vectors on (None: keep none), built
        on a thread of its own; one due already is built when a search first asks for it."""
        self.approximate.keep(min_vectors)

    def approximate_index(self) -> ApproximateIndex | None:
        """The approximate index, trained and holding every vector; None when none is kept,
        the store is too small, or it is still being built (a build is started if it is due
        and none runs: after a restore, its first search's)."""
        return self.approximate.index()

    def wait_approximate(self, timeout: float | None = None) -> bool:
        """Start building the approximate index if it is due, and wait up to ``timeout``
        seconds (None: as long as it takes) for the build, and for a loaded index, for the
        blocks' vectors its candidates are scored with to be read back; True once done."""
        start = time.monotonic()
        if not self.approximate.wait(timeout):
            return False
        if self._unread and self.approximate_live() is not None:
            # A loaded index scores its candidates with vectors fetched from the log one by
            # one until the blocks are read back: wait for them too.
            self._start_read_back()
            reader = self._read_back
            if reader is not None:
                left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
                reader.join(left)
                return not reader.is_alive()
        return True

    @property
    def approximate_building(self) -> bool:
        """Whether the approximate index is being built."""
        return self.approximate.building

    def close(self) -> None:
        """Stop a build under way (it publishes nothing) and read nothing more back from the
        log: once this returns, no thread of this index reads the log."""
        self.approximate.close()
        with self._io:  # a block being read back finishes first
            self.closed = True

    def approximate_live(self) -> ApproximateIndex | None:
        """The approximate index if it is built and holds every vector (what a checkpoint
        writes whole), else None; it does not start a build."""
        return self.approximate.live()

    def approximate_state(self) -> bytes:
        """The approximate index's training for a checkpoint (empty when it is not trained):
        the live index's, or the one a checkpoint gave it not yet built again."""
        return self.approximate.state()

    def held_blocks(self) -> list[tuple[Block, Array]]:
        """Every block read, with its rows (under ``writing``)."""
        blocks = [self._blocks.get(scope) for scope in self._order]
        return [(block, block.flat_rows()) for block in blocks if block is not None]

    def _start_read_back(self) -> None:
        """Read every block not read yet back from the log on a thread of its own
        (:mod:`membrane_es.projections.vector_read_back`; a close stops it after the scope
        it is reading): a read that scores a few candidates fetches their vectors one by one
        meanwhile. Started once, and only while some block is still to be read."""
        with self._reading:
            if self._read_back is not None or self.closed or not self._unread:
                return
            self._read_back = start_read_back(self, lambda: self.closed)

    def chosen(
        self, scopes: list[int] | None, below: int | None, *, codes: bool = False
    ) -> list[tuple[int, Block, int]]:
        """``(scope, block, rows under below)`` for the blocks of the given scopes (all if
        None; in the order of ``scopes``, or of the blocks' creation). With ``codes`` (what
        a pass over the sign codes needs), a block not read yet whose codes the checkpoint
        kept comes as its stand-in instead of being read."""
        keys = list(self._order) if scopes is None else list(dict.fromkeys(scopes))
        stand_ins: dict[int, Block] = {}
        if self._unread:
            if codes:
                stand_ins = self._stand_ins_of(keys)
            missing = [key for key in keys if key not in stand_ins]
            if missing:
                self._read_scopes(missing)
        blocks = [
            (key, stand_ins[key] if key in stand_ins else self._blocks[key])
            for key in keys
            if key in stand_ins or key in self._blocks
        ]
        return [(key, block, block.count_below(below)) for key, block in blocks]

    def _stand_ins_of(self, scopes: list[int]) -> dict[int, Block]:
        """The stand-ins of those of ``scopes`` not read yet whose codes are kept (made on
        first use, with what was written to the block since applied in order)."""
        with self._reading:
            made = self._stand_in
            if made is None or self._together:
                return {}
            out = {}
            for scope in scopes:
                if scope not in self._unread or scope not in self._unread_codes:
                    continue
                stand_in = self._stand_ins.get(scope)
                if stand_in is None:
                    stand_in = made(self._unread[scope], self._unread_codes[scope])
                    for added, vectors in self._since[scope]:
                        if vectors is None:
                            stand_in.erase(int(added[0]))
                        else:
                            stand_in.extend(added, vectors)
                    self._stand_ins[scope] = stand_in
                out[scope] = stand_in
            return out

    def block_codes(self) -> dict[int, Array]:
        """Each block's sign codes (column-major, as :func:`sign_codes`), of the blocks
        whose codes are known without reading a vector: every block read, once the index
        keeps codes, and those a checkpoint kept. Empty while the index keeps none."""
        if not self.coded:
            return {}
        out = {}
        for scope in self.unread_scopes():
            self._stand_ins_of([scope])  # the checkpoint's codes with what came since
        with self._reading:
            for scope in self._order:
                block = self._blocks.get(scope) or self._stand_ins.get(scope)
                if block is None or block.code_chunks is None:
                    continue
                out[scope] = _used_codes(block.code_chunks, block.size, self.dimensions)
        return out

    def similarities(
        self, query: Array, scopes: list[int] | None, below: int | None = None
    ) -> tuple[Array, Array]:
        """(rows, cosine similarity) for every vector in the given scopes (all if None), of
        the rows under ``below`` when given (the records that existed at some moment).

        Rows come block by block (in the order of ``scopes``, or of the blocks' creation),
        ascending within a block. A row's score is the same bits whatever ``below`` is and
        however many rows were added after it (see the module's docstring).
        """
        empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if not self.dimensions:
            return empty
        query = np.ascontiguousarray(query, dtype=np.float32)
        chosen = self.chosen(scopes, below)
        total = sum(count for _, _, count in chosen)
        if not total:
            return empty
        rows = np.empty(total, dtype=np.int64)
        scores = np.empty(total, dtype=np.float32)
        start = 0
        for _, block, count in chosen:
            block.score_into(
                query, count, rows[start : start + count], scores[start : start + count]
            )
            start += count
        return rows, scores

    def vectors_of(self, rows: Array, scopes: Array, *, few: bool = False) -> Array:
        """The stored vector of each of ``rows`` (any order; ``scopes``: the block each one's
        vector is in), a row of NaN where there is none; ``few``: from the stand-ins of
        blocks not read yet, where there are (see :meth:`chosen`)."""
        out = np.full((len(rows), self.dimensions), np.nan, dtype=np.float32)
        for scope, block, count in self.chosen(np.unique(scopes).tolist(), None, codes=few):
            if not count:
                continue
            segment = block.flat_rows()[:count]  # ascending
            wanted = np.flatnonzero(scopes == scope)
            places = np.minimum(np.searchsorted(segment, rows[wanted]), count - 1)
            held = segment[places] == rows[wanted]
            order = np.argsort(places[held], kind="stable")
            gathered = np.empty((int(held.sum()), self.dimensions), dtype=np.float32)
            block.gather_into(places[held][order], gathered)
            out[wanted[held][order]] = gathered
        return out

    def vectors_at(self, rows: Array, scopes: Array) -> Array:
        """:meth:`vectors_of` for a few rows scattered over many blocks: each row's vector
        found through one map from row to place, not block by block. Rows of blocks not
        read back yet are read from the log one by one where the checkpoint kept their
        codes (the blocks' stand-ins): a few candidates' vectors, not every block's."""
        if self._unread or not len(rows):
            if self._unread:
                self._start_read_back()  # reads after it find every vector in memory
            return self.vectors_of(rows, scopes, few=True)  # unread blocks have no places
        held = [self._blocks.get(scope) for scope in list(self._order)]
        places, blocks = self._places.of(rows, held)
        out = np.full((len(rows), self.dimensions), np.nan, dtype=np.float32)
        numbers, positions = (places >> 32).tolist(), (places & 0xFFFFFFFF).tolist()
        for i, (number, position) in enumerate(zip(numbers, positions, strict=True)):
            block = blocks[number] if number >= 0 else None
            if block is not None:
                chunk, offset = divmod(position, CHUNK_ROWS)
                out[i] = block.chunks[chunk][offset]
        return out

    def scan_codes(self, query: Array, scopes: list[int] | None, below: int | None) -> CodeScan:
        """The Hamming distance of every row's sign code to the query's, over the rows
        :meth:`similarities` would score, in the same order. Only when :attr:`coded`."""
        chosen = self.chosen(scopes, below, codes=True)
        starts = np.cumsum([0, *(count for _, _, count in chosen)])
        rows = np.empty(int(starts[-1]), dtype=np.int64)
        distances = np.empty(int(starts[-1]), dtype=np.uint16)
        code = sign_codes(np.asarray(query, dtype=np.float32))
        for (_, block, count), start in zip(chosen, starts.tolist(), strict=False):
            end = start + count
            block.distances_into(code, count, rows[start:end], distances[start:end])
        return CodeScan(
            [scope for scope, _, _ in chosen],
            [block for _, block, _ in chosen],
            starts,
            rows,
            distances,
        )

    def scores_at(self, query: Array, scan: CodeScan, picks: Array) -> Array:
        """Cosine similarity of the rows at ``picks`` (ascending places in ``scan``),
        computed as :meth:`similarities` computes it."""
        vectors = np.empty((len(picks), self.dimensions), dtype=np.float32)
        bounds = np.searchsorted(picks, scan.starts).tolist()
        for i, block in enumerate(scan.blocks):
            first, last = bounds[i], bounds[i + 1]
            if first < last:
                positions = picks[first:last] - scan.starts[i]
                block.gather_into(positions, vectors[first:last])
        query = np.ascontiguousarray(query, dtype=np.float32)
        scores: Array = np.einsum("ij,j->i", vectors, query)
        return scores


@dataclass(frozen=True)
class CodeScan:
    """One query's pass over the sign codes: the blocks it read, where each block's rows
    start in ``rows``, and every row with its code's Hamming distance to the query's."""

    scopes: list[int]
    blocks: list[Block]
    starts: Array  # len(blocks) + 1 offsets into rows
    rows: Array
    distances: Array

    def places(self, rows: Array, scopes: Array) -> Array:
        """Where each of ``rows`` (ascending; ``scopes`` gives each one's scope) sits in the
        scan; -1 for rows the scan does not hold."""
        out = np.full(len(rows), -1, dtype=np.int64)
        for i, scope in enumerate(self.scopes):
            picks = np.flatnonzero(scopes == scope)
            segment = self.rows[int(self.starts[i]) : int(self.starts[i + 1])]  # ascending
            if not len(picks) or not len(segment):
                continue
            places = np.minimum(np.searchsorted(segment, rows[picks]), len(segment) - 1)
            held = segment[places] == rows[picks]
            out[picks[held]] = int(self.starts[i]) + places[held]
        return out


def _joined(chunks: list[Array], size: int, dtype: Any) -> Array:
    if not chunks:
        return np.zeros(0, dtype=dtype)
    return np.concatenate(chunks)[:size]

"""An approximate nearest-neighbour index over every vector of a large store: FAISS's
inverted file (IVF) of 8-bit scalar-quantised codes, by inner product.

A read over most of a large store's vectors asks it for a few hundred candidates and scores
only those exactly (:mod:`membrane_es.queries.vectors`), instead of passing over every
vector or every sign code. Its candidates are never an answer on their own: trust, scope,
state and ``as_of`` are checked on them as on any row, and a read whose admitted candidates
are too few searches the way it would without this index.

Why an inverted file and not a graph (HNSW): measured side by side at 100,000 clustered
384-dimension vectors on one core, IVF trained and filled in a few seconds and, after exact
re-scoring of 100 candidates, kept 100 % of the exact top 10 at 0.3 ms a query, where FAISS's
HNSW (M 16) took 49 s to build and kept 86 % at 0.4 ms (docs/benchmarks.md). And an inverted
file only grows by appending: each vector goes to the end of its nearest centroid's list, so a
search restricted to the rows under ``n`` scans exactly what it scanned when the store held
``n`` rows — a read ``as_of`` a moment gets the candidates that moment's read got, where a
graph's links change as nodes are added.

The centroids are trained once, when the store first holds :attr:`ApproximateIndex.min_vectors`
vectors, on exactly those (the first in row order: however writes were batched, the same
log gives the same vectors), by k-means with a fixed seed on one thread; every later vector
is appended to its list in row order. So the same events give the same index, and searches
(one thread: FAISS's fastest setting for one query) the same candidates. A forgotten
record's code is removed from its list at once.

A checkpoint keeps its training (:meth:`ApproximateIndex.saved`: the centroids, 1.5 MB)
and, once it is built, the index whole (each vector's code and row, 392 B a record at 384
dimensions: :mod:`membrane_es.projections.approximate_file`), which an open loads
(:meth:`ApproximateIndex.loaded`) and appends to what the log adds after it. Where the
checkpoint has no index file it could read, the vectors are added again, from the blocks,
once a search first asks for the index. Training and filling it run on a thread of their
own (:mod:`membrane_es.projections.approximate_keeper`): reads search as without it until
it is ready. The engine works without FAISS (the ``ann`` extra): reads are then what they
were.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

try:  # the ``ann`` extra
    import faiss
except ImportError:  # pragma: no cover - exercised by a test that hides the module
    faiss = None

Array = npt.NDArray[Any]

DEFAULT_MIN_VECTORS = 50_000  # below this an exact scan or the sign codes are fast enough
MAX_LISTS = 1024  # centroids: about 1,000 vectors a list at a million
VECTORS_PER_LIST = 39  # k-means wants at least this many training vectors per centroid
TRAIN_ITERATIONS = 10
SEED = 1234
PROBES = 32  # lists scanned per query (of up to MAX_LISTS) by :meth:`ApproximateIndex.search`
SLAB = 8192  # vectors handled at a time when training and building (bounds the copies)
# How far past its centroid's score a list's best vector plausibly reaches, in standard
# deviations of a residual's projection on the query (the largest of a thousand normal
# draws is about 3.2 of them).
REACH_SIGMAS = 4.5


def available() -> bool:
    """Whether FAISS can be imported (the ``ann`` extra is installed)."""
    return faiss is not None


class ApproximateIndex:
    """Candidate rows near a query, from every vector added (rows ascending, as the log
    gives them); empty until :attr:`min_vectors` vectors are in."""

    def __init__(self, dimensions: int, min_vectors: int) -> None:
        if faiss is None:
            raise RuntimeError("approximate search needs FAISS (the 'ann' extra)")
        self.dimensions = dimensions
        self.min_vectors = max(1, min_vectors)
        self._index: Any = None
        self.trained_below = 0  # rows under which its training vectors lay (0: untrained)
        self.rows_below = 0  # every row added is under this
        self.size = 0  # vectors held
        self._lock = threading.Lock()  # FAISS's lists are not safe to grow while searched
        # Held by whatever changes the index (add, erase) and by a copy of it taken for a
        # checkpoint, which only reads it: searches go on while the copy is taken.
        self._mutating = threading.Lock()
        # The index's file in the last checkpoint written or loaded (None: none yet), and
        # each row erased since, with the rows the index then held (``rows_below``).
        self.file: Any = None  # an approximate_file.IndexFile
        self.erasures: list[tuple[int, int]] = []
        self._centroids: Array = np.zeros((0, dimensions), dtype=np.float32)
        self._reach: Array = np.zeros(0, dtype=np.float32)  # each list's plausible reach
        self._trained_state = b""

    @property
    def trained(self) -> bool:
        return self._index is not None

    @property
    def lists(self) -> int:
        return 0 if self._index is None else int(self._index.nlist)

    def add(self, rows: Array, vectors: Array) -> None:
        """Append these vectors (rows ascending; rows under :attr:`rows_below`, added
        already, are passed over). Until the index is trained, nothing is kept:
        :meth:`train` is given them all at once."""
        if self._index is None or not len(rows):
            return
        # An erased vector (zeros) has nothing to find.
        keep = np.flatnonzero((rows >= self.rows_below) & np.any(vectors != 0.0, axis=1))
        with self._mutating, self._lock:
            faiss.omp_set_num_threads(1)
            if len(keep):
                self._index.add_with_ids(
                    np.ascontiguousarray(vectors[keep], dtype=np.float32),
                    np.ascontiguousarray(rows[keep], dtype=np.int64),
                )
            self.size = int(self._index.ntotal)
            self.rows_below = max(self.rows_below, int(rows[-1]) + 1)

    def train(self, rows: Array, vectors: Array) -> None:
        """Train on these vectors — the first :attr:`min_vectors` not erased, rows ascending,
        float32 and contiguous (used as given: no copy) — and add them."""
        lists = max(1, min(MAX_LISTS, len(vectors) // VECTORS_PER_LIST))
        with self._lock:
            faiss.omp_set_num_threads(1)
            quantizer = faiss.IndexFlatIP(self.dimensions)
            index = faiss.IndexIVFScalarQuantizer(
                quantizer,
                self.dimensions,
                lists,
                faiss.ScalarQuantizer.QT_8bit,
                faiss.METRIC_INNER_PRODUCT,
                False,  # codes of the vectors themselves, not of their residuals
            )
            index.cp.seed = SEED
            index.cp.niter = TRAIN_ITERATIONS
            index.cp.max_points_per_centroid = len(vectors)  # train on every one: no sampling
            index.train(vectors)
            index.nprobe = min(PROBES, lists)
            # The trained index, empty (its centroids and code ranges, 1.5 MB): what a
            # checkpoint keeps, so an open has only to add the vectors again.
            self._trained_state = faiss.serialize_index(index).tobytes()
            centroids = index.quantizer.reconstruct_n(0, lists)
            # Each list's spread: the root mean square distance of its training vectors
            # from its centroid (a list no training vector fell in: the widest); a slab at a
            # time, so training holds no second copy of its vectors.
            counts = np.zeros(lists, dtype=np.int64)
            sums = np.zeros(lists, dtype=np.float64)
            for first in range(0, len(vectors), SLAB):
                part = vectors[first : first + SLAB]
                _, assigned = index.quantizer.search(part, 1)
                residual = part - centroids[assigned[:, 0]]
                squared = np.einsum("ij,ij->i", residual, residual)
                counts += np.bincount(assigned[:, 0], minlength=lists)
                sums += np.bincount(assigned[:, 0], weights=squared, minlength=lists)
            spread = np.sqrt(sums / np.maximum(counts, 1))
            spread[counts == 0] = spread.max()
            self._centroids = np.ascontiguousarray(centroids, dtype=np.float32)
            self._reach = (REACH_SIGMAS * spread / np.sqrt(self.dimensions)).astype(np.float32)
            self._index = index
            self.trained_below = int(rows[-1]) + 1
        for first in range(0, len(rows), SLAB):
            self.add(rows[first : first + SLAB], vectors[first : first + SLAB])

    def saved(self) -> bytes:
        """The trained index without its vectors (empty until trained): see :meth:`restored`."""
        if self._index is None:
            return b""
        return msgspec.msgpack.encode(
            {
                "min_vectors": self.min_vectors,
                "dimensions": self.dimensions,
                "trained_below": self.trained_below,
                "reach": self._reach.astype("<f4").tobytes(),
                "index": self._trained_state,
            }
        )

    def held(self) -> tuple[int, int, list[tuple[int, int]]]:
        """``(rows_below, size, erasures)`` as they stand (none changing meanwhile)."""
        with self._mutating:
            return self.rows_below, self.size, list(self.erasures)

    def snapshot(self) -> tuple[Any, int, int, int]:
        """A copy of the whole FAISS index (its codes and lists), to be written to a file
        while this one goes on being searched and grown, with the rows under which and the
        number of vectors it holds, and how many erasures were noted before it."""
        with self._mutating:  # no add or erase meanwhile; searches read on beside the copy
            return faiss.clone_index(self._index), self.rows_below, self.size, len(self.erasures)

    def mark_written(self, file: Any, noted: int) -> None:
        """The copy :meth:`snapshot` took (after ``noted`` erasures) is now ``file``: the
        erasures noted since it was taken are those since the file."""
        with self._mutating:
            self.file = file
            del self.erasures[:noted]

    @classmethod
    def loaded(
        cls, data: bytes, held: dict[str, int], path: Path, dimensions: int
    ) -> ApproximateIndex | None:
        """The index :meth:`write` wrote to ``path``, trained as ``data`` (:meth:`saved`)
        says and holding what ``held`` says; None when the file is not that index (missing,
        damaged, written by another FAISS): it is then built again from the blocks.

        Read into memory, not mapped: FAISS maps an inverted file's lists read-only, and
        vectors written after the checkpoint are appended to them, a forgotten one's code
        removed."""
        if faiss is None or not data:
            return None
        try:
            state = msgspec.msgpack.decode(data)
            min_vectors = int(state["min_vectors"])
            out = cls.restored(data, dimensions, min_vectors)
            if out is None:
                return None
            index = faiss.read_index(str(path))
            size, rows_below = int(held["size"]), int(held["rows_below"])
        except (OSError, msgspec.DecodeError, KeyError, TypeError, ValueError, RuntimeError):
            return None
        same = (
            int(index.d) == dimensions
            and int(index.nlist) == out.lists
            and int(index.ntotal) == size
            and int(getattr(index, "code_size", 0)) == int(out._index.code_size)
            and np.array_equal(index.quantizer.reconstruct_n(0, out.lists), out._centroids)
        )
        if not same:
            return None
        index.nprobe = out._index.nprobe
        out._index, out.size, out.rows_below = index, size, rows_below
        return out

    @classmethod
    def restored(cls, data: bytes, dimensions: int, min_vectors: int) -> ApproximateIndex | None:
        """An index trained as :meth:`saved` says, holding no vector yet; None when it was
        trained for another threshold or width (it is then trained again)."""
        if faiss is None or not data:
            return None
        try:
            state = msgspec.msgpack.decode(data)
            if state["min_vectors"] != max(1, min_vectors) or state["dimensions"] != dimensions:
                return None
            index = faiss.deserialize_index(np.frombuffer(state["index"], dtype=np.uint8))
            reach = np.frombuffer(state["reach"], dtype="<f4").astype(np.float32)
            trained_below = int(state["trained_below"])
        except (msgspec.DecodeError, KeyError, TypeError, RuntimeError):
            return None  # trained again: the index is a cache of what the log says
        if int(index.ntotal) or len(reach) != int(index.nlist):
            return None
        out = cls(dimensions, min_vectors)
        out._index, out._reach, out._trained_state = index, reach, state["index"]
        out._centroids = np.ascontiguousarray(
            index.quantizer.reconstruct_n(0, int(index.nlist)), dtype=np.float32
        )
        out.trained_below = trained_below
        return out

    def erase(self, row: int) -> None:
        """Remove ``row``'s code (a forgotten record's vector is not kept, even quantised)."""
        if self._index is None:
            return
        with self._mutating, self._lock:
            self._index.remove_ids(faiss.IDSelectorRange(row, row + 1))
            self.size = int(self._index.ntotal)
            # A checkpoint that keeps an earlier file of the index erases it there again.
            self.erasures.append((row, self.rows_below))

    def search(self, query: Array, count: int, below: int, probes: int = PROBES) -> Array:
        """Up to ``count`` rows under ``below`` nearest ``query`` by their codes, nearest
        first, scanning ``probes`` lists."""
        index = self._index
        if index is None or count <= 0:
            return np.zeros(0, dtype=np.int64)
        nprobe = max(1, min(probes, index.nlist))
        selector = faiss.IDSelectorRange(0, below) if below < self.rows_below else None
        params = faiss.SearchParametersIVF(nprobe=nprobe, sel=selector)
        vector = np.ascontiguousarray(np.atleast_2d(query), dtype=np.float32)
        with self._lock:
            faiss.omp_set_num_threads(1)
            _, found = index.search(vector, count, params=params)
        rows: Array = found[0]
        return rows[rows >= 0]

    def lists_by_score(self, query: Array) -> tuple[Array, Array]:
        """Every list, nearest centroid first (ties by list), and its centroid's score: the
        order a search scans lists in. By ``einsum``, not BLAS: one query's 1,024 dot
        products are too few to pay for BLAS's threads, which slow what runs next."""
        scores = np.einsum("ij,j->i", self._centroids, np.asarray(query, dtype=np.float32))
        order = np.argsort(-scores, kind="stable")
        return order, scores[order]

    def search_lists(self, query: Array, lists: Array, count: int, below: int) -> Array:
        """Up to ``count`` rows under ``below`` nearest ``query`` by their codes, nearest
        first, from these lists alone (as :meth:`lists_by_score` gives them)."""
        index = self._index
        if index is None or count <= 0 or not len(lists):
            return np.zeros(0, dtype=np.int64)
        selector = faiss.IDSelectorRange(0, below) if below < self.rows_below else None
        params = faiss.SearchParametersIVF(nprobe=len(lists), sel=selector)
        vector = np.ascontiguousarray(np.atleast_2d(query), dtype=np.float32)
        assign = np.ascontiguousarray(np.atleast_2d(lists), dtype=np.int64)
        centroid = np.zeros(assign.shape, dtype=np.float32)  # unused: codes are not residuals
        distances = np.empty((1, count), dtype=np.float32)
        found = np.empty((1, count), dtype=np.int64)
        with self._lock:
            faiss.omp_set_num_threads(1)
            index.search_preassigned_c(
                1,
                faiss.swig_ptr(vector),
                count,
                faiss.swig_ptr(assign),
                faiss.swig_ptr(centroid),
                faiss.swig_ptr(distances),
                faiss.swig_ptr(found),
                False,
                params,
            )
        rows: Array = found[0]
        return rows[rows >= 0]

    def lists_reaching(self, order: Array, scores: Array, floor: float) -> int:
        """How many of the lists in ``order`` (with their centroids' ``scores``, as
        :meth:`lists_by_score` gives them) a search must scan so that no list left out
        plausibly holds a vector scoring above ``floor``: see :meth:`probes_for`."""
        reaching = np.flatnonzero(scores + self._reach[order] >= floor)
        return 0 if not len(reaching) else int(reaching[-1]) + 1

    def probes_for(self, query: Array, floor: float) -> int:
        """How many lists, nearest centroid first, a search must scan so that no list left
        out plausibly holds a vector scoring above ``floor`` against ``query``: every list
        whose centroid's score plus its reach (:data:`REACH_SIGMAS` standard deviations of
        its vectors' spread, projected on the query) is at least ``floor`` is scanned."""
        scores = self._centroids @ np.asarray(query, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")  # the order FAISS probes lists in
        reaching = np.flatnonzero(scores[order] + self._reach[order] >= floor)
        return 0 if not len(reaching) else int(reaching[-1]) + 1

    def used_bytes(self) -> int:
        """Codes and row ids held (FAISS's lists grow by doubling: up to twice this)."""
        index = self._index
        if index is None:
            return 0
        return int(index.ntotal) * (int(index.code_size) + 8) + int(index.nlist) * 4 * (
            self.dimensions
        )

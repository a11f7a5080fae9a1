"""One engine per tenant: the default tenant's store at the daemon's path, every other
tenant's in ``<path>/tenants/<name>`` (on PostgreSQL: its own schema, with its read views in
that directory). Separate stores make isolation structural: no query, however it is phrased,
can reach another tenant's records, and each tenant's metrics count only its own.

Engines open on first use. With :class:`StoreBounds` a process keeps at most so many open
(and, with a memory budget, closes more while its resident set is over it): the least used
*idle* ones are closed — checkpointed, so their next open is fast — and opened again on
demand. "Least used" counts recent uses, not only the last one (:class:`_UseCounts`), and
among equally used ones the least recently used goes: by recency alone, a stream of tenants
each served once (a sweep, the many cold tenants) pushed busy tenants out between two of
their requests, and their next request waited for an open. Closing runs a few ahead of the
bound (idle engines are kept to up to four fewer, :func:`closing_ahead`), so a new tenant's
request finds a place free rather than waiting for a close, unless that many closes are
still under way.

An engine is idle when no request holds it: a server runs each request in
:meth:`Tenants.serving`, and every engine the request takes inside it is held until it ends,
so a request in flight is never cut and a write is never lost (a write commits before the
request that made it ends). A tenant has at most one engine in a process at any moment: a
request for a tenant whose engine is being opened or closed waits for that to finish.
The default tenant's store is never closed before the daemon stops.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from membrane_es.access.keys import DEFAULT_TENANT
from membrane_es.engine import IN_MEMORY, Membrane, holds_store
from membrane_es.errors import StoreClosedError, StoreNotFoundError
from membrane_es.serving.resident_memory import (
    give_back_freed_memory,
    keep_large_blocks_apart,
    resident_bytes,
)

log = logging.getLogger("membrane_es.serving.tenants")

# Stores a daemon keeps open by default: about 2 MiB and 6 descriptors each when small, so
# 100 stay well inside the usual 1,024 descriptors and a few hundred MiB.
DEFAULT_MAX_OPEN = 100
# A store closed to make room skips its checkpoint when its next open would replay at most
# this many events. Replaying is paid by the next request (measured, 200 records: an open and
# a search 93-177 ms replaying them all, 19-24 ms from a checkpoint, about half a millisecond
# an event), saving by the closer thread, off the requests' path (tens to a few hundred ms).
# A few events cost less to replay than to save; a store that was never checkpointed, or
# whose entries view was built since, is saved.
EVICTION_REPLAY_ALLOWANCE = 20
# Freed memory is handed back to the system (malloc_trim) at most this often, not after every
# close: a trim walks the whole heap (1-30 ms measured, up to 77), other threads' allocations
# wait on it meanwhile, and a daemon evicting a store per request spent 4 of 55 s in it.
TRIM_INTERVAL_SECONDS = 2.0
# Uses are counted per tenant, up to this many (so a tenant busy long ago is not kept for
# long after), and every count is halved after this many uses per place of the bound (10:
# a tenant served once every few hundred requests at bound 50 still counts above those
# served once). Over bench.tenants' request order at 2,000 tenants and bound 50, the share
# of the ten hottest tenants' requests that found their store closed: 30 % by recency alone,
# 1 % counting uses (most of those a tenant's second request, which no count foresees).
MOST_COUNTED_USES = 15
USES_HALVED_PER_PLACE = 10
# A memory budget that cannot be met (every open store busy) is said at most this often.
_OVER_BUDGET_NOTICE_SECONDS = 60.0

# Places kept free for new tenants' stores while idle ones close (a close takes a few ms of
# CPU, and tens of ms more when it syncs the key store or saves a checkpoint): with one, a
# new tenant's request waited for the previous eviction's close whenever it came within
# that (in process at bound 50: 6 ms at p50, 56-84 ms at p99 of cold requests).
MOST_CLOSING_AHEAD = 4

_OPENING, _OPEN, _CLOSING = "opening", "open", "closing"


def closing_ahead(max_open: int) -> int:
    """How many places below ``max_open`` idle stores are closed to keep free: one for a
    bound under 16, an eighth of it above, at most :data:`MOST_CLOSING_AHEAD`."""
    return max(1, min(MOST_CLOSING_AHEAD, max_open // 8))


@dataclass(frozen=True)
class StoreBounds:
    """How many tenant stores a process keeps open: ``max_open`` (0: no bound) and
    ``memory_budget`` in bytes of the process's resident set (0: none)."""

    max_open: int = 0
    memory_budget: int = 0

    @property
    def bounded(self) -> bool:
        return self.max_open > 0 or self.memory_budget > 0


class _Slot:
    """A tenant's engine and who holds it; changed only under :attr:`Tenants._changed`."""

    __slots__ = ("engine", "state", "used", "users")

    def __init__(self) -> None:
        self.engine: Membrane | None = None
        self.state = _OPENING
        self.users = 0  # requests holding the engine now
        self.used = 0  # when it was last taken or let go (a counter: least is oldest)


class _UseCounts:
    """How often each tenant has been used lately: a count per use, at most
    :data:`MOST_COUNTED_USES`, every count halved (and those reaching 0 forgotten) after
    ``window`` uses in all, so what counts is recent use. What it holds is bounded by the
    window: a tenant used once is forgotten at the next halving."""

    __slots__ = ("_counts", "_since", "window")

    def __init__(self, window: int) -> None:
        self.window = max(window, 1)
        self._counts: dict[str, int] = {}
        self._since = 0

    def used(self, tenant: str) -> None:
        self._counts[tenant] = min(self._counts.get(tenant, 0) + 1, MOST_COUNTED_USES)
        self._since += 1
        if self._since >= self.window:
            self._since = 0
            self._counts = {name: n // 2 for name, n in self._counts.items() if n > 1}

    def __getitem__(self, tenant: str) -> int:
        return self._counts.get(tenant, 0)


class _Leases:
    """The engines one request holds, let go when it ends."""

    __slots__ = ("owner", "slots")

    def __init__(self, owner: Tenants) -> None:
        self.owner = owner
        self.slots: list[_Slot] = []


# The request being served on this thread (or task): set by :meth:`Tenants.serving`.
_REQUEST: contextvars.ContextVar[_Leases | None] = contextvars.ContextVar(
    "membrane_tenant_leases", default=None
)


class Tenants:
    """Engines by tenant name, opened lazily with ``open_engine(tenant, path or None)``.

    A write opens (and so may create) a tenant's store: :meth:`get`. A read never creates
    one: :meth:`reader` answers for a tenant that has no store yet from an empty store kept
    in memory. ``open_existing(tenant, path)`` opens a tenant's store only if it exists,
    raising :class:`~membrane_es.errors.StoreNotFoundError` otherwise; without it, a store is
    an LMDB directory holding its data file. With ``bounds``, idle engines are closed (see
    the module's docstring): take engines inside :meth:`serving` so none is closed in use."""

    def __init__(
        self,
        root: str,
        open_engine: Callable[[str, Path | None], Membrane],
        open_existing: Callable[[str, Path | None], Membrane] | None = None,
        bounds: StoreBounds | None = None,
    ) -> None:
        self._root = root
        self._open = open_engine
        self._open_existing = open_existing
        self.bounds = bounds or StoreBounds()
        self._slots: dict[str, _Slot] = {}
        self._changed = threading.Condition()
        self._clock = itertools.count(1)
        self._uses = _UseCounts(USES_HALVED_PER_PLACE * (self.bounds.max_open or DEFAULT_MAX_OPEN))
        self._on_open: list[Callable[[Membrane], None]] = []
        self._empty: Membrane | None = None
        self._closed = False
        self._closer: threading.Thread | None = None
        self._to_close: queue.SimpleQueue[tuple[str, _Slot] | None] = queue.SimpleQueue()
        self._noticed_over_budget = 0.0
        self._trimmed = 0.0  # when freed memory was last handed back (the closer's)
        self._closes_pending = 0  # sent to the closer, and not yet closed and trimmed after
        self.opened = 0  # engines opened, ever
        self.evicted = 0  # engines closed to stay within the bounds

    def path_of(self, tenant: str) -> Path | None:
        if self._root == IN_MEMORY:
            return None
        root = Path(self._root)
        return root if tenant == DEFAULT_TENANT else root / "tenants" / tenant

    # --- taking engines ---------------------------------------------------------------------

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Around one request: every engine :meth:`get` or :meth:`reader` gives inside it
        (on this thread, or in tasks and threads started from it) stays open until it ends."""
        leases = _Leases(self)
        token = _REQUEST.set(leases)
        try:
            yield
        finally:
            _REQUEST.reset(token)
            self._let_go(leases)

    @contextmanager
    def lease(self, tenant: str, *, write: bool = True) -> Iterator[Membrane]:
        """``tenant``'s engine, held open for the ``with`` block (a read: :meth:`reader`)."""
        with self.serving():
            yield self.get(tenant) if write else self.reader(tenant)

    def get(self, tenant: str) -> Membrane:
        """``tenant``'s engine, its store opened (and made, if new) if need be."""
        engine = self._take(tenant, create=True)
        assert engine is not None
        return engine

    def reader(self, tenant: str) -> Membrane:
        """The engine a read of ``tenant`` uses: its store, if it has one (opened now if need
        be), else an empty store in memory; nothing is created on disk for a read."""
        path = self.path_of(tenant)
        if tenant == DEFAULT_TENANT or path is None:
            return self.get(tenant)  # the default store is opened at startup
        engine = self._take(tenant, create=False)
        return self._empty_store() if engine is None else engine

    def open_existing(self, tenant: str) -> None:
        """Open ``tenant``'s store if it has one (so a damaged one fails now); create none."""
        self.reader(tenant)

    def _take(self, tenant: str, *, create: bool) -> Membrane | None:
        """The tenant's engine, held by the current request if there is one; ``None`` when
        it has no store and ``create`` is False."""
        leases = _REQUEST.get()
        with self._changed:
            while True:
                if self._closed:
                    raise StoreClosedError("tenants")
                slot = self._slots.get(tenant)
                if slot is None and self._making_room():
                    self._changed.wait()  # for an engine to close
                    continue
                if slot is None:
                    # This thread opens it; others asking meanwhile wait for it.
                    slot = self._slots[tenant] = _Slot()
                    break
                if slot.state == _OPEN:
                    self._hold(tenant, slot, leases)
                    return slot.engine
                self._changed.wait()  # being opened or closed: one engine at a time
            hooks = list(self._on_open)
        try:
            engine = self._opened(tenant, create)
        except BaseException:
            self._forget(tenant, slot)
            raise
        if engine is None:
            self._forget(tenant, slot)
            return None
        try:
            for hook in hooks:
                hook(engine)
        except BaseException:
            engine.close()
            self._forget(tenant, slot)
            raise
        with self._changed:
            slot.engine, slot.state = engine, _OPEN
            self.opened += 1
            self._hold(tenant, slot, leases)
            self._changed.notify_all()
            self._evict_if_over()
        return engine

    def _opened(self, tenant: str, create: bool) -> Membrane | None:
        path = self.path_of(tenant)
        if create and tenant != DEFAULT_TENANT and path is not None:
            # the tenants' directory is this registry's layout, made with the first tenant's
            # store (a store is made only inside a directory that exists)
            path.parent.mkdir(parents=True, exist_ok=True)
        if create or path is None:
            return self._open(tenant, path)
        try:
            if self._open_existing is not None:
                return self._open_existing(tenant, path)
            if not holds_store(path):
                return None
            return self._open(tenant, path)
        except StoreNotFoundError:
            return None

    def _making_room(self) -> bool:
        """(Under the lock.) Whether a new engine must first wait for another to close: at
        the bound, the least used idle engine is sent to be closed (unless one is
        closing already), so the engines open at once, closing ones included, stay within
        it. With every engine held by a request, nothing waits: the bound is exceeded until
        requests end rather than holding a request up indefinitely."""
        limit = self.bounds.max_open
        if limit <= 0 or len(self._slots) < limit:
            return False
        if any(slot.state == _CLOSING for slot in self._slots.values()):
            return True
        return self._retire(1) > 0

    def _forget(self, tenant: str, slot: _Slot) -> None:
        with self._changed:
            if self._slots.get(tenant) is slot:
                del self._slots[tenant]
            self._changed.notify_all()

    def _hold(self, tenant: str, slot: _Slot, leases: _Leases | None) -> None:
        """(Under the lock.) Mark the slot used now (and count the use); held until the
        request ends."""
        slot.used = next(self._clock)
        self._uses.used(tenant)
        if leases is not None and leases.owner is self:
            slot.users += 1
            leases.slots.append(slot)

    def _let_go(self, leases: _Leases) -> None:
        if not leases.slots:
            return
        with self._changed:
            for slot in leases.slots:
                slot.users -= 1
                slot.used = next(self._clock)
            self._evict_if_over()

    # --- staying within the bounds ----------------------------------------------------------

    def _evict_if_over(self) -> None:
        """(Under the lock.) Send the least used idle engines to be closed while
        more are open than the bound allows, or one while the process is over its memory
        budget (the closer looks again after each close)."""
        bounds = self.bounds
        if self._closed or not bounds.bounded:
            return
        live = [s for s in self._slots.values() if s.state != _CLOSING]
        # Closing runs ahead: places are kept free, so the next new tenants' requests open
        # their stores at once instead of waiting for others to close first.
        keep = max(bounds.max_open - closing_ahead(bounds.max_open), 1)
        excess = len(live) - keep if bounds.max_open > 0 else 0
        if bounds.memory_budget > 0 and excess <= 0:
            resident = resident_bytes()
            if resident is not None and resident > bounds.memory_budget:
                excess = 1
        if excess <= 0:
            return
        if not self._retire(excess):
            self._notice_over_budget(excess)

    def _retire(self, count: int) -> int:
        """(Under the lock.) Send up to ``count`` of the least used idle engines to the
        closer (fewest recent uses, then least recently used); returns how many were sent."""
        uses = self._uses
        idle = sorted(
            (uses[tenant], slot.used, tenant)
            for tenant, slot in self._slots.items()
            if slot.state == _OPEN and slot.users == 0 and tenant != DEFAULT_TENANT
        )
        for _, _, tenant in idle[:count]:
            slot = self._slots[tenant]
            slot.state = _CLOSING
            self._closes_pending += 1
            self._to_close.put((tenant, slot))
        if idle and self._closer is None:
            self._closer = threading.Thread(
                target=self._close_evicted, name="membrane-tenant-closer", daemon=True
            )
            self._closer.start()
        return len(idle[:count])

    def _notice_over_budget(self, excess: int) -> None:
        now = time.monotonic()
        if now - self._noticed_over_budget >= _OVER_BUDGET_NOTICE_SECONDS:
            self._noticed_over_budget = now
            log.warning(
                "%d open tenant stores, all in use: over the bound by %d (max_open_stores %d, "
                "memory_budget %d bytes) until requests end",
                sum(1 for s in self._slots.values() if s.state == _OPEN),
                excess,
                self.bounds.max_open,
                self.bounds.memory_budget,
            )

    def _close_evicted(self) -> None:
        """The closer thread: closes (and so checkpoints) evicted engines one by one, off
        the requests' threads; a request for a tenant being closed waits for its close."""
        while True:
            item = self._to_close.get()
            if item is None:
                return
            tenant, slot = item
            assert slot.engine is not None
            # Stores opened and closed all day: their large blocks must go back to the
            # system when they close, not stay in the heap (see keep_large_blocks_apart).
            # Not before the first close: a process with a few large stores keeps glibc's
            # faster default.
            keep_large_blocks_apart()
            try:
                slot.engine.close(replay_allowance=EVICTION_REPLAY_ALLOWANCE)
            except Exception:  # the next open catches up from the last good checkpoint
                log.exception("closing the store of tenant %s failed", tenant)
            with self._changed:
                if self._slots.get(tenant) is slot:
                    del self._slots[tenant]
                self.evicted += 1
                self._changed.notify_all()
            # After its place is given up: a request waiting for it does not wait for this.
            try:
                self._give_back_memory()
            finally:
                with self._changed:
                    self._closes_pending -= 1
                    self._changed.notify_all()
                    self._evict_if_over()

    def _give_back_memory(self) -> None:
        """(The closer's.) Hand freed memory back to the system if it was last done long
        enough ago, or now when the process is over its memory budget (so that what the
        budget is checked against is not memory already freed)."""
        now = time.monotonic()
        budget = self.bounds.memory_budget
        if now - self._trimmed < TRIM_INTERVAL_SECONDS:
            resident = resident_bytes() if budget > 0 else None
            if resident is None or resident <= budget:
                return
        give_back_freed_memory()
        self._trimmed = time.monotonic()

    # --- the rest ---------------------------------------------------------------------------

    def open_tenants(self) -> list[str]:
        """The tenants whose engines are open now, least recently used first."""
        with self._changed:
            return [
                tenant
                for _, tenant in sorted(
                    (slot.used, tenant)
                    for tenant, slot in self._slots.items()
                    if slot.state == _OPEN
                )
            ]

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait until no engine is being opened or closed (for tests and benchmarks)."""
        with self._changed:
            return self._changed.wait_for(
                lambda: (
                    self._closes_pending == 0
                    and all(s.state == _OPEN for s in self._slots.values())
                ),
                timeout,
            )

    def _empty_store(self) -> Membrane:
        """One empty in-memory store answers every read of a tenant without a store."""
        with self._changed:
            if self._empty is None:
                self._empty = Membrane.in_memory(embedder=None)
            return self._empty

    def on_open(self, hook: Callable[[Membrane], None]) -> None:
        """Runs ``hook`` on every engine opened from now on (and on those already open)."""
        with self._changed:
            self._on_open.append(hook)
            engines = [s.engine for s in self._slots.values() if s.state == _OPEN]
        for engine in engines:
            assert engine is not None
            hook(engine)

    def close(self) -> None:
        """Close every engine (after the servers have stopped: requests have ended); the
        evicted ones being closed finish first."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            closer = self._closer
        if closer is not None:
            self._to_close.put(None)
            closer.join()
        with self._changed:
            self._changed.wait_for(lambda: all(s.state != _OPENING for s in self._slots.values()))
            engines = [s.engine for s in self._slots.values() if s.engine is not None]
            self._slots = {}
            if self._empty is not None:
                engines.append(self._empty)
                self._empty = None
            self._changed.notify_all()
        for engine in engines:
            engine.close()

"""What every part of the :class:`~membrane_es.engine.Membrane` facade shares: the engine's
state and its construction, its read side and its command bus."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Unpack

# eventsourcing's IntegrityError: another writer took an aggregate's next version first.
from eventsourcing.persistence import IntegrityError as ConcurrentWrite

from membrane_es.commands import COMMAND_HANDLERS, Command
from membrane_es.commands.interpreter import Interpreter
from membrane_es.commands.resolution import ResolutionSettings
from membrane_es.embedding.default import resolve
from membrane_es.embedding.protocol import Embedder
from membrane_es.engine.checkpoints import Checkpoints
from membrane_es.engine.event_store_unit_of_work import EventStoreUnitOfWork
from membrane_es.engine.follower import LogFollower
from membrane_es.engine.options import (
    EngineOptions,
    OptionChoices,
    approximate_from,
    options_of,
)
from membrane_es.errors import (
    ConflictError,
    IntegrityError,
    MembraneError,
    PositionNotReachedError,
    ReadOnlyError,
    ValidationError,
)
from membrane_es.projections.read_model import ReadModel
from membrane_es.schema.predicates import PredicateVocabulary
from membrane_es.schema.records import TrustContext
from membrane_es.stores.event_times import EventTimeBehind
from membrane_es.stores.transfer import unfinished_import
from membrane_es.timekeeping.clock import MonotonicClock
from membrane_es.timekeeping.scheduler import PeriodicTask
from membrane_es.wiring.application import MemoryApplication

log = logging.getLogger("membrane_es")

# How often a command that lost an optimistic-concurrency race is retried from a fresh load,
# and the first pause before a retry (doubled each time, with full jitter, so writers in other
# processes that collided do not collide again in lock step).
CONFLICT_ATTEMPTS = 8
CONFLICT_BACKOFF_SECONDS = 0.002
# A write refused because the log already holds a later time is retried at once, up to this
# many times (each refusal means another process's write got through meanwhile).
OVERTAKEN_ATTEMPTS = 64
# How long a read waits for the views to reach a ``min_position`` unless told; and, on a
# store without a follower (LMDB shared by processes), how often it looks at the log again.
DEFAULT_POSITION_WAIT_SECONDS = 5.0
POSITION_RECHECK_SECONDS = 0.01
RECENT_EVENTS = 4096  # this engine's latest events kept for record_changes
_LEAST_PRIVILEGE = TrustContext()
# When a request says it happened: an aware datetime, RFC 3339 text, or None for now.
RequestTime = datetime | str | None


class EngineCore:
    """The engine's state (made here, in :meth:`__init__`), its read side and its command
    bus; the facade's parts build on it."""

    def __init__(
        self,
        app: MemoryApplication,
        options: EngineOptions | None = None,
        *,
        views_dir: Path | None = None,
        read_only: bool = False,
        verify_on_open: bool = False,
        discard_unfinished_import: bool = False,
        **choices: Unpack[OptionChoices],
    ) -> None:
        """An engine on ``app``, with ``options`` (the keyword arguments a caller gives,
        ``clock=…``, ``embedder=…``, build them over the defaults; see
        :class:`~membrane_es.engine.options.EngineOptions`). ``views_dir``: where the read
        views are checkpointed (None: nowhere, the log is replayed at each open).

        A store an import did not finish raises :class:`~membrane_es.errors.IntegrityError`
        (read-only too: it is not a damaged store to look into, but part of a file), unless
        ``discard_unfinished_import``: then what that import wrote is discarded first."""
        # What the caller chose (checked first: nothing is opened for a bad argument).
        options = options_of(options, choices)
        self._options: EngineOptions = options
        self._selection_threshold: float = float(options.selection_threshold)
        self._default_sensitivity: str = options.default_sensitivity
        self._interpreter: Interpreter | None = options.interpreter
        self._resolution = ResolutionSettings(
            on=options.resolve_writes,
            vocabulary=PredicateVocabulary.builtin().declared(
                single=options.single_valued, many=options.many_valued
            ),
        )
        self._app: MemoryApplication = app
        self._clock: MonotonicClock = options.clock or MonotonicClock()
        # resolved once the views say what the store holds
        self._embedder_choice = options.embedder
        self._embedder: Embedder | None = None
        # What the store takes where it is kept (set by the opener that knows where)
        self._measure: Callable[[], int] = _nothing_measured
        self._consolidation: PeriodicTask | None = None
        self._vector_reader: threading.Thread | None = None  # start_reading_vectors
        self._closing = threading.Event()  # set by close: background work stops
        self._read_only: bool = read_only
        self.damage: IntegrityError | None = None
        # Writes are serialised within the process; a batch's unit of work is per thread.
        self._write_lock = threading.RLock()
        self._batch = threading.local()
        self._closed = False
        self._follower: LogFollower | None = None
        self._checkpoint_task: PeriodicTask | None = None
        self._advanced = threading.Condition()  # notified whenever the views' position moves
        self._positions = threading.local()  # per thread: the log position of its last write
        # The aggregate ids of this engine's latest events, by log position: what
        # ``record_changes`` answers from without reading the log back.
        self._recent: deque[tuple[int, Any]] = deque(maxlen=RECENT_EVENTS)
        self._recent_lock = threading.Lock()
        chained = app.abilities.chained
        self._checkpoints: Checkpoints | None = None
        if views_dir is not None:
            self._checkpoints = (
                Checkpoints(views_dir, None)
                if chained is None
                else Checkpoints(views_dir, chained.hash_at, chained.chain.key)
            )
        # The read views are set by _open_views: the checkpoint's when it holds, else new
        # ones the log is replayed into (none are made before, to be thrown away when a
        # checkpoint loads: a tenant store's open would pay for them every time).
        self._views: ReadModel
        # What the checkpoint on disk holds (:meth:`_view_state`), None when there is none
        # this engine loaded or saved: a close that finds the views where the checkpoint
        # left them has nothing to save, so an idle store closes without writing.
        self._checkpointed: tuple[int, int, bool] | None = None
        try:
            if discard_unfinished_import and read_only:
                raise ValidationError(
                    "discard_unfinished_import", "a store opened read-only is never emptied"
                )
            self._settle_import(discard_unfinished_import)
        except BaseException:
            self._abandon()
            raise
        try:
            # Before the views: a checkpoint's vectors are read back under the records' keys,
            # and a forgotten record's, which a cut-short forget left, must not be among them.
            app.settle_erasures(finish=not read_only)
        except BaseException:
            self._abandon()
            raise
        try:
            self._open_views(verify_on_open)
        except IntegrityError as damage:
            if not read_only:
                self._abandon()
                raise
            # Forensics: the views hold what could be replayed before the damage (none
            # when the damage was found before any was).
            self.damage = damage
            if "_views" not in self.__dict__:
                self._views = ReadModel()
        except BaseException:
            self._abandon()
            raise
        # The views hold a row per record the log created: new records are numbered after.
        app.numbering.start(self._views.table.size)

    def _abandon(self) -> None:
        """Release what a failed open holds (the store may then be opened again)."""
        self._closed = True
        try:
            views: ReadModel | None = self.__dict__.get("_views")
            if views is not None:
                views.close()
        finally:
            self._app.close()

    def _settle_import(self, discard: bool) -> None:
        """Refuse a store an import did not finish, or (``discard``) empty it — its log, its
        keys and the views checkpointed from it — for the import to start over."""
        app = self._app
        if not app.import_unfinished():
            return
        if not discard:
            raise unfinished_import()
        discarded = app.discard_unfinished_import()
        if self._checkpoints is not None:  # views of a log that is gone
            ReadModel.discard(self._checkpoints.directory)
        log.warning(
            "an import into this store did not finish: the %d events it wrote, and its keys, "
            "were discarded",
            discarded,
        )

    def _open_views(self, verify_on_open: bool) -> None:
        """Load the sealed checkpoint and replay what follows it (each event checked against
        the chain); with ``verify_on_open``, first walk the whole chain. A damaged log raises
        :class:`~membrane_es.errors.IntegrityError` naming the first bad notification."""
        app = self._app
        verifier = app.abilities.verifier
        if verify_on_open and verifier is not None:
            report = verifier.verify()
            if not report.ok:
                raise IntegrityError(
                    f"the log fails verification: {report}", report.notification_id
                )
        loaded = self._checkpoints.load(app) if self._checkpoints is not None else None
        max_id = app.recorder.max_notification_id() or 0
        if loaded is not None and loaded.position > max_id:
            # The checkpoint is ahead of this log (a different or restored store): start over.
            loaded.close()
            loaded = None
        self._views = loaded if loaded is not None else ReadModel()
        # Before its catch-up: takes up the checkpoint's approximate index (if it kept one).
        self._views.embeddings.keep_approximate(approximate_from(self._options))
        if loaded is not None:
            self._checkpointed = self._view_state()
        self._views.catch_up(app)
        index = self._views.embeddings
        stored = index.model if index.dimensions else ""
        self._embedder = embedder = resolve(self._embedder_choice, stored)
        if embedder is not None and index.dimensions and index.model != embedder.model:
            raise MembraneError(
                f"this store's vectors were made by {index.model!r}; "
                f"open it with that embedder, not {embedder.model!r}"
            )
        last = app.last_event_time()
        if last is not None:
            self._clock.observe(last)
            # A log chained after the fact (PostgreSQL) has a head that never recorded its
            # events' times, which only the application can decode: give it the newest, so
            # every process's next write is checked against it.
            time_keeper = app.abilities.time_keeper
            if time_keeper is not None:
                time_keeper.observe_event_time(last)

    def _view_state(self) -> tuple[int, int, bool]:
        """Where the views stand, as a checkpoint of them would record it: their log
        position, the entries view's (-1 before that view is built) and whether the
        approximate index is built (a checkpoint then keeps it whole)."""
        views = self._views
        entries = views.entries
        built = views.embeddings.approximate_live() is not None
        return views.position, -1 if entries is None else entries.position, built

    @property
    def embedder(self) -> Embedder | None:
        """The embedder new records and task descriptors are read with (None: no vectors;
        ranking uses words and salience only)."""
        return self._embedder

    @property
    def views(self) -> ReadModel:
        """The read side. Caught up with the log at each call, unless a follower applies
        other processes' writes as they commit (PostgreSQL): then as it stands, which a read
        that must include a given write asks for with ``min_position``."""
        follower = self._follower
        if follower is None or not follower.following:
            self._views.catch_up(self._app)
        return self._views

    def _recent_keys(self, after: int, position: int) -> Sequence[Any] | None:
        """The aggregate ids of the events after ``after`` up to ``position``, in log order,
        if this engine wrote every one of them and still remembers them (else None)."""
        keys: list[Any] = []
        with self._recent_lock:
            expected = position
            for at, key in reversed(self._recent):
                if at > position:
                    continue
                if at <= after:
                    break
                if at != expected:
                    return None  # another process wrote in between
                keys.append(key)
                expected -= 1
        if expected != after:
            return None
        keys.reverse()
        return keys

    def _close_parts(self) -> None:
        """Release what a part of the facade holds of its own (the store closes after)."""

    @property
    def last_position(self) -> int | None:
        """The log position of the last write made through this engine by the calling thread
        (its last event's notification id; for a write that changed nothing, the position
        this engine had reached). None before its first write. Pass it as ``min_position``
        to a read on any engine of the same log to read that write."""
        position: int | None = getattr(self._positions, "last", None)
        return position

    @property
    def position(self) -> int:
        """The log position the read views reflect (every event up to it, none after)."""
        return self._views.position

    def wait_for_position(
        self, position: int | None, timeout: float = DEFAULT_POSITION_WAIT_SECONDS
    ) -> None:
        """Return once the read views reflect the log up to ``position`` (None: at once);
        :class:`~membrane_es.errors.PositionNotReachedError` if they have not after
        ``timeout`` seconds."""
        if position is None:
            return
        wanted = check_position(position)
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            follower = self._follower
            following = follower is not None and follower.following
            if not following:
                self._views.catch_up(self._app)  # no follower brings the log in
            with self._advanced:
                reached = self._advanced.wait_for(
                    lambda: self._views.position >= wanted,
                    timeout=max(deadline - time.monotonic(), 0.0) if following else 0.0,
                )
            if reached:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise PositionNotReachedError(wanted, self._views.position, timeout)
            if not following:
                # Only another process can write it, and nothing here hears of that (an
                # LMDB store shared on one host): look at the log again shortly.
                time.sleep(min(POSITION_RECHECK_SECONDS, left))

    def wait_for_index(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (None: as long as it takes) for the approximate
        index to be built, starting its build if it is due (and, for an index a checkpoint
        kept, for the vectors its candidates are scored with to be read back); True once it
        is ready or none is due. Reads never wait for it (they search as without it, or
        fetch their candidates' vectors from the log, meanwhile)."""
        return self._views.embeddings.wait_approximate(timeout)

    def _views_moved(self, views: ReadModel, event: Any | None) -> None:
        """The follower applied an event (or caught up): wake readers waiting for a
        position, and keep the clock ahead of other processes' event times."""
        if event is not None:
            self._clock.observe(event.timestamp)
        with self._advanced:
            self._advanced.notify_all()

    def _followed(self, uow: EventStoreUnitOfWork) -> None:
        """Apply a unit of work's writes to the views; note its position for this thread."""
        self._views.follow(uow.recordings, self._app)
        recordings = uow.recordings
        with self._recent_lock:
            self._recent.extend(
                (recording.notification.id, recording.notification.originator_id)
                for recording in recordings
            )
        self._positions.last = (
            recordings[-1].notification.id if recordings else self._views.position
        )
        with self._advanced:
            self._advanced.notify_all()

    # --- the command bus ------------------------------------------------------------------

    def handle(self, command: Command) -> Any:
        """Run one command; inside :meth:`batch` its events join the batch's single write."""
        handler = COMMAND_HANDLERS[type(command)]
        self._check_writable()
        batch: EventStoreUnitOfWork | None = getattr(self._batch, "uow", None)
        if batch is not None:
            return handler(command, batch)
        lost, overtaken = 0, 0
        while True:
            with self._write_lock:
                uow = self._unit_of_work()
                uow.deferred = command.one_write
                try:
                    try:
                        result = handler(command, uow)
                        uow.commit()  # what a one-write command saved (else already written)
                    except BaseException:
                        if uow.recordings:  # written before a later step failed: still read
                            self._followed(uow)
                        raise
                    self._followed(uow)  # callers read their own writes
                    return result
                except EventTimeBehind as error:
                    # Another process wrote a later time meanwhile (its clock is ahead): ours
                    # passes the log's newest time and the command runs again at once. Each
                    # such refusal means another write got through, so this ends.
                    self._clock.observe(error.log_time)
                    overtaken += 1
                    if overtaken < OVERTAKEN_ATTEMPTS:
                        continue
                    raise ConflictError(
                        f"{type(command).__name__} was overtaken {overtaken} times by writers "
                        "with later clocks"
                    ) from None
                except ConcurrentWrite:
                    # Another writer (another process) saved first: reload and try again.
                    lost += 1
                    if lost == CONFLICT_ATTEMPTS:
                        raise ConflictError(
                            f"{type(command).__name__} lost {lost} races with concurrent writers"
                        ) from None
            time.sleep(random.uniform(0, CONFLICT_BACKOFF_SECONDS * 2 ** (lost - 1)))

    def _check_writable(self) -> None:
        if self._read_only:
            raise ReadOnlyError("the store was opened read-only: writes are refused")

    def _unit_of_work(self) -> EventStoreUnitOfWork:
        return EventStoreUnitOfWork(
            self._app,
            self._clock,
            self._embedder,
            self._views,
            self._interpreter,
            self._resolution,
        )

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run many commands as one atomic, durable write (one commit for all of them).

        Inside the block every write returns as usual; nothing is visible to other readers
        until the block ends, and if it raises, none of it is written.
        """
        if getattr(self._batch, "uow", None) is not None:
            raise MembraneError("batches do not nest")
        self._check_writable()
        with self._write_lock:
            uow = self._unit_of_work()
            uow.deferred = True
            self._batch.uow = uow
            try:
                yield
                try:
                    uow.commit()
                    self._followed(uow)
                except EventTimeBehind as error:
                    self._clock.observe(error.log_time)  # a retried batch passes it
                    raise ConflictError(
                        "another process wrote events timed after this batch's; nothing was written"
                    ) from None
                except ConcurrentWrite:
                    raise ConflictError(
                        "another writer changed a record this batch revised; nothing was written"
                    ) from None
            except BaseException:
                uow.rollback()
                raise
            finally:
                self._batch.uow = None


def check_position(position: object) -> int:
    """A log position a caller asks for: a whole number, at least 0."""
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise ValidationError("min_position", f"must be a log position (>= 0): {position!r}")
    return position


def _nothing_measured() -> int:
    return 0

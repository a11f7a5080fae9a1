"""What every part of the :class:`~membrane_es.engine.Membrane` facade shares: the engine's
state (set up by :class:`~membrane_es.engine.lifecycle.Lifecycle`), its read side and its
command bus."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from eventsourcing.persistence import IntegrityError

from membrane_es.application import EventStoreUnitOfWork, MemoryApplication
from membrane_es.clock import MonotonicClock
from membrane_es.commands import COMMAND_HANDLERS, Command
from membrane_es.commands.interpreter import Interpreter
from membrane_es.embedding.protocol import Embedder
from membrane_es.errors import ConflictError, MembraneError, ValidationError
from membrane_es.projections.read_model import ReadModel
from membrane_es.scheduler import PeriodicTask
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext

# How often a command that lost an optimistic-concurrency race is retried from a fresh load,
# and the first pause before a retry (doubled each time, with full jitter, so writers in other
# processes that collided do not collide again in lock step).
CONFLICT_ATTEMPTS = 8
CONFLICT_BACKOFF_SECONDS = 0.002
_LEAST_PRIVILEGE = TrustContext()
Timestamp = datetime | str | None  # a request time: aware datetime, RFC 3339 text, or now


class EngineCore:
    """The engine's state, its read side and its command bus; the facade's parts build on it."""

    _app: MemoryApplication
    _clock: MonotonicClock
    _embedder: Embedder | None
    _views_dir: Path | None
    _views: ReadModel
    _interpreter: Interpreter | None
    _selection_threshold: float
    _default_sensitivity: str
    _consolidation: PeriodicTask | None
    _write_lock: threading.RLock
    _batch: threading.local
    _closed: bool

    @property
    def embedder(self) -> Embedder | None:
        """The embedder new records and task descriptors are read with (None: no vectors;
        ranking uses words and salience only)."""
        return self._embedder

    @property
    def views(self) -> ReadModel:
        """The read side, caught up with the log (writes by other processes included)."""
        self._views.catch_up(self._app)
        return self._views

    # --- the command bus ------------------------------------------------------------------

    def handle(self, command: Command) -> Any:
        """Run one command; inside :meth:`batch` its events join the batch's single write."""
        handler = COMMAND_HANDLERS[type(command)]
        batch: EventStoreUnitOfWork | None = getattr(self._batch, "uow", None)
        if batch is not None:
            return handler(command, batch)
        for attempt in range(CONFLICT_ATTEMPTS):
            with self._write_lock:
                uow = self._unit_of_work()
                try:
                    result = handler(command, uow)
                    self._views.follow(uow.recordings, self._app)  # callers read their own writes
                    return result
                except IntegrityError:
                    # Another writer (another process) saved first: reload and try again.
                    if attempt == CONFLICT_ATTEMPTS - 1:
                        break
            time.sleep(random.uniform(0, CONFLICT_BACKOFF_SECONDS * 2**attempt))
        raise ConflictError(
            f"{type(command).__name__} lost {CONFLICT_ATTEMPTS} races with concurrent writers"
        )

    def _unit_of_work(self) -> EventStoreUnitOfWork:
        return EventStoreUnitOfWork(
            self._app, self._clock, self._embedder, self._views, self._interpreter
        )

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run many commands as one atomic, durable write (one commit for all of them).

        Inside the block every write returns as usual; nothing is visible to other readers
        until the block ends, and if it raises, none of it is written.
        """
        if getattr(self._batch, "uow", None) is not None:
            raise MembraneError("batches do not nest")
        with self._write_lock:
            uow = self._unit_of_work()
            uow.deferred = True
            self._batch.uow = uow
            try:
                yield
                try:
                    uow.commit()
                    self._views.follow(uow.recordings, self._app)
                except IntegrityError:
                    raise ConflictError(
                        "another writer changed a record this batch revised; nothing was written"
                    ) from None
            except BaseException:
                uow.rollback()
                raise
            finally:
                self._batch.uow = None


def _check_default_sensitivity(value: str) -> str:
    """The configured default must be a sensitivity level (the reference refuses to start)."""
    if value not in Sensitivity.__members__.values():
        raise ValidationError("default_sensitivity", f'invalid default sensitivity "{value}"')
    return str(value)

"""The facade's consolidation (spec §5.5): once, or on a schedule."""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from membrane_es.commands import messages
from membrane_es.commands.extractor import Extractor
from membrane_es.engine.core import (
    EngineCore,
)
from membrane_es.errors import MembraneError
from membrane_es.projections.vector_read_back import start_read_back
from membrane_es.schema.results import ConsolidationResult
from membrane_es.timekeeping.scheduler import PeriodicTask

log = logging.getLogger("membrane_es")


class Maintenance(EngineCore):
    """Consolidation runs, now or on a background thread; vectors read back in the
    background."""

    # --- vectors a checkpoint left in the log -------------------------------------------------

    def start_reading_vectors(self) -> threading.Thread | None:
        """Read back, on a background thread, the vectors an open from a checkpoint left in
        the log (a scope's are otherwise read by its first search), one scope at a time,
        until done or :meth:`close` — what a server does after it starts, so its first
        searches find them read. A search meanwhile that needs a scope not read yet reads it
        itself (after the scope being read); writes go on, applied to a block once it is read.
        Returns the running thread, or None when no vector is left in the log (a new store,
        one with no vectors, or one whose blocks are read already): no thread is started."""
        if self._vector_reader is not None:
            raise MembraneError("vectors are already being read back")
        closing = self._closing
        thread = start_read_back(self._views.embeddings, closing.is_set, "membrane-vectors")
        self._vector_reader = thread
        return thread

    # --- consolidation (spec §5.5) ----------------------------------------------------------

    def consolidate(
        self, *, now: datetime | None = None, extractor: Extractor | None = None
    ) -> ConsolidationResult:
        """Consolidate once: compress old episodes, extract facts, skills and plan graphs.

        Idempotent: a run does only what no earlier run did (each episode is compressed
        once; a fact or skill is reinforced once per source episode; each plan is extracted
        once), so running it again right away changes nothing and returns zero counters.
        Each derived record with its relations is one atomic write; a failure stops the run
        and keeps what was written before it (the next run picks up the rest).

        :param now: the moment episode ages are measured at (default: now).
        :param extractor: reads each episode's text and proposes subject–predicate–object
            facts (an LLM, rules…); see :class:`~membrane_es.commands.extractor.Extractor`.
        """
        result: ConsolidationResult = self.handle(
            messages.Consolidate(now=now, extractor=extractor)
        )
        return result

    def start_consolidation(
        self, interval_seconds: float, *, extractor: Extractor | None = None
    ) -> PeriodicTask:
        """Consolidate every ``interval_seconds`` on a background thread until :meth:`close`
        (the reference daemon's default is every 6 hours). Returns the running task."""
        if self._consolidation is not None:
            raise MembraneError("consolidation is already scheduled")
        task = PeriodicTask(
            "membrane-consolidation",
            interval_seconds,
            lambda: self.consolidate(extractor=extractor),
        )
        self._consolidation = task
        task.start()
        return task

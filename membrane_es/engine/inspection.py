"""The facade's figures about a store rather than its records: the events its log holds, the
bytes it takes, its records by state and by the day they were written, the links pointing
at a record — what ``membrane-es stats`` and the inspector show, asked of the engine, so no
edge reads the log, the store's files or the read views itself."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from membrane_es.engine.core import EngineCore
from membrane_es.projections.record_table import STATUS_CONTESTED
from membrane_es.projections.timecodes import from_micros, micros
from membrane_es.schema.validation import check_id, check_limit, check_moment

DAY_MICROS = 86_400 * 1_000_000


@dataclass(frozen=True, slots=True)
class Census:
    """The records at ``moment`` by state — ``active``, ``contested``, ``hidden`` (faded out
    or past their age), ``retracted`` — and ``per_day``: (day, records written) for each of
    the days up to the moment, oldest first."""

    moment: datetime
    by_state: dict[str, int]
    per_day: list[tuple[datetime, int]]


class Inspection(EngineCore):
    """Figures about the store as a whole."""

    def event_count(self, *, as_of: datetime | None = None) -> int:
        """How many events the log holds now, or held at ``as_of`` (its position then)."""
        if as_of is None:
            return self._app.recorder.max_notification_id() or 0
        return self._app.position_at(check_moment("as_of", as_of))

    @property
    def vector_model(self) -> str:
        """The model the store's vectors were made by ("" while it holds none): a store is
        searched by meaning only with an embedder of that model."""
        index = self.views.embeddings
        return index.model if index.dimensions else ""

    def stored_bytes(self) -> int:
        """What the store takes where it is kept: an LMDB store's files (its views and key
        store included), a PostgreSQL store's tables with their indexes; 0 in memory."""
        return self._measure()

    def census(self, *, as_of: datetime | None = None, days: int = 30) -> Census:
        """The records by state now (or at ``as_of``), and written per day over the ``days``
        days up to then, from the read views' columns (every record counted, as
        :meth:`get_metrics` counts them)."""
        check_limit("days", days, low=1, high=36_500)
        moment = self._clock.now() if as_of is None else check_moment("as_of", as_of)
        at = micros(moment)
        views = self.views
        with views.lock:
            table = views.table
            state = table.state_now() if as_of is None else table.state_at(at)
            size = state.size
            rows = slice(0, size)
            retracted = np.asarray(state.columns["retracted"][rows], dtype=bool)
            contested = np.asarray(state.columns["status"][rows]) == STATUS_CONTESTED
            hidden = np.asarray(table.hidden(rows, at, state), dtype=bool)
            written = np.array(table.content["tx_time"][:size], copy=True)
        by_state = {
            "active": int((~retracted & ~contested & ~hidden).sum()),
            "contested": int((contested & ~retracted & ~hidden).sum()),
            "hidden": int((hidden & ~retracted).sum()),
            "retracted": int(retracted.sum()),
        }
        last_day = at // DAY_MICROS
        edges = np.arange(last_day - days + 1, last_day + 2, dtype=np.int64) * DAY_MICROS
        counts, _ = np.histogram(written, bins=edges)
        per_day = [
            (from_micros(int(start)), int(count))
            for start, count in zip(edges[:-1], counts, strict=True)
        ]
        return Census(moment, by_state, per_day)

    def relations_to(self, record_id: str) -> list[tuple[str, str]]:
        """(source id, predicate) of every relation another record holds to ``record_id``,
        as the latest version of each source says (read a source ``as_of`` a moment to know
        whether it held the relation then). No trust applies: the ids are what a caller then
        reads, each under its own trust."""
        check_id("id", record_id)
        views = self.views
        with views.lock:
            return list(views.graph.sources(record_id))

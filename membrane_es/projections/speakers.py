"""Who said each conversation turn: the rows of each speaker's turns.

A question that names a participant ("Where has Melanie camped?") is answered by what that
participant said: retrieval counts "said by someone the task names" as evidence
(:mod:`membrane_es.queries.ranking`). A speaker is named when every word of the name is a word
of the task (the one tokenizer: :mod:`membrane_es.projections.tokens`).

The map is replaced whole by a write, so a search reading without the lock sees one state.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.tokens import tokens

Array = npt.NDArray[Any]


class SpeakerIndex:
    def __init__(self) -> None:
        # speaker's name (as first written) -> its terms, rows of its turns (ascending)
        self._rows: dict[str, tuple[frozenset[str], Array]] = {}
        self._names: dict[str, str] = {}  # casefolded name -> the name as first written

    def __len__(self) -> int:
        return len(self._rows)

    def add_many(self, turns: list[tuple[int, str]]) -> None:
        """Note each ``(row, speaker)``; rows ascending, after every row noted before."""
        if not turns:
            return
        rows = dict(self._rows)
        for row, speaker in turns:
            name = self._names.setdefault(speaker.casefold(), speaker)
            terms, held = rows.get(name, (frozenset(tokens(name)), np.zeros(0, dtype=np.int64)))
            rows[name] = (terms, np.append(held, row))
        self._rows = rows

    def remove(self, gone: list[int]) -> None:
        """Forget these rows (erasure)."""
        rows = {}
        for name, (terms, held) in self._rows.items():
            kept = held[~np.isin(held, gone)]
            if len(kept):
                rows[name] = (terms, kept)
        self._rows = rows

    def named_in(self, task_terms: set[str]) -> Array:
        """Rows of the turns of every speaker the task names (ascending, unique)."""
        found = [held for terms, held in self._rows.values() if terms and terms <= task_terms]
        if not found:
            return np.zeros(0, dtype=np.int64)
        return np.unique(np.concatenate(found))

    def saved(self) -> dict[str, list[int]]:
        return {name: held.tolist() for name, (_, held) in self._rows.items()}

    def restore(self, saved: dict[str, list[int]]) -> None:
        self._names = {name.casefold(): name for name in saved}
        self._rows = {
            name: (frozenset(tokens(name)), np.asarray(rows, dtype=np.int64))
            for name, rows in saved.items()
        }

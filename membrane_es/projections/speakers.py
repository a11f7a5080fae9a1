"""Who said each conversation turn: the rows of each speaker's turns.

A question that names a participant ("Where has Melanie camped?") is answered by what that
participant said: retrieval counts "said by someone the task names" as evidence
(:mod:`membrane_es.queries.ranking`). A speaker is named when every word of the name is a word
of the task (the one tokenizer: :mod:`membrane_es.projections.tokens`).

A chat's turns carry roles, not names (``user`` and ``assistant``, or ``human`` and ``ai``),
and an agent searches its memory for what its user says: in "How many kitchen items did I
fix?" the first person is the user, in "What did you recommend?" the second person is the
assistant. A task in the first person names the user's roles, one in the second person the
assistant's; a conversation between named people is not touched (no speaker is called that).

The map is replaced whole by a write, so a search reading without the lock sees one state.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import numpy.typing as npt

from membrane_es.projections.tokens import tokens

Array = npt.NDArray[Any]

# Who "I" and "you" are in a task put to a chat's memory (see above). Words are read as
# lower-case runs of letters, so "I'm", "I've" and "you're" count as "i" and "you".
FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself"})
SECOND_PERSON = frozenset({"you", "your", "yours", "yourself"})
USER_ROLES = frozenset({"user", "human"})
ASSISTANT_ROLES = frozenset({"assistant", "ai"})
_WORD = re.compile(r"[^\W\d_]+")


def roles_named(descriptor: str) -> frozenset[str]:
    """The chat roles a task names by person: the user's for the first person, the
    assistant's for the second (casefolded role names)."""
    words = set(_WORD.findall(descriptor.casefold()))
    roles: frozenset[str] = frozenset()
    if words & FIRST_PERSON:
        roles |= USER_ROLES
    if words & SECOND_PERSON:
        roles |= ASSISTANT_ROLES
    return roles


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

    def named_in(self, descriptor: str) -> Array:
        """Rows of the turns of every speaker the task names, by name or, for a chat's roles,
        by person (ascending, unique)."""
        task_terms = set(tokens(descriptor))
        roles = roles_named(descriptor)
        found = [
            held
            for name, (terms, held) in self._rows.items()
            if (terms and terms <= task_terms) or name.casefold() in roles
        ]
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

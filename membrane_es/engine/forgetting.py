"""The facade's erasure: forget a record's content for good (crypto-shredding)."""

from __future__ import annotations

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.commands import messages
from membrane_es.engine.core import EngineCore

# The event that erases a record's content, by the name a record's history gives it.
FORGOTTEN_EVENT = RecordAggregate.Forgotten.__name__


class Forgetting(EngineCore):
    """Erase records' content while the log stays append-only."""

    def forget(self, record_id: str, actor: str, rationale: str) -> list[str]:
        """Erase the content of ``record_id`` — payload, tags, provenance, interpretation, its
        creation rationale and its vector — for good, and that of the records derived from it
        alone (see :mod:`membrane_es.commands.erasure`); returns the ids forgotten, the record
        asked for first.

        The record's key is destroyed (its sealed content in the log, and in every backup of
        the log, can no longer be read) and a ``Forgotten`` event records who did it, why and
        when. From then on every read — now, ``as_of`` any earlier moment, ``history`` —
        returns the record redacted (its id, type, sensitivity, scope, scores, times,
        relations and audit trail), and its text, vector and entity names leave the views.

        A forget cut short — a crash, a full disk, Ctrl-C — either erased nothing (its events
        were not saved: call it again) or is finished by the next open of the store for
        writing, or by calling it again, which then destroys the keys left and returns those
        records (see :mod:`membrane_es.commands.erasure`); ``verify`` names such records.

        Raises :class:`~membrane_es.errors.NotFoundError` for an unknown id,
        :class:`~membrane_es.errors.ForgottenError` for a record already forgotten (and
        nothing left to destroy), and
        :class:`~membrane_es.errors.ErasureUnsupportedError` for a record written before
        per-record keys (its content is unsealed in the log; nothing is written). Not
        allowed inside :meth:`batch`.
        """
        forgotten: list[str] = self.handle(
            messages.Forget(record_id=record_id, actor=actor, rationale=rationale)
        )
        return forgotten

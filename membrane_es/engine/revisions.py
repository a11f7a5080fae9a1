"""The facade's revision writes (reference SDK names and signatures)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from membrane_es.commands import messages
from membrane_es.commands.messages import RecordInput
from membrane_es.engine.core import (
    EngineCore,
)
from membrane_es.schema.records import MemoryRecord
from membrane_es.schema.validation import VectorInput, check_vector


class Revisions(EngineCore):
    """Create, revise and relate records."""

    # --- writes (reference SDK names and signatures) --------------------------------------

    def create_record(
        self,
        record: RecordInput,
        *,
        actor: str = "system",
        rationale: str = "Initial creation",
        embedding: VectorInput | None = None,
        embed: bool = True,
        resolve: bool | None = None,
    ) -> MemoryRecord:
        """Store a record as given (the reference's direct create); returns it as stored.

        A semantic, entity or competence record is resolved on write (unless ``resolve`` is
        False, or None and the store's ``resolve_writes`` is off; never when the record
        carries an id of its own): one matching an active record of its type, scope and
        sensitivity reinforces that record, which is returned instead, marked
        ``resolution.outcome == "reinforced"``; a fact changing the value of a single-valued
        predicate supersedes the old one (``"superseded"``). See
        :mod:`membrane_es.commands.resolution`.

        :param embedding: the record's own vector (else the engine's embedder makes one).
        :param embed: False stores the record without a vector, whatever the embedder: for
            records only ever read by id or listed (an adapter's bookkeeping), which would
            otherwise pay a model call each. They are still found by their words.
        """
        result: MemoryRecord = self.handle(
            messages.CreateRecord(
                record=record,
                actor=actor,
                rationale=rationale,
                embedding=None if embedding is None else check_vector("embedding", embedding),
                embed=embed,
                resolve=resolve,
            )
        )
        return result

    def declare_predicates(
        self, *, single: Sequence[str] = (), many: Sequence[str] = ()
    ) -> dict[str, list[str]]:
        """Declare predicates single-valued (a new value supersedes the old) or many-valued
        (values accumulate), for this engine's writes from now on; returns the whole
        vocabulary (``{"single": [...], "many": [...]}``). A predicate declared before is
        declared again as said. See :mod:`membrane_es.schema.predicates`."""
        settings = self._resolution
        vocabulary = settings.vocabulary.declared(single=single, many=many)
        self._resolution = dataclasses.replace(settings, vocabulary=vocabulary)
        return vocabulary.listed()

    def predicates(self) -> dict[str, list[str]]:
        """The predicate vocabulary resolution on write uses: ``{"single": …, "many": …}``."""
        return self._resolution.vocabulary.listed()

    def supersede(
        self,
        old_id: str,
        new_record: RecordInput,
        actor: str,
        rationale: str,
        *,
        embedding: VectorInput | None = None,
        widen: bool = False,
    ) -> MemoryRecord:
        """Replace ``old_id`` by ``new_record``; the old one is retracted, nothing deleted.

        The new record never reaches callers who could not read the old one: without a scope
        it takes the old record's, its sensitivity is at least the old one's, and another
        scope is refused (:class:`~membrane_es.errors.ValidationError` on
        ``new_record.scope``) unless ``widen`` is True — the explicit choice to make it
        readable more widely, as given.

        :param embedding: the new record's own vector (else the engine's embedder makes one).
        """
        result: MemoryRecord = self.handle(
            messages.Supersede(
                old_id=old_id,
                new_record=new_record,
                actor=actor,
                rationale=rationale,
                embedding=None if embedding is None else check_vector("embedding", embedding),
                widen=widen,
            )
        )
        return result

    def fork(
        self,
        source_id: str,
        forked_record: RecordInput,
        actor: str,
        rationale: str,
        *,
        widen: bool = False,
    ) -> MemoryRecord:
        """Derive a conditional variant of ``source_id``; both stay active. Its reach is the
        source's unless ``widen`` (as for :meth:`supersede`)."""
        result: MemoryRecord = self.handle(
            messages.Fork(
                source_id=source_id,
                forked_record=forked_record,
                actor=actor,
                rationale=rationale,
                widen=widen,
            )
        )
        return result

    def retract(
        self,
        record_id: str,
        actor: str,
        rationale: str,
        *,
        valid_until: datetime | None = None,
    ) -> None:
        """Withdraw a record: salience 0, excluded from active reads, kept in history.

        :param valid_until: when what it says stopped being true, if not now (kept in the
            event; the entries API reports it as the entry's ``valid_to``).
        """
        self.handle(
            messages.Retract(
                record_id=record_id, actor=actor, rationale=rationale, valid_until=valid_until
            )
        )

    def merge(
        self,
        record_ids: list[str],
        merged_record: RecordInput,
        actor: str,
        rationale: str,
        *,
        widen: bool = False,
    ) -> MemoryRecord:
        """Combine records into one; every source is retracted, all in one atomic write.

        The merged record takes the sources' common scope when it names none and at least
        their highest sensitivity; sources in different scopes, or a scope of its own, are
        refused unless ``widen`` (as for :meth:`supersede`)."""
        result: MemoryRecord = self.handle(
            messages.Merge(
                record_ids=record_ids,
                merged_record=merged_record,
                actor=actor,
                rationale=rationale,
                widen=widen,
            )
        )
        return result

    def contest(self, record_id: str, contesting_ref: str, actor: str, rationale: str) -> None:
        """Flag conflicting evidence (``contesting_ref``: an existing record id, or "")."""
        self.handle(
            messages.Contest(
                record_id=record_id, contesting_ref=contesting_ref, actor=actor, rationale=rationale
            )
        )

    def reinforce(self, record_id: str, actor: str, rationale: str) -> None:
        """The record helped: salience + its gain (capped at 1), decay clock reset."""
        self.handle(messages.Reinforce(record_id=record_id, actor=actor, rationale=rationale))

    def penalize(self, record_id: str, amount: float, actor: str, rationale: str) -> None:
        """The record misled: salience − ``amount`` (never below its floor)."""
        self.handle(
            messages.Penalize(record_id=record_id, amount=amount, actor=actor, rationale=rationale)
        )

    def add_relation(
        self,
        source_id: str,
        predicate: str,
        target_id: str,
        *,
        weight: float = 1.0,
        inverse: str = "",
        actor: str = "system",
        rationale: str = "",
    ) -> None:
        """Relate two existing records (and, with ``inverse``, the target back), atomically."""
        self.handle(
            messages.AddRelation(
                source_id=source_id,
                predicate=predicate,
                target_id=target_id,
                weight=weight,
                inverse=inverse,
                actor=actor,
                rationale=rationale,
            )
        )

    def record_outcome(
        self, record_id: str, status: str, *, actor: str = "system", rationale: str = ""
    ) -> None:
        """Attach an outcome (``success``, ``failure``, ``partial``) to an episodic record."""
        self.handle(
            messages.RecordOutcome(
                record_id=record_id, status=status, actor=actor, rationale=rationale
            )
        )

    def pin(self, record_id: str, *, actor: str = "system", rationale: str = "") -> None:
        """Exempt a record from decay-based hiding."""
        self.handle(messages.Pin(record_id=record_id, actor=actor, rationale=rationale))

    def unpin(self, record_id: str, *, actor: str = "system", rationale: str = "") -> None:
        self.handle(messages.Unpin(record_id=record_id, actor=actor, rationale=rationale))

"""Erasure: forget a record's content for good, while the log stays append-only.

The content of every record is sealed in the log under its own key
(:mod:`membrane_es.aggregates.sealing`). Forgetting destroys that key — after which the sealed
bytes, in the log and in every backup of it, are noise — and appends a ``Forgotten`` event
saying who did it, why and when. Records that came into being from the forgotten one alone
(capture's derived facts and new entities, consolidation's derived records) go with it, each
with its own ``Forgotten`` event naming the record it went with; all the events are one write.

"From it alone": a record is taken along when it was *created* with an evidence edge
(``derived_from`` or ``mentioned_in``) to a record being forgotten, and every evidence edge
it has points to a record being (or already) forgotten. An entity also mentioned by a record
that stays, or a fact derived from two episodes of which one stays, is kept.

The order of the steps, and what a crash (a kill, a full disk, Ctrl-C) between them leaves.
The keys live in a store apart from the log, so no single write can destroy them and save the
events; the order decides what an interruption leaves:

1. The keys are *doomed*: noted in the key store, durably, with their records.
   Interrupted before or here: nothing is erased; the record reads as before.
2. The ``Forgotten`` events are saved, all in one write (and synced).
   Interrupted here: every read — in this process, in every other, after a restart —
   shows the records redacted and the views drop their text, vector and names, because
   they follow the events; but the keys are still in the key store. The next read-write
   open of the store destroys them (see :meth:`MemoryApplication.settle_erasures
   <membrane_es.wiring.application.MemoryApplication.settle_erasures>`), as does ``forget`` again;
   until then every process withholds a doomed key whose events are saved, and ``verify``
   names the records.
3. The keys are destroyed, then their notes dropped.

The other order (keys first, as releases before this one did) leaves, when interrupted, a
record with no ``Forgotten`` event whose key is gone: nothing tells the views, the record
cache or another process holding the key in memory to let go of the content, and the lost
key looks like a damaged key store, whose cure — restoring ``keys.sqlite`` from a backup —
brings the content back. Here the log says first, and says for good, that the content is
to be gone; destroying the keys follows and is finished if cut short. ``forget`` on a record
left that way by an earlier release completes it: its events are saved and its (already
destroyed) key destroyed again.
"""

from __future__ import annotations

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.commands.messages import Forget
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.errors import ErasureUnsupportedError, ForgottenError, ValidationError
from membrane_es.schema.enums import GraphPredicate
from membrane_es.schema.validation import check_id, check_text

# Edges from a record to what it was made from or found in.
EVIDENCE = (GraphPredicate.DERIVED_FROM.value, GraphPredicate.MENTIONED_IN.value)


def forget(cmd: Forget, uow: UnitOfWork) -> list[str]:
    """Forget ``cmd.record_id`` and what was derived from it alone; returns the ids forgotten
    (the record asked for first, then the cascade in the order found)."""
    check_id("id", cmd.record_id)
    for field, value in (("actor", cmd.actor), ("rationale", cmd.rationale)):
        check_text(field, value)
        if not value.strip():  # an erasure always says who did it and why
            raise ValidationError(field, "required")
    target = uow.get(cmd.record_id)
    if target.state.forgotten:
        # Forgotten in the log: an erasure cut short after step 2 leaves keys to destroy.
        left = uow.keys_left(cmd.record_id)
        if not left:
            raise ForgottenError(cmd.record_id)
        uow.destroy_keys(list(left.values()))
        return list(left)
    doomed = {cmd.record_id: target}
    found = [cmd.record_id]
    for record_id in found:  # grows as the cascade is found
        for candidate in _derived_from(uow, record_id):
            if candidate in doomed:
                continue
            aggregate = uow.get(candidate)
            if not aggregate.state.forgotten and _only_evidence_forgotten(uow, aggregate, doomed):
                doomed[candidate] = aggregate
                found.append(candidate)
    keys: dict[str, bytes] = {}
    for record_id in found:
        key_id = uow.content_key(record_id)
        if key_id is None:
            raise ErasureUnsupportedError(record_id)
        keys[record_id] = key_id
    uow.doom_keys(cmd.record_id, keys)  # step 1 (see the module's docstring)
    for record_id in found:
        cascade_of = "" if record_id == cmd.record_id else cmd.record_id
        doomed[record_id].forget(
            actor=cmd.actor, rationale=cmd.rationale, at=uow.now(), cascade_of=cascade_of
        )
    uow.save(*doomed.values())  # step 2
    uow.destroy_keys(list(keys.values()))  # step 3
    return found


def _derived_from(uow: UnitOfWork, record_id: str) -> list[str]:
    """Records with an evidence edge to ``record_id``."""
    found: dict[str, None] = {}
    for predicate in EVIDENCE:
        found.update(dict.fromkeys(uow.referrers(record_id, predicate)))
    return list(found)


def _only_evidence_forgotten(
    uow: UnitOfWork, aggregate: RecordAggregate, doomed: dict[str, RecordAggregate]
) -> bool:
    """Whether ``aggregate`` was created from a doomed record and all its evidence is gone."""
    born_of = {r.target_id for r in aggregate.state.content.relations if r.predicate in EVIDENCE}
    if not born_of & doomed.keys():
        return False
    evidence = {r.target_id for r in aggregate.state.relations if r.predicate in EVIDENCE}
    return all(target in doomed or _forgotten(uow, target) for target in evidence)


def _forgotten(uow: UnitOfWork, record_id: str) -> bool:
    return uow.exists(record_id) and uow.get(record_id).state.forgotten

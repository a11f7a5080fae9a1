"""What a recorder may offer beyond eventsourcing's recorder interface, declared once.

Every recorder stores and reads events (eventsourcing's ``ApplicationRecorder``). The
backends here offer more, and the engine uses it where it is there: a hash chain to verify
and to tie read-view checkpoints to, a bulk read of the log as raw rows, a read of many
records' first events by key, a repack of large events, a log time to raise, a binding to the
key store, a mark of an import under way, a flush of commits not yet synced. Each of these
is a :class:`~typing.Protocol` below; :func:`abilities_of` checks a recorder against them
once, where the application makes it, and the rest of the engine reads the
:class:`Abilities` it returns (each member the recorder itself, typed as that ability, or
None where it lacks it) instead of probing the recorder for methods.

A recorder that offers half of an ability (a ``chain`` without ``hash_at``, a key store
identity it cannot record) is refused there, with a :class:`~membrane_es.errors.MembraneError`
naming what is missing: the engine would otherwise trust a chain it cannot read back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable
from uuid import UUID

from membrane_es.errors import MembraneError
from membrane_es.stores.chain import Chain, ChainReport


class LogRows(Protocol):
    """Raw rows of the log, column by column (index ``i`` of each column is one row)."""

    ids: list[int]
    topics: list[str]
    states: list[bytes]

    def __len__(self) -> int: ...

    def originator_id(self, index: int) -> UUID | str: ...

    def originator_version(self, index: int) -> int: ...


@runtime_checkable
class VerifiesChain(Protocol):
    """Walks the log against its hash chain and reports the first bad link."""

    def verify(self, *, first: int | None = None, last: int | None = None) -> ChainReport: ...


@runtime_checkable
class HasChain(Protocol):
    """Links each notification to the one before by a hash (plain, or keyed)."""

    @property
    def chain(self) -> Chain: ...


@runtime_checkable
class HashesAt(Protocol):
    """Gives the chain hash a notification holds (what a checkpoint taken there is tied to)."""

    def hash_at(self, notification_id: int) -> bytes: ...


@runtime_checkable
class HashChained(HasChain, HashesAt, Protocol):
    """A chain and its hashes read back: both, or the log keeps no chain."""


@runtime_checkable
class Repacks(Protocol):
    """Packs the large events written alone since it last did (returns how many moved)."""

    def repack(self) -> int: ...


@runtime_checkable
class ObservesEventTime(Protocol):
    """Raises the log's newest event time to at least ``moment`` (a log chained after the
    fact, whose head never recorded its events' times)."""

    def observe_event_time(self, moment: datetime) -> None: ...


@runtime_checkable
class ReadsLogRows(Protocol):
    """Reads the log as raw columns, for replaying it in bulk."""

    def read_log_rows(self, start: int, limit: int, stop: int | None = None) -> LogRows: ...


@runtime_checkable
class SelectsStates(Protocol):
    """Reads the stored state of many originators' events at one version, in one read."""

    def select_states(self, originator_ids: Sequence[UUID | str], version: int) -> list[bytes]: ...


@runtime_checkable
class SyncsLog(Protocol):
    """Makes every commit so far durable (a log opened without a sync per commit)."""

    def sync_log(self) -> None: ...


@runtime_checkable
class ReadsKeyStoreIdentity(Protocol):
    """Says which key store the log is bound to (None: not bound yet)."""

    def key_store_identity(self) -> bytes | None: ...


@runtime_checkable
class RecordsKeyStoreIdentity(Protocol):
    """Records which key store holds the log's keys."""

    def bind_key_store(self, identity: bytes) -> None: ...


@runtime_checkable
class BindsKeyStore(ReadsKeyStoreIdentity, RecordsKeyStoreIdentity, Protocol):
    """A log bound to its key store: it says which, and records it."""


@runtime_checkable
class MarksImport(Protocol):
    """Marks the log while an import fills it, so that a log an import left part-written (its
    process killed, its disk full) is told from a whole one, and empties such a log for the
    import to start over."""

    def import_unfinished(self) -> bool: ...

    def mark_import(self, unfinished: bool) -> None: ...

    def discard_log(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Abilities:
    """What one recorder offers beyond eventsourcing's interface (None: it does not)."""

    chained: HashChained | None = None
    verifier: VerifiesChain | None = None
    packer: Repacks | None = None
    time_keeper: ObservesEventTime | None = None
    row_reader: ReadsLogRows | None = None
    state_reader: SelectsStates | None = None
    key_binder: BindsKeyStore | None = None
    syncer: SyncsLog | None = None
    import_marker: MarksImport | None = None


def abilities_of(recorder: object) -> Abilities:
    """Check ``recorder`` against each ability once; :class:`MembraneError` if it offers
    half of one (the message names the recorder's class and the part it lacks)."""
    return Abilities(
        chained=_hash_chained(recorder),
        verifier=recorder if isinstance(recorder, VerifiesChain) else None,
        packer=recorder if isinstance(recorder, Repacks) else None,
        time_keeper=recorder if isinstance(recorder, ObservesEventTime) else None,
        row_reader=recorder if isinstance(recorder, ReadsLogRows) else None,
        state_reader=recorder if isinstance(recorder, SelectsStates) else None,
        key_binder=_key_binder(recorder),
        syncer=recorder if isinstance(recorder, SyncsLog) else None,
        import_marker=recorder if isinstance(recorder, MarksImport) else None,
    )


def _hash_chained(recorder: object) -> HashChained | None:
    if isinstance(recorder, HashChained):
        return recorder
    if isinstance(recorder, HasChain):
        raise _half_offered(recorder, "a hash chain", "chain", "hash_at")
    if isinstance(recorder, HashesAt):
        raise _half_offered(recorder, "a hash chain", "hash_at", "chain")
    return None


def _key_binder(recorder: object) -> BindsKeyStore | None:
    if isinstance(recorder, BindsKeyStore):
        return recorder
    if isinstance(recorder, ReadsKeyStoreIdentity):
        raise _half_offered(recorder, "a key store binding", "key_store_identity", "bind_key_store")
    if isinstance(recorder, RecordsKeyStoreIdentity):
        raise _half_offered(recorder, "a key store binding", "bind_key_store", "key_store_identity")
    return None


def _half_offered(recorder: object, ability: str, offered: str, missing: str) -> MembraneError:
    kind = type(recorder)
    return MembraneError(
        f"recorder {kind.__module__}.{kind.__qualname__} offers {ability} by half: it has "
        f"{offered} but no {missing}"
    )


__all__ = [
    "Abilities",
    "BindsKeyStore",
    "HasChain",
    "HashChained",
    "HashesAt",
    "LogRows",
    "MarksImport",
    "ObservesEventTime",
    "ReadsKeyStoreIdentity",
    "ReadsLogRows",
    "RecordsKeyStoreIdentity",
    "Repacks",
    "SelectsStates",
    "SyncsLog",
    "VerifiesChain",
    "abilities_of",
]

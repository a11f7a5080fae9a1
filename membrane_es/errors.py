"""The errors the engine raises, and the one table that maps each to a gRPC and HTTP status.

Every error derives from :class:`MembraneError`, so callers can catch the family or one kind.
"""

from __future__ import annotations

import warnings
from typing import Any


class MembraneError(Exception):
    """Base of every error the engine raises on purpose."""


class ValidationError(MembraneError, ValueError):
    """Input that breaks the schema or a limit; names the offending field. Nothing was written."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"validation error for {field}: {message}")


class NotFoundError(MembraneError, LookupError):
    """No record with that id exists (at the moment asked about)."""

    def __init__(self, record_id: str) -> None:
        self.record_id = record_id
        super().__init__(f"record not found: {record_id}")


class AccessDeniedError(MembraneError, PermissionError):
    """The record exists but the trust context may not read it."""

    def __init__(self, record_id: str) -> None:
        self.record_id = record_id
        super().__init__("access denied by trust context")


class CeilingError(AccessDeniedError):
    """A write the caller's key may not make: the entry (or the scope asked for) is outside
    the scopes or above the sensitivity its ceiling allows. An entry the key cannot even see
    is not found instead, so a key cannot learn that it exists."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.record_id = ""
        PermissionError.__init__(self, f"{field}: {message}")


class EpisodicImmutableError(MembraneError):
    """Episodic memory is raw experience: revision operations refuse it."""

    def __init__(self, record_id: str) -> None:
        self.record_id = record_id
        super().__init__(f"episodic memory is immutable and cannot be revised: record {record_id}")


class AlreadyReplacedError(MembraneError):
    """The record was already superseded or merged: a second replacement would fork its chain."""

    def __init__(self, record_id: str, replaced_by: str) -> None:
        self.record_id = record_id
        self.replaced_by = replaced_by
        super().__init__(f"record {record_id} was already replaced by {replaced_by}")


class AlreadyExistsError(MembraneError):
    """A record with the requested id already exists."""

    def __init__(self, record_id: str) -> None:
        self.record_id = record_id
        super().__init__(f"record already exists: {record_id}")


class StoreNotFoundError(MembraneError, FileNotFoundError):
    """No store exists at the path a read (or an open that must not create) named."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"no store at {path}")


class EntryNotFoundError(NotFoundError):
    """No active entry with that id (the entries API's 404: absent, deleted, or invalidated)."""

    def __init__(self, entry_id: int, message: str = "entry not found") -> None:
        self.entry_id = entry_id
        LookupError.__init__(self, message)
        self.record_id = str(entry_id)


class DuplicateRelationError(AlreadyExistsError):
    """That (source, target, relation) already exists; ``existing_id`` names it."""

    def __init__(self, existing_id: int) -> None:
        self.existing_id = existing_id
        self.record_id = str(existing_id)
        Exception.__init__(self, "relation already exists")


class ConflictError(MembraneError):
    """A concurrent revision of the same record won; retrying found no way through."""


class ForgottenError(MembraneError):
    """The record was forgotten (its content erased): it can be read, redacted, but not changed
    or forgotten again."""

    def __init__(self, record_id: str) -> None:
        self.record_id = record_id
        super().__init__(f"record {record_id} was forgotten: its content is erased")


class ErasureUnsupportedError(MembraneError):
    """The record was written before per-record keys: its content is in the log unsealed, so
    destroying a key could not erase it."""

    def __init__(self, record_id: str) -> None:
        self.record_id = record_id
        super().__init__(
            f"record {record_id} was written before per-record keys: its content is stored "
            "unsealed in the log, so it cannot be erased by destroying a key"
        )


class PositionNotReachedError(MembraneError):
    """A read asked for views that include a log position (``min_position``) and they did
    not reach it within the wait allowed. Nothing was read; retry, or wait longer."""

    def __init__(self, wanted: int, reached: int, waited: float) -> None:
        self.wanted = wanted
        self.reached = reached
        super().__init__(
            f"min_position {wanted} not reached within {waited:g} s "
            f"(the read views are at {reached})"
        )


class IntegrityError(MembraneError):
    """The store is damaged: an event was altered, removed or reordered (it fails the hash
    chain), or a store file is corrupt. ``notification_id`` names the first bad notification
    when it is known. Reads that would return damaged data raise it rather than answer."""

    def __init__(self, message: str, notification_id: int | None = None) -> None:
        self.notification_id = notification_id
        super().__init__(message)


class KeyStoreError(IntegrityError):
    """The store's key store is missing, unreadable, or is another store's: the log's records
    are sealed under keys it does not hold, so their content could not be read; or it holds
    the keys of a log that is gone (``data.mdb`` missing or emptied). Nothing was created or
    changed; restore the key store (``key_file``), or the log, from the backup of both."""

    def __init__(self, key_file: str, message: str) -> None:
        self.key_file = key_file
        super().__init__(message)


class StorageFullError(MembraneError, OSError):
    """The disk (or the store's size limit) is full: nothing of the failed write was stored.
    Free space and retry; everything acknowledged before is kept."""


class ReadOnlyError(MembraneError):
    """The store was opened read-only (e.g. for forensics on a damaged log): writes refused."""


class StoreClosedError(MembraneError):
    """The engine was closed: nothing was read or written. Open the store again to use it."""

    def __init__(self, method: str) -> None:
        self.method = method
        super().__init__(f"{method}: this Membrane was closed; open the store again to use it")


# One row per error kind: (gRPC status code name, HTTP status). Servers read only this table.
STATUS_BY_ERROR: dict[type[MembraneError], tuple[str, int]] = {
    ValidationError: ("INVALID_ARGUMENT", 400),
    NotFoundError: ("NOT_FOUND", 404),
    AccessDeniedError: ("PERMISSION_DENIED", 403),
    EpisodicImmutableError: ("FAILED_PRECONDITION", 409),
    AlreadyReplacedError: ("FAILED_PRECONDITION", 409),
    AlreadyExistsError: ("ALREADY_EXISTS", 409),
    ConflictError: ("ABORTED", 409),
    StoreNotFoundError: ("NOT_FOUND", 404),
    ForgottenError: ("FAILED_PRECONDITION", 409),
    ErasureUnsupportedError: ("FAILED_PRECONDITION", 409),
    PositionNotReachedError: ("DEADLINE_EXCEEDED", 504),
    IntegrityError: ("DATA_LOSS", 500),
    StorageFullError: ("RESOURCE_EXHAUSTED", 507),
    ReadOnlyError: ("FAILED_PRECONDITION", 409),
    StoreClosedError: ("UNAVAILABLE", 503),
}


# Earlier names, still importable with a warning: one name for each error.
EARLIER_NAMES = {"IntegrityViolationError": "IntegrityError"}


def renamed(name: str, stacklevel: int = 3) -> Any:
    """The error once called ``name``, with a warning at the importing line; else
    :class:`AttributeError` (the module ``__getattr__`` protocol)."""
    if name not in EARLIER_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new = EARLIER_NAMES[name]
    warnings.warn(
        f"{name} is now called {new}; the old name will be removed",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return globals()[new]


def __getattr__(name: str) -> Any:
    return renamed(name)


def status_of(error: BaseException) -> tuple[str, int]:
    """The (gRPC code, HTTP status) for an error; anything unknown is INTERNAL / 500."""
    for kind in type(error).__mro__:
        if kind in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[kind]
    return ("INTERNAL", 500)

"""The hash chain every store keeps over its notification log, and the report of a check.

A notification's link is blake2b-256(previous hash ‖ id ‖ events key ‖ topic ‖ state), keyed
with the chain key in a keyed store (blake2b's own keyed mode: a MAC, so nobody without the
key can recompute it). The events key names the event (its originator, then its version) the
same way in every backend, so a log exported from one store verifies in another.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from enum import StrEnum
from uuid import UUID

from eventsourcing.persistence import DataError

from membrane_es.errors import MembraneError, ValidationError

U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_UUID_TAG = 1
_STR_TAG = 2
_VERSION_BIAS = 1 << 63  # big-endian keys then sort negative versions first
HASH_SIZE = 32
GENESIS = bytes(HASH_SIZE)  # the link before a log's first notification
_PLAIN = b"plain"
_KEYED = b"keyed"


# Events keys ----------------------------------------------------------------------------


def originator_key(originator_id: UUID | str) -> bytes:
    """Return the key prefix shared by all events of one originator."""
    if isinstance(originator_id, UUID):
        return bytes((_UUID_TAG,)) + originator_id.bytes
    if isinstance(originator_id, str):
        raw = originator_id.encode("utf-8")
        return bytes((_STR_TAG,)) + _U32.pack(len(raw)) + raw
    raise DataError(f"Originator id must be a UUID or str: {originator_id!r}")


def decode_originator(key: bytes) -> UUID | str:
    """Return the originator id an events key starts with."""
    if key[0] == _UUID_TAG:
        return UUID(bytes=key[1:17])
    (length,) = _U32.unpack_from(key, 1)
    return key[5 : 5 + length].decode("utf-8")


def version_suffix(version: int) -> bytes:
    """Return the part of an events key that orders one originator's versions."""
    try:
        return U64.pack(version + _VERSION_BIAS)
    except struct.error:
        raise DataError(f"Originator version out of range: {version}") from None


def version_of(key: bytes) -> int:
    """Return the version an events key ends with."""
    (biased,) = U64.unpack_from(key, len(key) - 8)
    return int(biased) - _VERSION_BIAS


# Links ------------------------------------------------------------------------------------


class Chain:
    """How one log links its notifications: plain blake2b-256, or keyed (a MAC) when the
    store's chain has a key: one kept outside the store, or the one its key store holds."""

    __slots__ = ("key", "mode")

    def __init__(self, key: bytes | None = None) -> None:
        if key is not None and not isinstance(key, bytes):
            raise MembraneError("the chain key must be bytes")
        if key is not None and not key:
            raise MembraneError("the chain key must not be empty")
        if key is not None and len(key) > hashlib.blake2b.MAX_KEY_SIZE:
            key = hashlib.blake2b(key).digest()  # blake2b takes keys of at most 64 bytes
        self.key = key or b""
        self.mode = _PLAIN if key is None else _KEYED + self.fingerprint()

    def fingerprint(self) -> bytes:
        """What the store records of the key: enough to tell a wrong key, nothing more."""
        return hashlib.blake2b(b"membrane-es chain key", key=self.key, digest_size=16).digest()

    def link(
        self, previous: bytes, notification_id: int, event_key: bytes, topic: bytes, state: bytes
    ) -> bytes:
        """Return the hash chaining one notification to the previous one."""
        # Every field before the state is self-delimiting, so the input is unambiguous.
        return hashlib.blake2b(
            previous
            + U64.pack(notification_id)
            + event_key
            + _U32.pack(len(topic))
            + topic
            + state,
            digest_size=HASH_SIZE,
            key=self.key,
        ).digest()

    def check_mode(self, recorded: bytes | None) -> None:
        """Refuse a key the store's chain was not made with (or a missing one)."""
        if recorded is None:
            recorded = _PLAIN  # logs written before the mode was recorded are plain
        if recorded == self.mode:
            return
        if recorded == _PLAIN:
            raise MembraneError("this store's hash chain is not keyed: open it without a key")
        if self.mode == _PLAIN:
            raise MembraneError("this store's hash chain is keyed: open it with its chain key")
        raise MembraneError("wrong chain key for this store")


PLAIN_CHAIN = Chain()


# Reports ----------------------------------------------------------------------------------


class ChainFault(StrEnum):
    """What is wrong at the first bad position of a notification log."""

    ALTERED = "altered"
    MISSING = "missing"
    REORDERED = "reordered"
    UNLOGGED = "unlogged"
    CORRUPTED = "corrupted"  # the store file itself is unreadable there (LMDB damage)
    KEYS = "keys"  # the key store is missing or another store's: nothing could be unsealed
    UNSEALABLE = "unsealable"  # records whose keys are missing (not erased by forget)
    INTERRUPTED = "interrupted"  # a forget cut short: keys left to destroy, or events unsaved
    IMPORT = "import"  # an import into the store did not finish: it holds part of a file


def check_position(value: object, field: str) -> int | None:
    """A bound of a check's range: a log position (1 or more), or None (the log's end)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(field, f"must be a log position (a whole number >= 1): {value!r}")
    return value


def check_span(first: object, last: object) -> tuple[int | None, int | None]:
    """``from_position`` and ``to_position`` of a check, each checked, in order."""
    start = check_position(first, "from_position")
    end = check_position(last, "to_position")
    if start is not None and end is not None and start > end:
        raise ValidationError("from_position", f"is after to_position ({end}): {start}")
    return start, end


def span_of(first: int | None, last: int | None, head: int) -> tuple[int, int]:
    """The positions a check of the log up to ``head`` covers, both included: from ``first``
    (None: 1) to ``last`` (None: the head). A bound past the head is refused, naming it: a
    position not given yet has nothing to check."""
    first, last = check_span(first, last)
    for field, bound in (("from_position", first), ("to_position", last)):
        if bound is not None and bound > head:
            raise ValidationError(field, f"is beyond the log's head ({head}): {bound}")
    return first or 1, head if last is None else last


@dataclass(frozen=True)
class ChainReport:
    """The outcome of verifying a notification log: OK, or its first fault.

    ``head`` is the log's last chain hash (hex) when the walk reached it: recorded outside
    the store, it lets a later check tell that the log was not cut back to an earlier prefix.
    """

    checked: int
    fault: ChainFault | None = None
    notification_id: int | None = None
    detail: str = ""
    keyed: bool = False
    head: str = ""
    forgotten: int = 0  # records erased by forget (their keys destroyed on purpose)
    unsealable: int = 0  # records not forgotten whose keys the key store does not hold
    # A check of part of the log: its first and last positions (0: the whole log). It
    # checks each link in the range, the first against the hash the log keeps of the
    # notification before it, and the last against the head when the range ends there.
    first: int = 0
    last: int = 0

    @property
    def ok(self) -> bool:
        return self.fault is None

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            keyed = " (keyed hash chain)" if self.keyed else ""
            forgotten = (
                f"; {self.forgotten} record{'' if self.forgotten == 1 else 's'} forgotten"
                if self.forgotten
                else ""
            )
            span = f" (positions {self.first} to {self.last})" if self.last else ""
            return f"OK: {self.checked} notifications verified{span}{keyed}{forgotten}"
        where = "" if self.notification_id is None else f" at notification {self.notification_id}"
        return f"{self.fault}{where}: {self.detail}"

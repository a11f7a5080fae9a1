"""Record ids (any string the client chooses, UUIDv4 by default) as aggregate ids (UUIDs).

A canonical UUID string maps to that UUID; any other string maps to a name-based UUIDv5,
so client-chosen ids such as ``"fact-42"`` work on every persistence module.
"""

from __future__ import annotations

import uuid
from functools import lru_cache

_RECORD_NAMESPACE = uuid.UUID("5b0f4a4e-3c1d-4f5e-9a59-6d656d62726e")
_CANONICAL_LENGTH = 36  # "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"


@lru_cache(maxsize=65_536)
def record_key(record_id: str) -> uuid.UUID:
    """The aggregate id of the record with this id."""
    if len(record_id) == _CANONICAL_LENGTH:  # else not canonical: no parse (and no raise)
        try:
            parsed = uuid.UUID(record_id)
        except ValueError:
            pass
        else:
            if str(parsed) == record_id:
                return parsed
    return uuid.uuid5(_RECORD_NAMESPACE, record_id)


def new_record_id() -> str:
    """A fresh record id (UUIDv4, as the reference generates)."""
    return str(uuid.uuid4())

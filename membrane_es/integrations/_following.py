"""What every adapter shares to stay right when it shares its engine: following the log from
the position it has seen, and writing by optimistic concurrency.

An adapter keeps its own index of the engine's records (which record holds each key now).
It brings that index up to date before each operation by applying only the records the log's
newer events touched (:meth:`~membrane_es.Membrane.record_changes`), so another object,
thread or process writing to the same engine costs what it wrote, not a reload of the store.

A write that replaces what a key holds names the record it replaces, and every new record
of a key gets an id made from its predecessor's (:func:`successor_id`; the first from the
key itself, :func:`first_id`). Two writers that start from the same state therefore collide
in the engine — a second replacement of one record is refused (``AlreadyReplacedError``), a
second record under one id too (``AlreadyExistsError``, or ``ConflictError`` when the race
was with another process) — whatever object, thread or process they are in; the loser
brings its index up to date and tries again (:func:`retrying`). No lock is held around the
framework's call, and no twin can ever be live.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

from membrane_es import (
    AlreadyExistsError,
    AlreadyReplacedError,
    ConflictError,
    Membrane,
    RecordChanges,
)

CONFLICTS = (AlreadyReplacedError, AlreadyExistsError, ConflictError)
ATTEMPTS = 64  # races lost in a row before a write gives up (each loss means a winner)
_BACKOFF_SECONDS = 0.0005  # the first pause after a lost race, doubling, at most 50 ms
_IDS = uuid.UUID("6d656d62-7261-4e65-8164-6170746572ff")  # the namespace of adapter ids

_Result = TypeVar("_Result")


def first_id(kind: str, *names: str) -> str:
    """The id of the first record a key ever has (``kind``: the adapter's own)."""
    return str(uuid.uuid5(_IDS, "\x00".join((kind, *names))))


@lru_cache(maxsize=4096)  # asked of each held record on every write and follow (a SHA-1 each)
def successor_id(predecessor: str) -> str:
    """The id of the record that follows ``predecessor`` for its key (a revision of it, or
    the key written again after it was deleted): one id, whoever writes it."""
    return str(uuid.uuid5(_IDS, "next\x00" + predecessor))


def claim_id(kind: str, record_id: str) -> str:
    """The id of a record that claims ``record_id`` for one act (taking a turn out of a
    session): the first to write it has the claim."""
    return str(uuid.uuid5(_IDS, f"claim\x00{kind}\x00{record_id}"))


def changes_since(memory: Membrane, seen: int | None) -> RecordChanges | None:
    """The records touched since ``seen`` (None: read everything afresh instead)."""
    return None if seen is None else memory.record_changes(seen)


def retrying(attempt: Callable[[], _Result], recover: Callable[[Exception], None]) -> _Result:
    """``attempt()``; each time it loses a race (:data:`CONFLICTS`), ``recover(error)`` (bring
    the index up to date) and try again, after a short random pause."""
    lost = 0
    while True:
        try:
            return attempt()
        except CONFLICTS as error:
            lost += 1
            if lost >= ATTEMPTS:
                raise ConflictError(f"lost {lost} races with concurrent writers") from error
            recover(error)
            time.sleep(random.uniform(0, min(_BACKOFF_SECONDS * 2 ** (lost - 1), 0.05)))

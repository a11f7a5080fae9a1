"""OpenAI Agents SDK: a ``Session`` whose conversation items are captured turns.

Each item an agent run adds is captured (``Membrane.capture_memory``, content
``{"item": item}``) as an agent turn in the session's scope (``session:<id>`` unless told):
the session's history is then ordinary memory, searched and ranked like any other
(``Membrane.retrieve`` with the session's scope finds what was said), and an agent built on
another framework reads it too. The item itself is kept exactly as given, so
:meth:`MembraneSession.get_items` answers as the SDK's own ``SQLiteSession`` does.

The content names no ``speaker``: capture would then note, for each turn, the turns it was
said after, by reading every turn of the sitting, which makes each write slower as a session
grows (a thousand items: fifty times slower). The role is in the item, and in its words.

Any number of sessions may share one engine, from many threads and processes: each applies
what the log gained since it last looked before it answers (only the records the new
events touched, :mod:`membrane_es.integrations._following`), so it sees every write
acknowledged before the call. ``pop_item`` claims the turn it takes out with a record whose
id is made from the turn's: of two sessions that would pop the same turn, one has the claim
and the other catches up and pops the turn before it — an item comes back from exactly one
``pop_item``.

An item is kept as the SDK's ``SQLiteSession`` keeps it, as JSON: a tuple comes back a list;
an item holding a NaN or an infinity (which the engine's content refuses) is captured as its
JSON text and comes back equal.

A turn cannot be rewritten (episodic memory is immutable): ``pop_item`` and
``clear_session`` penalise the turns they remove to nothing, which takes them out of the
session and out of every active read while their history keeps them, so
:meth:`MembraneSession.as_of` reads the session as it was before. (A turn someone later
reinforces comes back.) Erasure is ``Membrane.forget`` on its record.

Only :mod:`membrane_es`'s public API is used. Needs the ``openai-agents`` extra.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from membrane_es import (
    EpisodicPayload,
    Membrane,
    MembraneError,
    MemoryRecord,
    MemoryType,
    ReadOnlyError,
    TrustContext,
    ValidationError,
)
from membrane_es.integrations._following import changes_since, claim_id, retrying
from membrane_es.integrations._reach import checked_scope, checked_sensitivity, checked_trust

if TYPE_CHECKING:  # the SDK is only needed to run an agent: this module works without it
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

SOURCE = "openai-agents"
ACTOR = "openai-agents"
SCOPE_PREFIX = "session:"
_ITEM_JSON = "item_json"  # the content key of an item kept as its JSON text
_Result = TypeVar("_Result")


class _Turn(msgspec.Struct, frozen=True, order=True):
    """One item of the session: when it was captured, the record it was captured as, and
    the item as JSON."""

    created: datetime
    record_id: str
    item: str


class MembraneSession:
    """An OpenAI Agents SDK session (the ``agents.memory.Session`` protocol) on membrane_es.

    :param session_id: the conversation's id.
    :param memory: the engine (its embedder, if any, embeds each turn for search).
    :param trust: who reads and writes: a turn above its ceiling is never returned, and a
        session it could not read back is refused.
    :param scope: the scope turns are captured in (default ``session:<session_id>``).
    :param sensitivity: the sensitivity turns are captured with (at most the ceiling).
    :param tags: tags every captured turn gets.
    :param session_settings: the SDK's settings, a ``SessionSettings`` or a dict (``limit``:
        how many items ``get_items`` returns by default; None: every item).
    """

    def __init__(
        self,
        session_id: str,
        memory: Membrane,
        *,
        trust: TrustContext | None = None,
        scope: str | None = None,
        sensitivity: str = "low",
        tags: Sequence[str] = (),
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        as_of: datetime | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValidationError("session_id", "must be a non-blank string")
        if not isinstance(memory, Membrane):
            raise ValidationError("memory", f"must be a Membrane, not {type(memory).__name__}")
        self.session_id = session_id
        self.session_settings: SessionSettings | None = _settings(session_settings)
        self._memory = memory
        self._trust = checked_trust(TrustContext() if trust is None else trust)
        self._scope = checked_scope(
            self._trust, SCOPE_PREFIX + session_id if scope is None else scope
        )
        if not self._scope:
            raise ValidationError("scope", "a session needs a scope of its own")
        self._sensitivity = checked_sensitivity(self._trust, sensitivity).value
        if isinstance(tags, str) or not all(isinstance(tag, str) for tag in tags):
            raise ValidationError("tags", "must be a list of strings")
        self._tags = list(dict.fromkeys(tags))
        self._as_of = as_of
        self._lock = threading.RLock()
        self._turns: list[_Turn] | None = None
        self._held: dict[str, _Turn] = {}  # the turns by record id
        self._seen: int | None = None  # the log position the turns reflect

    @property
    def memory(self) -> Membrane:
        return self._memory

    @property
    def scope(self) -> str:
        """The scope the session's turns are captured in (pass it to ``Membrane.retrieve``'s
        trust to search them)."""
        return self._scope

    def as_of(self, moment: datetime) -> MembraneSession:
        """This session as it stood at ``moment`` (its items then); writes raise
        :class:`~membrane_es.ReadOnlyError`."""
        if not isinstance(moment, datetime) or moment.tzinfo is None:
            raise ValidationError("as_of", "must be an aware datetime")
        return MembraneSession(
            self.session_id,
            self._memory,
            trust=self._trust,
            scope=self._scope,
            sensitivity=self._sensitivity,
            tags=self._tags,
            session_settings=self.session_settings,
            as_of=moment,
        )

    async def search(self, query: str, limit: int = 5) -> list[TResponseInputItem]:
        """The session's items that best match ``query``, best first: by its words, and by
        meaning when the engine has an embedder (the engine's ranked retrieval)."""
        if not isinstance(query, str):
            raise ValidationError("query", f"must be a string, not {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValidationError("limit", f"must be a whole number >= 1, not {limit!r}")
        return await _in_thread(lambda: self._search(query, limit))

    # --- the Session protocol -------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first: the latest ``limit`` (all for None or a negative
        limit, as the SDK's SQLite session; none for 0)."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValidationError("limit", f"must be a whole number or None, not {limit!r}")
        if limit is None:
            limit = _settings_limit(self.session_settings)
        return await _in_thread(lambda: self._items(limit))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Capture each item as a turn of this session, all in one atomic write."""
        encoded = _checked_items(items)
        self._check_writable()
        if encoded:
            await _in_thread(lambda: self._add(encoded))

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the latest item out of the session and return it (None when it is empty)."""
        self._check_writable()
        return await _in_thread(self._pop)

    async def clear_session(self) -> None:
        """Take every item out of the session (each kept in its turn's history)."""
        self._check_writable()
        await _in_thread(self._clear)

    def close(self) -> None:
        """Let go of what this session holds in memory (the engine is not this session's
        to close; the items stay in it). The session reads them again if used after."""
        with self._lock:
            self._turns, self._seen = None, None

    # --- the work, in a worker thread -----------------------------------------------------

    def _items(self, limit: int | None) -> list[TResponseInputItem]:
        with self._lock:
            turns = self._sync()
            if limit is not None and limit >= 0:
                turns = turns[max(len(turns) - limit, 0) :] if limit else []
            chosen = list(turns)
        return [json.loads(turn.item) for turn in chosen]

    def _add(self, encoded: list[str]) -> None:
        with self._lock:
            captured = []
            before = self._memory.position
            # One item is one write already: a batch would only add its bookkeeping.
            with self._memory.batch() if len(encoded) > 1 else nullcontext():
                for item in encoded:
                    captured.append(
                        self._memory.capture_memory(
                            _content(item),
                            source_kind="agent_turn",
                            context={"session_id": self.session_id},
                            sensitivity=self._sensitivity,
                            source=SOURCE,
                            tags=self._tags,
                            scope=self._scope,
                        ).primary_record
                    )
            if self._turns is not None:
                # Written: its own turns are held as the write returned them, so following
                # the log reads none of them back.
                for record in captured:
                    turn_item = self._item_of(record)
                    if turn_item is not None and record.id not in self._held:
                        turn = _Turn(*_creation(record), turn_item)
                        bisect.insort(self._turns, turn)
                        self._held[record.id] = turn
            if before == self._seen and self._memory.position == before + len(captured):
                # Each capture wrote at least one event: exactly that many after what the
                # session had seen means nobody else wrote meanwhile, nothing to read back.
                self._seen = before + len(captured)
            else:
                self._sync()  # and whatever else came before them

    def _pop(self) -> TResponseInputItem | None:
        with self._lock:
            taken = retrying(self._take_last, lambda _: self._catch_up())
        return None if taken is None else json.loads(taken.item)

    def _take_last(self) -> _Turn | None:
        """Claim the session's latest turn and take it out, in one write (a claim already
        made by another session raises, and the caller catches up and tries again)."""
        turns = self._sync()
        if not turns:
            return None
        last = turns[-1]
        with self._memory.batch():
            claim = self._memory.create_record(
                {
                    "id": claim_id("openai-agents-pop", last.record_id),
                    "type": MemoryType.SEMANTIC.value,
                    "scope": self._scope,
                    "sensitivity": self._sensitivity,
                    "payload": {
                        "kind": MemoryType.SEMANTIC.value,
                        "subject": last.record_id,
                        "predicate": "taken out of the session",
                        "object": self.session_id,
                    },
                    "provenance": {"sources": [{"kind": "event", "ref": last.record_id}]},
                },
                actor=ACTOR,
                rationale="pop_item",
                embed=False,
            )
            # The claim only has to exist: retracted at once, no read ever finds it.
            self._memory.retract(claim.id, ACTOR, "claim of a pop_item")
            self._memory.penalize(last.record_id, 1.0, ACTOR, "taken out of the session")
        self._sync()
        return last

    def _clear(self) -> None:
        with self._lock:
            turns = self._sync()
            if turns:
                with self._memory.batch():
                    for turn in turns:
                        self._memory.penalize(turn.record_id, 1.0, ACTOR, "session cleared")
            self._sync()

    def _search(self, query: str, limit: int) -> list[TResponseInputItem]:
        trust = msgspec.structs.replace(self._trust, scopes=[self._scope])
        result = self._memory.retrieve(
            query,
            trust=trust,
            memory_types=[MemoryType.EPISODIC.value],
            limit=limit,
            as_of=self._as_of,
        )
        found = (self._item_of(record) for record in result.records)
        return [json.loads(item) for item in found if item is not None]

    def _sync(self) -> list[_Turn]:
        """The session's turns, oldest first, after applying what the log gained since they
        were last read (every write acknowledged before now, by anyone): only the records
        its new events touched are read."""
        if self._as_of is not None and self._turns is not None:
            return self._turns
        changes = None if self._as_of is not None else changes_since(self._memory, self._seen)
        if changes is None or self._turns is None:
            self._seen = self._memory.position
            self._turns = self._read_turns()
            self._held = {turn.record_id: turn for turn in self._turns}
            if self._as_of is None:
                return self._sync()  # and what came while they were read
            return self._turns
        turns, held = self._turns, self._held
        for change in changes.records:
            turn = held.get(change.record_id)
            if not change.active:
                if turn is not None:
                    del turns[bisect.bisect_left(turns, turn)]
                    del held[change.record_id]
                continue
            if turn is not None:
                continue  # held already (this session's own write)
            try:
                record = self._memory.retrieve_by_id(change.record_id, trust=self._trust)
            except MembraneError:  # not this reader's to read, or forgotten meanwhile
                continue
            item = self._item_of(record)
            if item is not None:
                turn = _Turn(*_creation(record), item)
                bisect.insort(turns, turn)
                held[record.id] = turn
        self._seen = changes.position
        return turns

    def _catch_up(self) -> None:
        self._sync()

    def _read_turns(self) -> list[_Turn]:
        trust = msgspec.structs.replace(self._trust, scopes=[self._scope])
        result = self._memory.retrieve(
            trust=trust, memory_types=[MemoryType.EPISODIC.value], as_of=self._as_of
        )
        turns = []
        for record in result.records:
            item = self._item_of(record)
            if item is not None:
                turns.append(_Turn(*_creation(record), item))
        return sorted(turns)

    def _item_of(self, record: MemoryRecord) -> str | None:
        """The item a record of this session holds, as JSON (None: not one of its turns)."""
        payload = record.payload
        if (
            record.scope != self._scope
            or not isinstance(payload, EpisodicPayload)
            or payload.environment is None
        ):
            return None
        context = payload.environment.context
        content = context.get("capture_content")
        if context.get("capture_context") != {"session_id": self.session_id} or not isinstance(
            content, dict
        ):
            return None
        if "item" in content:
            return json.dumps(content["item"])
        text = content.get(_ITEM_JSON)
        return text if isinstance(text, str) else None

    def _check_writable(self) -> None:
        if self._as_of is not None:
            raise ReadOnlyError("a session read as of a past moment cannot be written")


async def _in_thread(work: Callable[[], _Result]) -> _Result:
    """Run engine work off the event loop (a durable write waits for the disk)."""
    return await asyncio.to_thread(work)


def _creation(record: MemoryRecord) -> tuple[datetime, str]:
    return (record.created_at or datetime.min.replace(tzinfo=UTC), record.id)


def _checked_items(items: object) -> list[str]:
    """Each item as JSON text (as ``SQLiteSession`` stores it: tuples become lists, NaN and
    infinities are kept); anything else names the item at fault."""
    if not isinstance(items, list):
        raise ValidationError("items", f"must be a list of items, not {type(items).__name__}")
    checked = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValidationError(f"items[{i}]", f"must be a dict, not {type(item).__name__}")
        try:
            checked.append(json.dumps(item))
        except (TypeError, ValueError) as error:
            raise ValidationError(f"items[{i}]", f"must be JSON values: {error}") from None
    return checked


def _content(item: str) -> dict[str, Any]:
    """What a turn captures: the item itself, or its JSON text when it holds a number JSON
    has no literal for (the engine's content refuses those)."""
    decoded = json.loads(item)
    # JSON text holds a NaN or an infinity only as these words (a string may too: then walk).
    plain = "NaN" not in item and "Infinity" not in item
    return {"item": decoded} if plain or _finite(decoded) else {_ITEM_JSON: item}


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(inner) for inner in value.values())
    if isinstance(value, list):
        return all(_finite(inner) for inner in value)
    return True


def _settings(given: object) -> SessionSettings | None:
    """The SDK's ``SessionSettings``, given as such or as a dict (as ``SQLiteSession`` takes
    them); a bad ``limit`` is refused now, not at the first read."""
    _settings_limit(given)
    if not isinstance(given, Mapping):
        return given  # type: ignore[return-value]
    from agents.memory import SessionSettings  # a dict of the SDK's settings: the SDK is here

    try:
        return SessionSettings(**given)
    except TypeError as error:
        raise ValidationError("session_settings", str(error)) from None


def _settings_limit(settings: object) -> int | None:
    """The ``limit`` of the SDK's session settings, given as ``SessionSettings`` or a dict."""
    if settings is None:
        return None
    limit = (
        settings.get("limit") if isinstance(settings, Mapping) else getattr(settings, "limit", None)
    )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise ValidationError(
            "session_settings.limit", f"must be a whole number or None, not {limit!r}"
        )
    return limit

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

A turn cannot be rewritten (episodic memory is immutable): ``pop_item`` and
``clear_session`` penalise the turns they remove to nothing, which takes them out of the
session and out of every active read while their history keeps them, so
:meth:`MembraneSession.as_of` reads the session as it was before. (A turn someone later
reinforces comes back.) Erasure is ``Membrane.forget`` on its record.

Only :mod:`membrane_es`'s public API is used. Needs the ``openai-agents`` extra.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import msgspec

from membrane_es import (
    EpisodicPayload,
    Membrane,
    MemoryRecord,
    MemoryType,
    ReadOnlyError,
    TrustContext,
    ValidationError,
)
from membrane_es.integrations._reach import checked_scope, checked_sensitivity, checked_trust

if TYPE_CHECKING:  # the SDK is only needed to run an agent: this module works without it
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

SOURCE = "openai-agents"
ACTOR = "openai-agents"
SCOPE_PREFIX = "session:"
_Result = TypeVar("_Result")


class _Turn(msgspec.Struct, frozen=True):
    """One item of the session: the record it was captured as, and the item as JSON."""

    record_id: str
    item: bytes


class MembraneSession:
    """An OpenAI Agents SDK session (the ``agents.memory.Session`` protocol) on membrane_es.

    :param session_id: the conversation's id.
    :param memory: the engine (its embedder, if any, embeds each turn for search).
    :param trust: who reads and writes: a turn above its ceiling is never returned, and a
        session it could not read back is refused.
    :param scope: the scope turns are captured in (default ``session:<session_id>``).
    :param sensitivity: the sensitivity turns are captured with (at most the ceiling).
    :param tags: tags every captured turn gets.
    :param session_settings: the SDK's settings (``limit``: how many items ``get_items``
        returns by default; None: every item).
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
        session_settings: SessionSettings | None = None,
        as_of: datetime | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValidationError("session_id", "must be a non-blank string")
        if not isinstance(memory, Membrane):
            raise ValidationError("memory", f"must be a Membrane, not {type(memory).__name__}")
        self.session_id = session_id
        self.session_settings: SessionSettings | None = session_settings
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
        self._seen = -1  # the log position the turns were read at

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
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
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

    # --- the work, in a worker thread -----------------------------------------------------

    def _items(self, limit: int | None) -> list[TResponseInputItem]:
        with self._lock:
            turns = self._sync()
            if limit is not None and limit >= 0:
                turns = turns[max(len(turns) - limit, 0) :] if limit else []
            chosen = list(turns)
        return [msgspec.json.decode(turn.item) for turn in chosen]

    def _add(self, encoded: list[bytes]) -> None:
        with self._lock:
            turns = self._sync()
            added: list[_Turn] = []
            with self._memory.batch():
                for item in encoded:
                    captured = self._memory.capture_memory(
                        {"item": msgspec.json.decode(item)},
                        source_kind="agent_turn",
                        context={"session_id": self.session_id},
                        sensitivity=self._sensitivity,
                        source=SOURCE,
                        tags=self._tags,
                        scope=self._scope,
                    )
                    added.append(_Turn(captured.primary_record.id, item))
            turns.extend(added)
            self._seen = self._memory.position

    def _pop(self) -> TResponseInputItem | None:
        with self._lock:
            turns = self._sync()
            if not turns:
                return None
            last = turns[-1]
            self._memory.penalize(last.record_id, 1.0, ACTOR, "taken out of the session")
            turns.pop()
            self._seen = self._memory.position
        item: TResponseInputItem = msgspec.json.decode(last.item)
        return item

    def _clear(self) -> None:
        with self._lock:
            turns = self._sync()
            if turns:
                with self._memory.batch():
                    for turn in turns:
                        self._memory.penalize(turn.record_id, 1.0, ACTOR, "session cleared")
            turns.clear()
            self._seen = self._memory.position

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
        return [msgspec.json.decode(item) for item in found if item is not None]

    def _sync(self) -> list[_Turn]:
        """The session's turns, oldest first: read again from the store when anything was
        written since they were last read, except by this session itself."""
        # Waiting for position 0 returns at once, once the views have caught up with the
        # log: writes other processes made to the same store count as well.
        self._memory.wait_for_position(0)
        position = self._memory.position
        if self._turns is None or position != self._seen:
            self._turns = self._read_turns()
            self._seen = self._memory.position
        return self._turns

    def _read_turns(self) -> list[_Turn]:
        trust = msgspec.structs.replace(self._trust, scopes=[self._scope])
        result = self._memory.retrieve(
            trust=trust, memory_types=[MemoryType.EPISODIC.value], as_of=self._as_of
        )
        turns = sorted(
            (record for record in result.records if self._item_of(record) is not None),
            key=_creation,
        )
        return [_Turn(record.id, self._item_of(record) or b"") for record in turns]

    def _item_of(self, record: MemoryRecord) -> bytes | None:
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
        if context.get("capture_context") != {"session_id": self.session_id} or not (
            isinstance(content, dict) and "item" in content
        ):
            return None
        return msgspec.json.encode(content["item"])

    def _check_writable(self) -> None:
        if self._as_of is not None:
            raise ReadOnlyError("a session read as of a past moment cannot be written")


async def _in_thread(work: Callable[[], _Result]) -> _Result:
    """Run engine work off the event loop (a durable write waits for the disk)."""
    return await asyncio.to_thread(work)


def _creation(record: MemoryRecord) -> tuple[datetime, str]:
    return (record.created_at or datetime.min.replace(tzinfo=UTC), record.id)


def _checked_items(items: object) -> list[bytes]:
    """Each item as JSON; anything else names the item at fault."""
    if not isinstance(items, list):
        raise ValidationError("items", f"must be a list of items, not {type(items).__name__}")
    checked = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValidationError(f"items[{i}]", f"must be a dict, not {type(item).__name__}")
        try:
            encoded = msgspec.json.encode(item)
        except (TypeError, msgspec.EncodeError) as error:
            raise ValidationError(f"items[{i}]", f"must be JSON values: {error}") from None
        if msgspec.json.decode(encoded) != item:  # a tuple, a datetime: would read back changed
            raise ValidationError(f"items[{i}]", "must be JSON values (it would read back changed)")
        checked.append(encoded)
    return checked

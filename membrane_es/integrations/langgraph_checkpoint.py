"""LangGraph short-term memory on the event log: a ``BaseCheckpointSaver`` (sync and async).

Every checkpoint and every batch of pending writes is a ``working`` record of its own, in
the scope ``langgraph:<thread_id>``, created once and never changed: a thread's history is
the log itself, ``history`` and ``verify`` apply to it, and a read ``as_of`` any past moment
(:meth:`MembraneSaver.as_of`) answers with the thread as it was then. Deleting (a thread,
a run's checkpoints, a prune) retracts records: they leave every later read and stay in the
log, readable as of before the delete (``Membrane.forget`` erases a record's content).

How a checkpoint is filed:

* record id ``langgraph:checkpoint:<thread>:<ns>:<checkpoint id>:<generation>`` (each part
  percent-encoded), so a checkpoint is found by id and a thread's ids, listed without
  loading a record (``Membrane.record_ids``), give its checkpoints in order; a checkpoint
  stored again under the same id is a new generation, the old one retracted;
* its pending writes: ``langgraph:writes:<same>:<n>``, one record per ``put_writes``;
* the payload's ``context_summary`` is a readable line, what the record is searched by
  (by its words: no vector is made, whatever the store's embedder); the bytes of
  LangGraph's own serializer (``serde``) travel base64-encoded in the one free-form field
  of a working payload, ``active_constraints[0].value``, out of the text index;
* a channel's value is stored once, in the checkpoint whose ``new_versions`` name it; later
  checkpoints point at that record (``located``), as LangGraph's own savers keep one blob a
  channel version.

The caller's trust applies: records are written at ``sensitivity`` (not above the trust's
ceiling), read under the trust context, and a thread outside the trust's scopes does not
exist for this saver.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    SerializerProtocol,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)

from membrane_es import (
    AccessDeniedError,
    AlreadyExistsError,
    Membrane,
    MemoryRecord,
    NotFoundError,
    ReadOnlyError,
    Sensitivity,
    TrustContext,
    ValidationError,
    WorkingPayload,
)

__all__ = ["MembraneSaver"]

SCOPE_PREFIX = "langgraph:"
_CHECKPOINT = "langgraph:checkpoint:"
_WRITES = "langgraph:writes:"
_LEVELS = {level: rank for rank, level in enumerate(Sensitivity)}
_STRATEGIES = ("keep_latest", "delete")
HERE = ""  # a channel value held by the checkpoint's own record
LISTINGS_KEPT = 1024  # threads whose listing a saver keeps between calls

Serialized = list[str]  # [serde type, base64 bytes]


@dataclass
class _Thread:
    """A thread's live records, from one listing: checkpoint record ids by namespace and
    checkpoint id (namespaces in the order they first appear), and write record ids by the
    checkpoint record they belong to, in the order they were written."""

    checkpoints: dict[str, dict[str, str]] = field(default_factory=dict)
    writes: dict[str, list[str]] = field(default_factory=dict)

    def joined(self, other: _Thread) -> _Thread:
        """This thread with the records of ``other`` (created after them) added: a copy,
        so a reader holding this one never sees it change."""
        checkpoints = {ns: dict(by_id) for ns, by_id in self.checkpoints.items()}
        for ns, by_id in other.checkpoints.items():
            checkpoints.setdefault(ns, {}).update(by_id)
        writes = dict(self.writes)
        for owner, record_ids in other.writes.items():
            writes[owner] = [*writes.get(owner, []), *record_ids]
        return _Thread(checkpoints, writes)


class MembraneSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer whose checkpoints are events in a :class:`~membrane_es.Membrane`.

    :param memory: the store (``Membrane.open(path)`` for one that survives restarts).
    :param trust: who reads: records above its ceiling or outside its scopes are not seen.
        Default: a reader whose ceiling is ``sensitivity``.
    :param sensitivity: the sensitivity checkpoints are written at (at most the trust's).
    :param actor: the actor named in the records' events.
    :param serde: LangGraph's serializer (default: its ``JsonPlusSerializer``).
    """

    def __init__(
        self,
        memory: Membrane,
        *,
        trust: TrustContext | None = None,
        sensitivity: str = "low",
        actor: str = "langgraph",
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if not isinstance(memory, Membrane):
            raise ValidationError("memory", f"must be a Membrane, not {type(memory).__name__}")
        if sensitivity not in _LEVELS:
            raise ValidationError(
                "sensitivity", f"must be one of {', '.join(_LEVELS)}, not {sensitivity!r}"
            )
        if trust is None:
            trust = TrustContext(max_sensitivity=Sensitivity(sensitivity))
        if not isinstance(trust, TrustContext):
            raise ValidationError("trust", f"must be a TrustContext, not {type(trust).__name__}")
        if _LEVELS.get(trust.max_sensitivity, -1) < _LEVELS[Sensitivity(sensitivity)]:
            raise ValidationError(
                "sensitivity",
                f"{sensitivity} is above the trust ceiling {trust.max_sensitivity}: "
                "this saver could not read back what it writes",
            )
        if not isinstance(actor, str) or not actor.strip():
            raise ValidationError("actor", "actor is required")
        self.memory = memory
        self.trust = trust
        self.sensitivity = sensitivity
        self.actor = actor
        self.moment: datetime | None = None
        # thread id → (views position, its records then): a thread listed again only when
        # the store moved, or by more than this saver's own writes to that thread
        self._listed: dict[str, tuple[int, _Thread]] = {}
        self._listing_lock = threading.Lock()

    # --- time travel ----------------------------------------------------------------------

    def as_of(self, moment: datetime) -> MembraneSaver:
        """A read-only saver answering as the store stood at ``moment`` (every thread,
        checkpoint and pending write as then, deleted ones included); writes raise
        :class:`~membrane_es.ReadOnlyError`."""
        if not isinstance(moment, datetime) or moment.tzinfo is None:
            raise ValidationError("moment", "must be a datetime with a time zone")
        past = MembraneSaver(
            self.memory,
            trust=self.trust,
            sensitivity=self.sensitivity,
            actor=self.actor,
            serde=self.serde,
        )
        past.moment = moment
        return past

    # --- reads ----------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, ns = _address(config)
        checkpoint_id = _optional_checkpoint_id(config)
        if not self._visible(thread_id):
            return None
        thread = self._thread(thread_id)
        in_ns = thread.checkpoints.get(ns, {})
        if checkpoint_id is None:
            if not in_ns:
                return None
            checkpoint_id = max(in_ns)
        record_id = in_ns.get(checkpoint_id)
        if record_id is None:
            return None
        return self._tuple(thread_id, record_id, thread, {})

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        if filter is not None and not isinstance(filter, Mapping):
            raise ValidationError("filter", f"must be a dict, not {type(filter).__name__}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValidationError("limit", f"must be a whole number, not {limit!r}")
        before_id = _optional_checkpoint_id(before, "before") if before is not None else None
        if config is None:
            threads = self._threads()
            wanted_ns: str | None = None
            wanted_id: str | None = None
        else:
            thread_id, _ = _address(config)
            configurable = config["configurable"]
            wanted_ns = configurable.get("checkpoint_ns")
            if wanted_ns is not None and not isinstance(wanted_ns, str):
                raise ValidationError("config.configurable.checkpoint_ns", "must be a string")
            wanted_id = _optional_checkpoint_id(config)
            threads = {thread_id: self._thread(thread_id)} if self._visible(thread_id) else {}
        remaining = limit
        cache: dict[str, dict[str, Any]] = {}
        for thread_id, thread in threads.items():
            for ns, checkpoints in thread.checkpoints.items():
                if wanted_ns is not None and ns != wanted_ns:
                    continue
                for checkpoint_id in sorted(checkpoints, reverse=True):
                    if wanted_id is not None and checkpoint_id != wanted_id:
                        continue
                    if before_id is not None and checkpoint_id >= before_id:
                        continue
                    record_id = checkpoints[checkpoint_id]
                    if filter:
                        metadata = self._loads(self._data(record_id, cache)["metadata"])
                        if not all(metadata.get(k) == v for k, v in filter.items()):
                            continue
                    if remaining is not None:
                        if remaining <= 0:
                            return
                        remaining -= 1
                    yield self._tuple(thread_id, record_id, thread, cache)

    def _tuple(
        self, thread_id: str, record_id: str, thread: _Thread, cache: dict[str, dict[str, Any]]
    ) -> CheckpointTuple:
        data = self._data(record_id, cache)
        checkpoint: Checkpoint = self._loads(data["checkpoint"])
        values: dict[str, Any] = {}
        for channel, holder in data["located"].items():
            held = data if holder == HERE else self._data(holder, cache)
            if channel in held["values"]:
                values[channel] = self._loads(held["values"][channel])
        ns, checkpoint_id, parent = data["ns"], data["checkpoint_id"], data["parent"]
        return CheckpointTuple(
            config=_config(thread_id, ns, checkpoint_id),
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self._loads(data["metadata"]),
            parent_config=_config(thread_id, ns, parent) if parent else None,
            pending_writes=self._pending_writes(thread.writes.get(record_id, []), cache),
        )

    def _pending_writes(
        self, record_ids: Sequence[str], cache: dict[str, dict[str, Any]]
    ) -> builtins.list[PendingWrite]:
        """The writes of one checkpoint: a regular write stored twice counts once (the
        first), a special one (error, interrupt…) stored again replaces the earlier one,
        as LangGraph's own savers do; in the order a super-step applies them."""
        merged: dict[tuple[str, int], tuple[str, str, Serialized]] = {}
        for record_id in record_ids:
            data = self._data(record_id, cache)
            task_id, task_path = data["task_id"], data["task_path"]
            for idx, channel, value in data["writes"]:
                key = (task_id, idx)
                if idx >= 0 and key in merged:
                    continue
                merged[key] = (task_path, channel, value)
        ordered = sorted(merged, key=lambda key: writes_sort_key(merged[key][0], *key))
        return [(key[0], merged[key][1], self._loads(merged[key][2])) for key in ordered]

    # --- writes ---------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._check_writable()
        thread_id, ns = _address(config)
        parent_id = _optional_checkpoint_id(config)
        checkpoint_id, versions, values = _checked_checkpoint(checkpoint)
        if not isinstance(metadata, Mapping):
            raise ValidationError("metadata", f"must be a dict, not {type(metadata).__name__}")
        if not isinstance(new_versions, Mapping):
            raise ValidationError(
                "new_versions", f"must be a dict, not {type(new_versions).__name__}"
            )
        self._check_may_write(thread_id)
        merged_metadata = get_checkpoint_metadata(config, metadata)
        parent = self._parent_data(thread_id, ns, parent_id)
        stored: dict[str, Serialized] = {}
        located: dict[str, str] = {}
        for channel, version in versions.items():
            if channel in new_versions or parent is None:
                if channel in values:  # a new version without a value is an empty channel
                    stored[channel] = self._dumps(values[channel])
                    located[channel] = HERE
            elif parent["versions"].get(channel) == version and channel in parent["located"]:
                held_by = parent["located"][channel]
                located[channel] = parent["record_id"] if held_by == HERE else held_by
            elif channel in values:
                stored[channel] = self._dumps(values[channel])
                located[channel] = HERE
        data = {
            "thread_id": thread_id,
            "ns": ns,
            "checkpoint_id": checkpoint_id,
            "parent": parent_id,
            "checkpoint": self._dumps(
                {k: v for k, v in checkpoint.items() if k != "channel_values"}
            ),
            "metadata": self._dumps(merged_metadata),
            "run_id": _run_id(merged_metadata),
            "versions": dict(versions),
            "values": stored,
            "located": located,
        }
        step, source = merged_metadata.get("step"), merged_metadata.get("source")
        summary = (
            f"LangGraph checkpoint {checkpoint_id} of thread {thread_id}"
            f"{f' namespace {ns}' if ns else ''}: step {step}, source {source}"
        )
        base = _checkpoint_base(thread_id, ns, checkpoint_id)
        while True:
            generation, replaced = self._next_generation(thread_id, ns, checkpoint_id, base)
            record = self._record(f"{base}:{generation}", thread_id, summary, "checkpoint", data)
            try:
                self._save(
                    [record],
                    retract=[replaced] if replaced else [],
                    why="stored again",
                    thread_id=thread_id,
                )
            except AlreadyExistsError:  # the same checkpoint stored at the same moment
                continue
            break
        return _config(thread_id, ns, checkpoint_id)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._check_writable()
        thread_id, ns = _address(config)
        checkpoint_id = _optional_checkpoint_id(config)
        if checkpoint_id is None:
            raise ValidationError(
                "config.configurable.checkpoint_id", "pending writes need the checkpoint's id"
            )
        if not isinstance(task_id, str) or not task_id:
            raise ValidationError("task_id", "task_id is required")
        if not isinstance(task_path, str):
            raise ValidationError("task_path", "must be a string")
        pairs = _checked_writes(writes)
        self._check_may_write(thread_id)
        thread = self._thread(thread_id)
        # Writes belong to the live generation of their checkpoint, or to the first one
        # when the checkpoint is not stored yet (LangGraph may save them first).
        target = thread.checkpoints.get(ns, {}).get(checkpoint_id)
        owner = target or f"{_checkpoint_base(thread_id, ns, checkpoint_id)}:1"
        existing = thread.writes.get(owner, [])
        cache: dict[str, dict[str, Any]] = {}
        known: set[tuple[str, int]] = {
            (data["task_id"], idx)
            for data in (self._data(record_id, cache) for record_id in existing)
            for idx, _, _ in data["writes"]
        }
        entries: builtins.list[tuple[int, str, Serialized]] = []
        for position, (channel, value) in enumerate(pairs):
            idx = WRITES_IDX_MAP.get(channel, position)
            if idx >= 0 and (task_id, idx) in known:
                continue  # stored already: the same task's same write, sent again
            entries.append((idx, channel, self._dumps(value)))
        if not entries:
            return
        number = len(existing) + 1
        writes_base = _WRITES + owner.removeprefix(_CHECKPOINT)
        while self._exists(f"{writes_base}:{number}", thread_id):
            number += 1
        data = {
            "thread_id": thread_id,
            "ns": ns,
            "checkpoint_id": checkpoint_id,
            "task_id": task_id,
            "task_path": task_path,
            "writes": entries,
        }
        channels = ", ".join(dict.fromkeys(entry[1] for entry in entries))
        summary = f"LangGraph writes of task {task_id} at checkpoint {checkpoint_id}: {channels}"
        while True:
            record = self._record(f"{writes_base}:{number}", thread_id, summary, "writes", data)
            try:
                self._save([record], thread_id=thread_id)
            except AlreadyExistsError:  # a concurrent task's writes took this number
                number += 1
                continue
            break

    def delete_thread(self, thread_id: str) -> None:
        """Retract every checkpoint and pending write of the thread (all in one write)."""
        self._check_writable()
        thread_id = _thread_id(thread_id, "thread_id")
        if not self._visible(thread_id):
            return
        thread = self._thread(thread_id)
        self._save([], retract=_all_records(thread), why=f"thread {thread_id} deleted")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Retract the checkpoints whose metadata names one of these runs, with their
        pending writes (all in one write)."""
        self._check_writable()
        wanted = set(_strings("run_ids", run_ids))
        if not wanted:
            return
        doomed: list[str] = []
        cache: dict[str, dict[str, Any]] = {}
        for thread in self._threads().values():
            for checkpoints in thread.checkpoints.values():
                for record_id in checkpoints.values():
                    if self._data(record_id, cache).get("run_id") in wanted:
                        doomed.append(record_id)
                        doomed.extend(thread.writes.get(record_id, []))
        self._save([], retract=doomed, why="run deleted")

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and pending write of a thread to another (one write); the
        copies are new records of the target thread, their ids the same checkpoint ids."""
        self._check_writable()
        source = _thread_id(source_thread_id, "source_thread_id")
        target = _thread_id(target_thread_id, "target_thread_id")
        if not self._visible(source):
            return
        self._check_may_write(target)
        thread, existing = self._thread(source), self._thread(target)
        cache: dict[str, dict[str, Any]] = {}
        renamed: dict[str, str] = {}
        records: list[dict[str, Any]] = []
        replaced: list[str] = []
        for ns, checkpoints in thread.checkpoints.items():
            for checkpoint_id in sorted(checkpoints):
                old_id = checkpoints[checkpoint_id]
                base = _checkpoint_base(target, ns, checkpoint_id)
                generation, previous = self._next_generation(target, ns, checkpoint_id, base)
                if previous:
                    replaced.extend([previous, *existing.writes.get(previous, [])])
                renamed[old_id] = new_id = f"{base}:{generation}"
                data = dict(self._data(old_id, cache), thread_id=target)
                located, values = {}, dict(data["values"])
                for channel, holder in data["located"].items():
                    if holder == HERE:
                        located[channel] = HERE
                    elif holder in renamed:
                        located[channel] = renamed[holder]
                    else:  # held by a record that is not copied (pruned): copy the value
                        held = self._data(holder, cache)["values"]
                        if channel in held:
                            values[channel] = held[channel]
                            located[channel] = HERE
                data.update(located=located, values=values)
                summary = f"LangGraph checkpoint {checkpoint_id} of thread {target}, copied"
                records.append(self._record(new_id, target, summary, "checkpoint", data))
                for number, write_id in enumerate(thread.writes.get(old_id, []), start=1):
                    write = dict(self._data(write_id, cache), thread_id=target)
                    write_record_id = f"{_WRITES}{new_id.removeprefix(_CHECKPOINT)}:{number}"
                    summary = f"LangGraph writes of task {write['task_id']}, copied"
                    records.append(self._record(write_record_id, target, summary, "writes", write))
        self._save(records, retract=replaced, why=f"replaced by a copy of thread {source}")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: retract all but the newest checkpoint of each namespace (its
        pending writes stay; channel values it points to stay readable in the log);
        ``delete``: retract the threads. One write."""
        self._check_writable()
        if strategy not in _STRATEGIES:
            raise ValidationError("strategy", f"must be one of {', '.join(_STRATEGIES)}")
        doomed: list[str] = []
        for thread_id in _strings("thread_ids", thread_ids):
            if not self._visible(thread_id):
                continue
            thread = self._thread(thread_id)
            if strategy == "delete":
                doomed.extend(_all_records(thread))
                continue
            for checkpoints in thread.checkpoints.values():
                latest = max(checkpoints)
                for checkpoint_id, record_id in checkpoints.items():
                    if checkpoint_id != latest:
                        doomed.extend([record_id, *thread.writes.get(record_id, [])])
        self._save([], retract=doomed, why=f"pruned ({strategy})")

    # --- async: the same operations on a worker thread (the engine is thread-safe) -------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        def listed() -> builtins.list[CheckpointTuple]:
            return list(self.list(config, filter=filter, before=before, limit=limit))

        for item in await asyncio.to_thread(listed):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    # --- the records ----------------------------------------------------------------------

    def _scope_trust(self, thread_id: str) -> TrustContext:
        """The caller's trust narrowed to one thread's scope (a listing then costs the
        thread's records, not the store's)."""
        trust = self.trust
        return TrustContext(
            max_sensitivity=trust.max_sensitivity,
            authenticated=trust.authenticated,
            actor_id=trust.actor_id,
            scopes=[SCOPE_PREFIX + thread_id],
        )

    def _visible(self, thread_id: str) -> bool:
        return not self.trust.scopes or SCOPE_PREFIX + thread_id in self.trust.scopes

    def _check_may_write(self, thread_id: str) -> None:
        if not self._visible(thread_id):
            raise AccessDeniedError(SCOPE_PREFIX + thread_id)

    def _check_writable(self) -> None:
        if self.moment is not None:
            raise ReadOnlyError("a saver reading as of a past moment cannot write")

    def _thread(self, thread_id: str) -> _Thread:
        live = self.moment is None
        position = self.memory.position
        if live:
            known = self._listed.get(thread_id)
            if known is not None and known[0] == position:
                return known[1]
        ids = self.memory.record_ids(
            trust=self._scope_trust(thread_id), memory_types=["working"], as_of=self.moment
        )
        thread = self._threads_of(ids).get(thread_id, _Thread())
        if live:
            self._remember(thread_id, position, thread)
        return thread

    def _remember(self, thread_id: str, position: int, thread: _Thread) -> None:
        with self._listing_lock:  # the async methods run on worker threads
            self._listed.pop(thread_id, None)  # re-inserted last: the oldest goes first
            self._listed[thread_id] = (position, thread)
            while len(self._listed) > LISTINGS_KEPT:
                self._listed.pop(next(iter(self._listed)))

    def _threads(self) -> dict[str, _Thread]:
        """Every thread the trust may read (a listing of the store, or of its scopes)."""
        ids = self.memory.record_ids(trust=self.trust, memory_types=["working"], as_of=self.moment)
        return self._threads_of(ids)

    @staticmethod
    def _threads_of(record_ids: Iterable[str]) -> dict[str, _Thread]:
        """Threads by (encoded) id from a listing; parsed on every read, so kept lean."""
        threads: dict[str, _Thread] = {}
        checkpoint_prefix, writes_prefix = len(_CHECKPOINT), len(_WRITES)
        for record_id in record_ids:
            if record_id.startswith(_CHECKPOINT):
                parts = record_id[checkpoint_prefix:].split(":")
                if len(parts) == 4:
                    thread = threads.get(parts[0]) or threads.setdefault(parts[0], _Thread())
                    by_id = thread.checkpoints.get(parts[1])
                    if by_id is None:
                        by_id = thread.checkpoints[parts[1]] = {}
                    by_id[_decoded(parts[2])] = record_id
            elif record_id.startswith(_WRITES):
                parts = record_id[writes_prefix:].split(":")
                if len(parts) == 5:
                    owner = _CHECKPOINT + ":".join(parts[:4])
                    thread = threads.get(parts[0]) or threads.setdefault(parts[0], _Thread())
                    thread.writes.setdefault(owner, []).append(record_id)
        for thread in threads.values():
            thread.checkpoints = {_decoded(ns): ids for ns, ids in thread.checkpoints.items()}
        return {_decoded(thread_id): thread for thread_id, thread in threads.items()}

    def _data(self, record_id: str, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """What a checkpoint or writes record holds (read once per operation)."""
        if record_id not in cache:
            thread_id = _decoded(record_id.split(":")[2])
            record = self.memory.retrieve_by_id(
                record_id, trust=self._scope_trust(thread_id), as_of=self.moment
            )
            cache[record_id] = _held(record)
        return cache[record_id]

    def _parent_data(self, thread_id: str, ns: str, parent_id: str | None) -> dict[str, Any] | None:
        if parent_id is None:
            return None
        base = _checkpoint_base(thread_id, ns, parent_id)
        latest: dict[str, Any] | None = None
        generation = 1
        while True:
            record_id = f"{base}:{generation}"
            try:
                latest = {**self._data(record_id, {}), "record_id": record_id}
            except NotFoundError:
                return latest
            generation += 1

    def _next_generation(
        self, thread_id: str, ns: str, checkpoint_id: str, base: str
    ) -> tuple[int, str | None]:
        """The generation a checkpoint stored under this id gets, and the live record it
        replaces (None when there is none: the usual case costs one lookup)."""
        generation = 1
        while self._exists(f"{base}:{generation}", thread_id):
            generation += 1
        if generation == 1:
            return 1, None
        live = self._thread(thread_id).checkpoints.get(ns, {}).get(checkpoint_id)
        return generation, live

    def _exists(self, record_id: str, thread_id: str) -> bool:
        try:
            self.memory.retrieve_by_id(record_id, trust=self._scope_trust(thread_id))
        except NotFoundError:
            return False
        except AccessDeniedError:
            return True
        return True

    def _record(
        self, record_id: str, thread_id: str, summary: str, kind: str, data: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "id": record_id,
            "type": "working",
            "sensitivity": self.sensitivity,
            "scope": SCOPE_PREFIX + thread_id,
            "tags": ["langgraph", kind],
            "provenance": {"created_by": self.actor},
            "payload": {
                "kind": "working",
                "thread_id": thread_id,
                "context_summary": summary,
                "active_constraints": [{"type": "langgraph", "key": kind, "value": data}],
            },
        }

    def _save(
        self,
        records: Sequence[dict[str, Any]],
        *,
        retract: Sequence[str] = (),
        why: str = "",
        thread_id: str | None = None,
    ) -> None:
        """Create and retract records: one durable write, all of it or none. A write that
        only adds records to ``thread_id`` keeps that thread's listing current, when the
        store moved by exactly its events (nobody else wrote meanwhile)."""
        if not records and not retract:
            return
        before = self.memory.position
        if len(records) == 1 and not retract:
            self._create(records[0])
        else:
            with self.memory.batch():
                for record_id in dict.fromkeys(retract):
                    self.memory.retract(record_id, self.actor, why)
                for record in records:
                    self._create(record)
        known = self._listed.get(thread_id or "")
        after = self.memory.position
        if thread_id is None or known is None or retract:
            return
        if known[0] == before and after - before == len(records):
            added = self._threads_of(record["id"] for record in records).get(thread_id)
            if added is not None:
                self._remember(thread_id, after, known[1].joined(added))

    def _create(self, record: dict[str, Any]) -> None:
        # No vector: a checkpoint is read by id, never by similarity, and a model call per
        # step would cost more than the rest of the write.
        self.memory.create_record(record, actor=self.actor, rationale="LangGraph", embed=False)

    def _dumps(self, value: Any) -> Serialized:
        kind, raw = self.serde.dumps_typed(value)
        return [kind, base64.b64encode(raw).decode("ascii")]

    def _loads(self, stored: Serialized) -> Any:
        return self.serde.loads_typed((stored[0], base64.b64decode(stored[1])))


# --- checks and names -----------------------------------------------------------------------


def _held(record: MemoryRecord) -> dict[str, Any]:
    payload = record.payload
    if not isinstance(payload, WorkingPayload) or not payload.active_constraints:
        raise ValidationError("record", f"{record.id} holds no LangGraph data")
    value = payload.active_constraints[0].value
    if not isinstance(value, dict):
        raise ValidationError("record", f"{record.id} holds no LangGraph data")
    return value


def _thread_id(value: object, field: str) -> str:
    """LangGraph's thread ids are strings; numbers and UUIDs are read as their text."""
    if isinstance(value, bool) or value is None:
        raise ValidationError(field, f"must be a string, not {value!r}")
    text = value if isinstance(value, str) else str(value) if isinstance(value, int) else None
    if text is None and type(value).__name__ == "UUID":
        text = str(value)
    if text is None:
        raise ValidationError(field, f"must be a string, not {type(value).__name__}")
    if not text:
        raise ValidationError(field, f"{field} is required")
    return text


def _address(config: object) -> tuple[str, str]:
    """A config's thread id and checkpoint namespace, checked."""
    if not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
        raise ValidationError("config", "must be a dict with a 'configurable' dict")
    configurable = config["configurable"]
    if "thread_id" not in configurable:
        raise ValidationError("config.configurable.thread_id", "thread_id is required")
    thread_id = _thread_id(configurable["thread_id"], "config.configurable.thread_id")
    ns = configurable.get("checkpoint_ns", "")
    if ns is None:
        ns = ""
    if not isinstance(ns, str):
        raise ValidationError("config.configurable.checkpoint_ns", "must be a string")
    return thread_id, ns


def _optional_checkpoint_id(config: object, field: str = "config") -> str | None:
    if not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
        raise ValidationError(field, "must be a dict with a 'configurable' dict")
    checkpoint_id = get_checkpoint_id(config)  # type: ignore[arg-type]
    if checkpoint_id is None or checkpoint_id == "":
        return None
    if not isinstance(checkpoint_id, str):
        raise ValidationError(f"{field}.configurable.checkpoint_id", "must be a string")
    return checkpoint_id


def _checked_checkpoint(checkpoint: object) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if not isinstance(checkpoint, Mapping):
        raise ValidationError("checkpoint", f"must be a dict, not {type(checkpoint).__name__}")
    checkpoint_id = checkpoint.get("id")
    if not isinstance(checkpoint_id, str) or not checkpoint_id:
        raise ValidationError("checkpoint.id", "a checkpoint id (a non-empty string) is required")
    versions = checkpoint.get("channel_versions", {})
    if not isinstance(versions, Mapping):
        raise ValidationError("checkpoint.channel_versions", "must be a dict")
    values = checkpoint.get("channel_values", {})
    if not isinstance(values, Mapping):
        raise ValidationError("checkpoint.channel_values", "must be a dict")
    return checkpoint_id, dict(versions), dict(values)


def _checked_writes(writes: object) -> list[tuple[str, Any]]:
    if isinstance(writes, str | bytes) or not isinstance(writes, Sequence):
        raise ValidationError("writes", "must be a list of (channel, value) pairs")
    pairs = []
    for i, write in enumerate(writes):
        if not isinstance(write, tuple | list) or len(write) != 2:
            raise ValidationError(f"writes[{i}]", "must be a (channel, value) pair")
        channel, value = write
        if not isinstance(channel, str) or not channel:
            raise ValidationError(f"writes[{i}]", "the channel must be a non-empty string")
        pairs.append((channel, value))
    return pairs


def _strings(field: str, values: object) -> list[str]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValidationError(field, "must be a list of strings")
    return [_thread_id(value, f"{field}[{i}]") for i, value in enumerate(values)]


def _decoded(part: str) -> str:
    return unquote(part) if "%" in part else part


def _run_id(metadata: Mapping[str, Any]) -> str | None:
    run_id = metadata.get("run_id")
    return None if run_id is None else str(run_id)


def _all_records(thread: _Thread) -> list[str]:
    checkpoints = [rid for by_id in thread.checkpoints.values() for rid in by_id.values()]
    return [*checkpoints, *(rid for rids in thread.writes.values() for rid in rids)]


def _checkpoint_base(thread_id: str, ns: str, checkpoint_id: str) -> str:
    parts = (quote(part, safe="") for part in (thread_id, ns, checkpoint_id))
    return _CHECKPOINT + ":".join(parts)


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }

"""The checkpointer itself: LangGraph's ``BaseCheckpointSaver`` over a ``Membrane``."""

from __future__ import annotations

import asyncio
import base64
import builtins
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec
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
    get_checkpoint_metadata,
    writes_sort_key,
)

from membrane_es import (
    AccessDeniedError,
    AlreadyExistsError,
    Membrane,
    NotFoundError,
    ReadOnlyError,
    Sensitivity,
    TrustContext,
    ValidationError,
)
from membrane_es.integrations.langgraph_checkpoint.kept import DecodedValues, KeptRecords
from membrane_es.integrations.langgraph_checkpoint.records import (
    CHECKPOINT_PREFIX,
    HERE,
    LEVELS,
    LISTINGS_KEPT,
    SCOPE_PREFIX,
    STRATEGIES,
    WRITES_PREFIX,
    Serialized,
    ThreadRecords,
    address_of,
    all_records_of,
    checked_checkpoint,
    checked_strings,
    checked_thread_id,
    checked_writes,
    checkpoint_base_id,
    config_for,
    decoded_part,
    held_values,
    optional_checkpoint_id,
    run_id_of,
)

_COPY_ENCODER = msgspec.msgpack.Encoder()
_COPY_DECODER = msgspec.msgpack.Decoder()


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
        if sensitivity not in LEVELS:
            raise ValidationError(
                "sensitivity", f"must be one of {', '.join(LEVELS)}, not {sensitivity!r}"
            )
        if trust is None:
            trust = TrustContext(max_sensitivity=Sensitivity(sensitivity))
        if not isinstance(trust, TrustContext):
            raise ValidationError("trust", f"must be a TrustContext, not {type(trust).__name__}")
        if LEVELS.get(trust.max_sensitivity, -1) < LEVELS[Sensitivity(sensitivity)]:
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
        self._listed: dict[str, tuple[int, ThreadRecords]] = {}
        self._listing_lock = threading.Lock()
        # What the records the saver read or wrote hold, kept while no event touches them,
        # and the bytes of the values read again.
        self._kept = KeptRecords(memory)
        self._decoded = DecodedValues()

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
        thread_id, ns = address_of(config)
        checkpoint_id = optional_checkpoint_id(config)
        if not self._visible(thread_id):
            return None
        self._follow()
        thread = self._thread(thread_id)
        in_ns = thread.checkpoints.get(ns, {})
        if checkpoint_id is None:
            checkpoint_id = thread.latest(ns)
            if checkpoint_id is None:
                return None
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
        before_id = optional_checkpoint_id(before, "before") if before is not None else None
        self._follow()
        if config is None:
            threads = self._threads()
            wanted_ns: str | None = None
            wanted_id: str | None = None
        else:
            thread_id, _ = address_of(config)
            configurable = config["configurable"]
            wanted_ns = configurable.get("checkpoint_ns")
            if wanted_ns is not None and not isinstance(wanted_ns, str):
                raise ValidationError("config.configurable.checkpoint_ns", "must be a string")
            wanted_id = optional_checkpoint_id(config)
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
        self,
        thread_id: str,
        record_id: str,
        thread: ThreadRecords,
        cache: dict[str, dict[str, Any]],
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
            config=config_for(thread_id, ns, checkpoint_id),
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self._loads(data["metadata"]),
            parent_config=config_for(thread_id, ns, parent) if parent else None,
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
        thread_id, ns = address_of(config)
        parent_id = optional_checkpoint_id(config)
        checkpoint_id, versions, values = checked_checkpoint(checkpoint)
        if not isinstance(metadata, Mapping):
            raise ValidationError("metadata", f"must be a dict, not {type(metadata).__name__}")
        if not isinstance(new_versions, Mapping):
            raise ValidationError(
                "new_versions", f"must be a dict, not {type(new_versions).__name__}"
            )
        self._check_may_write(thread_id)
        merged_metadata = get_checkpoint_metadata(config, metadata)
        self._follow()
        if thread_id not in self._listed:
            # Listed once: this saver's own writes keep the listing current, and it names
            # the parent's record and the generation without looking either up.
            self._thread(thread_id)
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
            "run_id": run_id_of(merged_metadata),
            "versions": dict(versions),
            "values": stored,
            "located": located,
        }
        step, source = merged_metadata.get("step"), merged_metadata.get("source")
        summary = (
            f"LangGraph checkpoint {checkpoint_id} of thread {thread_id}"
            f"{f' namespace {ns}' if ns else ''}: step {step}, source {source}"
        )
        base = checkpoint_base_id(thread_id, ns, checkpoint_id)
        probe = False  # first trust the thread's listing, when it is current
        while True:
            generation, replaced = self._next_generation(
                thread_id, ns, checkpoint_id, base, listed_first=not probe
            )
            record = self._record(f"{base}:{generation}", thread_id, summary, "checkpoint", data)
            try:
                self._save(
                    [record],
                    retract=[replaced] if replaced else [],
                    why="stored again",
                    thread_id=thread_id,
                    data=data,
                )
            except AlreadyExistsError:
                # The same checkpoint stored at the same moment, or a generation the listing
                # does not show (retracted): look the generations up one by one.
                probe = True
                continue
            break
        return config_for(thread_id, ns, checkpoint_id)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._check_writable()
        thread_id, ns = address_of(config)
        checkpoint_id = optional_checkpoint_id(config)
        if checkpoint_id is None:
            raise ValidationError(
                "config.configurable.checkpoint_id", "pending writes need the checkpoint's id"
            )
        if not isinstance(task_id, str) or not task_id:
            raise ValidationError("task_id", "task_id is required")
        if not isinstance(task_path, str):
            raise ValidationError("task_path", "must be a string")
        pairs = checked_writes(writes)
        self._check_may_write(thread_id)
        thread = self._thread(thread_id)
        # Writes belong to the live generation of their checkpoint, or to the first one
        # when the checkpoint is not stored yet (LangGraph may save them first).
        target = thread.checkpoints.get(ns, {}).get(checkpoint_id)
        owner = target or f"{checkpoint_base_id(thread_id, ns, checkpoint_id)}:1"
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
        writes_base = WRITES_PREFIX + owner.removeprefix(CHECKPOINT_PREFIX)
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
        thread_id = checked_thread_id(thread_id, "thread_id")
        if not self._visible(thread_id):
            return
        thread = self._thread(thread_id)
        self._save([], retract=all_records_of(thread), why=f"thread {thread_id} deleted")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Retract the checkpoints whose metadata names one of these runs, with their
        pending writes (all in one write)."""
        self._check_writable()
        wanted = set(checked_strings("run_ids", run_ids))
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
        source = checked_thread_id(source_thread_id, "source_thread_id")
        target = checked_thread_id(target_thread_id, "target_thread_id")
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
                base = checkpoint_base_id(target, ns, checkpoint_id)
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
                    write_record_id = (
                        f"{WRITES_PREFIX}{new_id.removeprefix(CHECKPOINT_PREFIX)}:{number}"
                    )
                    summary = f"LangGraph writes of task {write['task_id']}, copied"
                    records.append(self._record(write_record_id, target, summary, "writes", write))
        self._save(records, retract=replaced, why=f"replaced by a copy of thread {source}")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: retract all but the newest checkpoint of each namespace (its
        pending writes stay; channel values it points to stay readable in the log);
        ``delete``: retract the threads. One write."""
        self._check_writable()
        if strategy not in STRATEGIES:
            raise ValidationError("strategy", f"must be one of {', '.join(STRATEGIES)}")
        doomed: list[str] = []
        for thread_id in checked_strings("thread_ids", thread_ids):
            if not self._visible(thread_id):
                continue
            thread = self._thread(thread_id)
            if strategy == "delete":
                doomed.extend(all_records_of(thread))
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

    def _thread(self, thread_id: str) -> ThreadRecords:
        live = self.moment is None
        position = self.memory.position
        if live:
            known = self._listed.get(thread_id)
            if known is not None and known[0] == position:
                return known[1]
        ids = self.memory.record_ids(
            trust=self._scope_trust(thread_id), memory_types=["working"], as_of=self.moment
        )
        thread = self._threads_of(ids).get(thread_id, ThreadRecords())
        if live:
            self._remember(thread_id, position, thread)
        return thread

    def _remember(self, thread_id: str, position: int, thread: ThreadRecords) -> None:
        with self._listing_lock:  # the async methods run on worker threads
            self._listed.pop(thread_id, None)  # re-inserted last: the oldest goes first
            self._listed[thread_id] = (position, thread)
            while len(self._listed) > LISTINGS_KEPT:
                self._listed.pop(next(iter(self._listed)))

    def _threads(self) -> dict[str, ThreadRecords]:
        """Every thread the trust may read (a listing of the store, or of its scopes)."""
        ids = self.memory.record_ids(trust=self.trust, memory_types=["working"], as_of=self.moment)
        return self._threads_of(ids)

    @staticmethod
    def _threads_of(record_ids: Iterable[str]) -> dict[str, ThreadRecords]:
        """Threads by (encoded) id from a listing; parsed on every read, so kept lean."""
        threads: dict[str, ThreadRecords] = {}
        checkpoint_prefix, writes_prefix = len(CHECKPOINT_PREFIX), len(WRITES_PREFIX)
        for record_id in record_ids:
            if record_id.startswith(CHECKPOINT_PREFIX):
                parts = record_id[checkpoint_prefix:].split(":")
                if len(parts) == 4:
                    thread = threads.get(parts[0]) or threads.setdefault(parts[0], ThreadRecords())
                    by_id = thread.checkpoints.get(parts[1])
                    if by_id is None:
                        by_id = thread.checkpoints[parts[1]] = {}
                    by_id[decoded_part(parts[2])] = record_id
            elif record_id.startswith(WRITES_PREFIX):
                parts = record_id[writes_prefix:].split(":")
                if len(parts) == 5:
                    owner = CHECKPOINT_PREFIX + ":".join(parts[:4])
                    thread = threads.get(parts[0]) or threads.setdefault(parts[0], ThreadRecords())
                    thread.writes.setdefault(owner, []).append(record_id)
        for thread in threads.values():
            thread.checkpoints = {decoded_part(ns): ids for ns, ids in thread.checkpoints.items()}
        return {decoded_part(thread_id): thread for thread_id, thread in threads.items()}

    def _data(self, record_id: str, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """What a checkpoint or writes record holds (read once per operation, and kept
        while the log does not touch it)."""
        found = cache.get(record_id)
        if found is None and self.moment is None:
            found = self._kept.get(record_id)
        if found is None:
            kept_at = self._kept.at  # read before: what is kept is at least this current
            thread_id = decoded_part(record_id.split(":")[2])
            record = self.memory.retrieve_by_id(
                record_id, trust=self._scope_trust(thread_id), as_of=self.moment
            )
            found = held_values(record)
            if self.moment is None:
                self._kept.keep(record_id, found, kept_at)
        cache[record_id] = found
        return found

    def _follow(self) -> None:
        """Bring what the saver keeps up to date with the log (see :class:`KeptRecords`)."""
        if self.moment is None:
            self._kept.follow()

    def _parent_data(self, thread_id: str, ns: str, parent_id: str | None) -> dict[str, Any] | None:
        if parent_id is None:
            return None
        live = self._live_record(thread_id, ns, parent_id)
        if live is not None:  # the listing is current: its live record is the latest
            return {**self._data(live, {}), "record_id": live}
        base = checkpoint_base_id(thread_id, ns, parent_id)
        latest: dict[str, Any] | None = None
        generation = 1
        while True:
            record_id = f"{base}:{generation}"
            try:
                latest = {**self._data(record_id, {}), "record_id": record_id}
            except NotFoundError:
                return latest
            generation += 1

    def _live_record(self, thread_id: str, ns: str, checkpoint_id: str) -> str | None:
        """The checkpoint's live record from the thread's listing, if that listing is current
        (None: not listed, or the listing is not current)."""
        known = self._listed.get(thread_id)
        if known is None or known[0] != self.memory.position:
            return None
        return known[1].checkpoints.get(ns, {}).get(checkpoint_id)

    def _listed_now(self, thread_id: str) -> ThreadRecords | None:
        known = self._listed.get(thread_id)
        return None if known is None or known[0] != self.memory.position else known[1]

    def _next_generation(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        base: str,
        *,
        listed_first: bool = False,
    ) -> tuple[int, str | None]:
        """The generation a checkpoint stored under this id gets, and the live record it
        replaces (None when there is none: the usual case costs one lookup).
        ``listed_first``: answer from the thread's listing when it is current — one past its
        live record, or the first when none is live — without a lookup; a retracted later
        generation the listing cannot show makes the write fail, and the caller asks again
        without it."""
        if listed_first and self.moment is None:
            listed = self._listed_now(thread_id)
            if listed is not None:
                live = listed.checkpoints.get(ns, {}).get(checkpoint_id)
                if live is None:
                    return 1, None
                return int(live.rsplit(":", 1)[1]) + 1, live
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
        data: dict[str, Any] | None = None,
    ) -> None:
        """Create and retract records: one durable write, all of it or none. A write that
        only adds records to ``thread_id`` keeps that thread's listing current, when the
        store moved by exactly its events (nobody else wrote meanwhile); so does the single
        record it creates with ``data`` for what the saver keeps."""
        if not records and not retract:
            return
        before = self.memory.position
        followed = self._kept.at == before
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
        if followed and data is not None and len(records) == 1 and after == before + 1:
            # Nothing but this record's creation came after what the saver followed: what
            # it keeps is still current, and the new record holds ``data`` (a copy made as
            # the engine stores it: tuples become lists).
            self._kept.moved_by_own_write(before, after)
            copied = _COPY_DECODER.decode(_COPY_ENCODER.encode(data))
            self._kept.keep(records[0]["id"], copied, after)
        if thread_id is None or known is None or retract:
            return
        if known[0] == before and after - before == len(records):
            added = self._threads_of(record["id"] for record in records).get(thread_id)
            if added is not None:
                self._remember(thread_id, after, known[1].joined(added))

    def _create(self, record: dict[str, Any]) -> None:
        # No vector: a checkpoint is read by id, never by similarity, and a model call per
        # step would cost more than the rest of the write.
        self.memory.create_record(
            record, actor=self.actor, rationale="LangGraph", embed=False, resolve=False
        )

    def _dumps(self, value: Any) -> Serialized:
        kind, raw = self.serde.dumps_typed(value)
        return [kind, base64.b64encode(raw).decode("ascii")]

    def _loads(self, stored: Serialized) -> Any:
        # The value itself is made anew for each caller, who may change it.
        raw = self._decoded.raw(stored[1])
        return self.serde.loads_typed((stored[0], raw))


# --- checks and names -----------------------------------------------------------------------

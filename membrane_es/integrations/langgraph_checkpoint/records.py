"""How LangGraph checkpoints map onto records: ids, scopes, the payload's fields, and the
checks on what LangGraph hands the saver (the filing is described in the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    get_checkpoint_id,
)

from membrane_es import (
    MemoryRecord,
    Sensitivity,
    ValidationError,
    WorkingPayload,
)

SCOPE_PREFIX = "langgraph:"
CHECKPOINT_PREFIX = "langgraph:checkpoint:"
WRITES_PREFIX = "langgraph:writes:"
LEVELS = {level: rank for rank, level in enumerate(Sensitivity)}
STRATEGIES = ("keep_latest", "delete")
HERE = ""  # a channel value held by the checkpoint's own record
LISTINGS_KEPT = 1024  # threads whose listing a saver keeps between calls
RECORDS_KEPT = 1024  # records whose data a saver keeps between calls (the latest used)
DECODED_BYTES = 64 * 1024 * 1024  # at most this many bytes of decoded values kept besides

Serialized = list[str]  # [serde type, base64 bytes]


@dataclass
class ThreadRecords:
    """A thread's live records, from one listing: checkpoint record ids by namespace and
    checkpoint id (namespaces in the order they first appear), and write record ids by the
    checkpoint record they belong to, in the order they were written."""

    checkpoints: dict[str, dict[str, str]] = field(default_factory=dict)
    writes: dict[str, list[str]] = field(default_factory=dict)
    # namespace → its newest checkpoint id, found once per listing (a listing is never
    # changed once made: a write makes a new one, see joined)
    _latest: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def latest(self, ns: str) -> str | None:
        """The newest checkpoint id of a namespace (None: it has none)."""
        found = self._latest.get(ns)
        if found is None:
            in_ns = self.checkpoints.get(ns)
            if not in_ns:
                return None
            found = self._latest[ns] = max(in_ns)
        return found

    def joined(self, other: ThreadRecords) -> ThreadRecords:
        """This thread with the records of ``other`` (created after them) added: a copy,
        so a reader holding this one never sees it change."""
        checkpoints = {ns: dict(by_id) for ns, by_id in self.checkpoints.items()}
        for ns, by_id in other.checkpoints.items():
            checkpoints.setdefault(ns, {}).update(by_id)
        writes = dict(self.writes)
        for owner, record_ids in other.writes.items():
            writes[owner] = [*writes.get(owner, []), *record_ids]
        return ThreadRecords(checkpoints, writes)


def held_values(record: MemoryRecord) -> dict[str, Any]:
    payload = record.payload
    if not isinstance(payload, WorkingPayload) or not payload.active_constraints:
        raise ValidationError("record", f"{record.id} holds no LangGraph data")
    value = payload.active_constraints[0].value
    if not isinstance(value, dict):
        raise ValidationError("record", f"{record.id} holds no LangGraph data")
    return value


def checked_thread_id(value: object, field: str) -> str:
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


def address_of(config: object) -> tuple[str, str]:
    """A config's thread id and checkpoint namespace, checked."""
    if not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
        raise ValidationError("config", "must be a dict with a 'configurable' dict")
    configurable = config["configurable"]
    if "thread_id" not in configurable:
        raise ValidationError("config.configurable.thread_id", "thread_id is required")
    thread_id = checked_thread_id(configurable["thread_id"], "config.configurable.thread_id")
    ns = configurable.get("checkpoint_ns", "")
    if ns is None:
        ns = ""
    if not isinstance(ns, str):
        raise ValidationError("config.configurable.checkpoint_ns", "must be a string")
    return thread_id, ns


def optional_checkpoint_id(config: object, field: str = "config") -> str | None:
    if not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
        raise ValidationError(field, "must be a dict with a 'configurable' dict")
    checkpoint_id = get_checkpoint_id(config)  # type: ignore[arg-type]
    if checkpoint_id is None or checkpoint_id == "":
        return None
    if not isinstance(checkpoint_id, str):
        raise ValidationError(f"{field}.configurable.checkpoint_id", "must be a string")
    return checkpoint_id


def checked_checkpoint(checkpoint: object) -> tuple[str, dict[str, Any], dict[str, Any]]:
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


def checked_writes(writes: object) -> list[tuple[str, Any]]:
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


def checked_strings(field: str, values: object) -> list[str]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValidationError(field, "must be a list of strings")
    return [checked_thread_id(value, f"{field}[{i}]") for i, value in enumerate(values)]


def decoded_part(part: str) -> str:
    return unquote(part) if "%" in part else part


def run_id_of(metadata: Mapping[str, Any]) -> str | None:
    run_id = metadata.get("run_id")
    return None if run_id is None else str(run_id)


def all_records_of(thread: ThreadRecords) -> list[str]:
    checkpoints = [rid for by_id in thread.checkpoints.values() for rid in by_id.values()]
    return [*checkpoints, *(rid for rids in thread.writes.values() for rid in rids)]


def checkpoint_base_id(thread_id: str, ns: str, checkpoint_id: str) -> str:
    parts = (quote(part, safe="") for part in (thread_id, ns, checkpoint_id))
    return CHECKPOINT_PREFIX + ":".join(parts)


def config_for(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }

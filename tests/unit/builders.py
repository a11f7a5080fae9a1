"""Small record builders for unit tests: dicts in the reference JSON form, valid by default."""

from __future__ import annotations

from typing import Any

from membrane_es import Membrane, MemoryRecord, TrustContext
from membrane_es.schema import Sensitivity

FULL_TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER)


def semantic(
    subject: str = "service",
    predicate: str = "runs_on",
    obj: Any = "port 8080",
    *,
    evidence: bool = False,
    **fields: Any,
) -> dict[str, Any]:
    """A semantic fact; with ``evidence`` it may also replace another one."""
    payload: dict[str, Any] = {
        "kind": "semantic",
        "subject": subject,
        "predicate": predicate,
        "object": obj,
    }
    if evidence:
        payload["evidence"] = [{"source_type": "observation", "source_id": "obs-1"}]
    return {"type": "semantic", "sensitivity": "low", "payload": payload, **fields}


def episodic(summary: str = "ran the build", **fields: Any) -> dict[str, Any]:
    payload = {"kind": "episodic", "timeline": [{"event_kind": "tool", "summary": summary}]}
    return {"type": "episodic", "sensitivity": "low", "payload": payload, **fields}


def working(thread_id: str = "thread-1", **fields: Any) -> dict[str, Any]:
    payload = {"kind": "working", "thread_id": thread_id, "state": "executing"}
    return {"type": "working", "sensitivity": "low", "payload": payload, **fields}


def competence(skill: str = "deploy", **fields: Any) -> dict[str, Any]:
    payload = {"kind": "competence", "skill_name": skill}
    return {"type": "competence", "sensitivity": "low", "payload": payload, **fields}


def entity(name: str = "Postgres", **fields: Any) -> dict[str, Any]:
    payload = {"kind": "entity", "canonical_name": name, "primary_type": "Database"}
    return {"type": "entity", "sensitivity": "low", "payload": payload, **fields}


def log_size(memory: Membrane) -> int:
    """How many events the log holds (the last notification id)."""
    return memory.application.recorder.max_notification_id() or 0


def read(memory: Membrane, record_id: str) -> MemoryRecord:
    """The record now, read with full trust."""
    return memory.retrieve_by_id(record_id, trust=FULL_TRUST)


def audit_trail(record: MemoryRecord) -> list[tuple[str, str, str]]:
    """(action, actor, rationale) of every audit entry, oldest first."""
    return [(str(e.action), e.actor, e.rationale) for e in record.audit_log]


def plan_graph(intent: str = "release the service", **fields: Any) -> dict[str, Any]:
    payload = {"kind": "plan_graph", "plan_id": "plan-1", "intent": intent}
    return {"type": "plan_graph", "sensitivity": "low", "payload": payload, **fields}

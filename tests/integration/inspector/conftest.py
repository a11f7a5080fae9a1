"""One served store per test module, written once: two tenants, keys with and without a
ceiling, a record revised (superseded, forked, contested, reinforced), a sensitive one, a
secret one and a forgotten one, a conversation of three turns (and a later turn of another
sitting), an entry; and the moment before the revision, for ``as_of``."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from membrane_es.access.keys import Caller, KeyRing
from membrane_es.embedding.hashing import HashingEmbedder
from membrane_es.engine import Membrane
from membrane_es.http_api import HttpServer, create_app
from membrane_es.schema.entries import NewEntry
from membrane_es.schema.enums import Sensitivity
from membrane_es.serving.tenants import Tenants

OWNER = "owner-secret"  # tenant "a", no ceiling
READER = "reader-secret"  # tenant "a", reads up to low
OTHER = "other-secret"  # tenant "b"
FORGOTTEN_TEXT = "cobalt lighthouse manifest"  # the erased record's words
SENSITIVE_TEXT = "vault combination ninety"  # medium: redacted for READER
SECRET_TEXT = "obsidian launch codes"  # high: invisible to READER
OTHER_TENANT_TEXT = "zebra migration ledger"
TURNS = (
    ("user", "Which ramen shop in Kyoto would you pick?", "2026-11-20T10:00:00Z"),
    ("assistant", "Menya Inoichi, near Nishiki market.", "2026-11-20T10:01:00Z"),
    ("user", "Is it open on Mondays?", "2026-11-20T10:02:00Z"),
)
LATER_TURN = ("user", "Book a table for two tonight.", "2026-11-20T14:00:00Z")
ENTRY_TITLE = "Orchid runbook"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


KEYS = KeyRing(
    "",
    [
        (_digest(OWNER), Caller(tenant="a", name="owner")),
        (_digest(READER), Caller(tenant="a", max_sensitivity=Sensitivity.LOW, name="reader")),
        (_digest(OTHER), Caller(tenant="b", name="other")),
    ],
)


def _fact(obj: str, *, sensitivity: str = "low", ref: str = "") -> dict[str, object]:
    record: dict[str, object] = {
        "type": "semantic",
        "sensitivity": sensitivity,
        "tags": ["deploy"],
        "payload": {
            "kind": "semantic",
            "subject": "Orchid",
            "predicate": "deploy_target",
            "object": obj,
        },
    }
    if ref:
        record["provenance"] = {"sources": [{"kind": "observation", "ref": ref}]}
    return record


@dataclass
class Store:
    """The served store and what was written to it."""

    base: str
    tenants: Tenants
    first: str  # superseded by `moved`
    moved: str  # forked to `variant`, contested by it
    variant: str
    sensitive: str
    secret: str
    forgotten: str
    before_move: datetime
    before_forget: datetime  # the forgotten record existed, its content not yet erased
    turns: list[str]  # the conversation's turns, in the order said
    later_turn: str  # a turn of a later sitting
    entry: int  # the entry's number

    @property
    def memory(self) -> Membrane:
        return self.tenants.get("a")

    def client(self, key: str | None) -> httpx.Client:
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        return httpx.Client(base_url=self.base, headers=headers, timeout=30)


def hits(html: str) -> list[str]:
    """The record ids a search page lists, in order."""
    return re.findall(r'data-record="([^"]+)"', html)


def _write(memory: Membrane) -> dict[str, object]:
    first = memory.create_record(_fact("staging"), actor="ops-agent", rationale="heard at stand-up")
    assert first.updated_at is not None
    before_move = first.updated_at
    moved = memory.supersede(
        first.id, _fact("production", ref="release-42"), "ops-agent", "release 42"
    )
    variant = memory.fork(moved.id, _fact("dev cluster", ref="runbook"), "ops-agent", "dev differs")
    memory.contest(moved.id, variant.id, "reviewer", "runbook disagrees")
    sensitive = memory.create_record(
        {
            "type": "semantic",
            "sensitivity": "medium",
            "payload": {
                "kind": "semantic",
                "subject": "Orchid",
                "predicate": "vault",
                "object": SENSITIVE_TEXT,
            },
        }
    )
    secret = memory.create_record(
        {
            "type": "semantic",
            "sensitivity": "high",
            "payload": {
                "kind": "semantic",
                "subject": "Orchid",
                "predicate": "secret",
                "object": SECRET_TEXT,
            },
        }
    )
    forgotten = memory.create_record(
        {
            "type": "semantic",
            "payload": {
                "kind": "semantic",
                "subject": "Orchid",
                "predicate": "note",
                "object": FORGOTTEN_TEXT,
            },
        },
        actor="ops-agent",
        rationale=f"noted {FORGOTTEN_TEXT}",
    )
    assert forgotten.updated_at is not None
    memory.add_relation(forgotten.id, "mentions", moved.id, actor="ops-agent")
    memory.add_relation(sensitive.id, "cites", moved.id, actor="ops-agent")
    memory.forget(forgotten.id, "dpo", "erasure request")
    memory.reinforce(variant.id, "ops-agent", "it helped")
    turns = [
        memory.capture_memory(
            {"speaker": who, "text": text}, scope="chat", source="chat-app", timestamp=at
        ).primary_record.id
        for who, text, at in (*TURNS, LATER_TURN)
    ]
    entry = memory.create_entry(
        NewEntry(type="project", title=ENTRY_TITLE, content="deploys go through staging first"),
        tenant="a",
    )
    return {
        "turns": turns[:-1],
        "later_turn": turns[-1],
        "entry": entry.id,
        "first": first.id,
        "moved": moved.id,
        "variant": variant.id,
        "sensitive": sensitive.id,
        "secret": secret.id,
        "forgotten": forgotten.id,
        "before_move": before_move,
        "before_forget": forgotten.updated_at,
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    root = tmp_path_factory.mktemp("inspector")

    def open_engine(tenant: str, path: Path | None) -> Membrane:
        # vectors give a record the reader sees only redacted its evidence by meaning (its
        # words are no evidence to that reader), so searches show it, redacted
        return Membrane.open(root / f"tenant-{tenant}", embedder=HashingEmbedder())

    tenants = Tenants(":memory:", open_engine)
    written = _write(tenants.get("a"))
    tenants.get("b").create_record(
        {
            "type": "semantic",
            "payload": {
                "kind": "semantic",
                "subject": "Zebra",
                "predicate": "note",
                "object": OTHER_TENANT_TEXT,
            },
        }
    )
    server = HttpServer(create_app(tenants, KEYS), "127.0.0.1:0").start()
    try:
        yield Store(base=f"http://127.0.0.1:{server.port}", tenants=tenants, **written)
    finally:
        server.stop()
        tenants.close()

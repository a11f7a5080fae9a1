"""The inspector's screenshots in docs/ (``inspector-*.png``), taken in Debian's headless
chromium (Playwright drives it; its own browser download is never used).

A small store is written in a scratch directory — a deploy target revised (superseded,
forked, contested, reinforced), an owner, a sensitive note, a conversation of a few turns,
entries — served without keys on loopback, and each view is photographed at 1100×820::

    .venv/bin/python -m bench.ui_screenshots              # writes docs/inspector-*.png
    .venv/bin/python -m bench.ui_screenshots --out /tmp/shots
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from membrane_es import Membrane
from membrane_es.access.keys import KeyRing
from membrane_es.embedding.hashing import HashingEmbedder
from membrane_es.http_api import HttpServer, create_app
from membrane_es.schema.entries import EntryType, NewEntry
from membrane_es.schema.timestamps import rfc3339
from membrane_es.serving.tenants import Tenants

DOCS = Path(__file__).resolve().parent.parent / "docs"
WIDTH, HEIGHT = 1100, 820
SCOPE = "project:orchid"
TURNS = (
    ("user", "Where does Orchid deploy to now?", "2026-11-20T10:00:00Z"),
    (
        "assistant",
        "To production since release 42; before that it went to staging.",
        "2026-11-20T10:01:00Z",
    ),
    ("user", "And the dev cluster?", "2026-11-20T10:02:00Z"),
    (
        "assistant",
        "The runbook says dev differs: it still deploys to the dev cluster.",
        "2026-11-20T10:03:00Z",
    ),
)


def _fact(obj: str, *, ref: str = "", sensitivity: str = "low") -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": "semantic",
        "sensitivity": sensitivity,
        "scope": SCOPE,
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


def write(memory: Membrane) -> dict[str, Any]:
    """The demo store; returns the ids and the moment the views are shot at."""
    first = memory.create_record(_fact("staging"), actor="ops-agent", rationale="heard at stand-up")
    assert first.updated_at is not None
    moved = memory.supersede(
        first.id,
        _fact("production", ref="release-42"),
        "ops-agent",
        "release 42 moved Orchid to production",
    )
    variant = memory.fork(moved.id, _fact("dev cluster", ref="runbook"), "ops-agent", "dev differs")
    memory.contest(moved.id, variant.id, "reviewer", "the runbook disagrees")
    memory.reinforce(moved.id, "ops-agent", "answered a deploy question")
    owner = memory.create_record(
        {
            "type": "semantic",
            "scope": SCOPE,
            "tags": ["deploy"],
            "payload": {
                "kind": "semantic",
                "subject": "Orchid",
                "predicate": "owner",
                "object": "ops team",
            },
        }
    )
    memory.add_relation(moved.id, "owned_by", owner.id, actor="ops-agent")
    memory.create_record(
        {
            "type": "semantic",
            "sensitivity": "high",
            "scope": SCOPE,
            "payload": {
                "kind": "semantic",
                "subject": "Orchid",
                "predicate": "deploy_key",
                "object": "kept in the vault",
            },
        }
    )
    turns = [
        memory.capture_memory(
            {"speaker": who, "text": text}, scope=SCOPE, source="chat-app", timestamp=at
        ).primary_record.id
        for who, text, at in TURNS
    ]
    notes: tuple[tuple[EntryType, str, str], ...] = (
        ("project", "Orchid runbook", "Deploys go through staging first, then production."),
        ("feedback", "Shorter answers", "The user prefers short answers about deploys."),
        ("reference", "Release 42 notes", "Release 42 moved Orchid to production."),
    )
    for kind, title, content in notes:
        memory.create_entry(NewEntry(type=kind, title=title, content=content), tenant=0)
    return {
        "first": first.id,
        "moved": moved.id,
        "turn": turns[-1],
        "before_move": first.updated_at,
    }


def shoot(out: Path, chromium: str) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="membrane-shots-"))
    tenants = Tenants(
        ":memory:",
        lambda tenant, path: Membrane.open(
            root / f"t-{tenant or 'default'}", embedder=HashingEmbedder()
        ),
    )
    try:
        made = write(tenants.get(""))
        server = HttpServer(create_app(tenants, KeyRing()), "127.0.0.1:0").start()
        base = f"http://127.0.0.1:{server.port}/ui"
        moment = quote(rfc3339(made["before_move"]))
        views = {
            "search": f"{base}/?q=where+does+Orchid+deploy&level=medium",
            "timeline": f"{base}/records/{made['moved']}",
            "as-of": f"{base}/?q=where+does+Orchid+deploy&as_of={moment}",
            "graph": f"{base}/records/{made['moved']}/graph?hops=2",
            "metrics": f"{base}/metrics",
            "records": f"{base}/records",
            "conversation": f"{base}/records/{made['turn']}/conversation",
            "entries": f"{base}/entries",
        }
        written = []
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=chromium, headless=True, args=["--no-sandbox"]
                )
                page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
                for name, url in views.items():
                    page.goto(url)
                    target = out / f"inspector-{name}.png"
                    page.screenshot(path=str(target))
                    written.append(target)
                browser.close()
        finally:
            server.stop()
    finally:
        tenants.close()
        shutil.rmtree(root, ignore_errors=True)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DOCS, help="where to write (default docs/)")
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("needs Debian's chromium on PATH (apt-get install chromium)")
    for path in shoot(args.out, chromium):
        print(path)
    print(f"at {rfc3339(datetime.now().astimezone())}")


if __name__ == "__main__":
    main()

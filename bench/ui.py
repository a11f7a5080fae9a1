"""The inspector's pages against the engine calls behind them, side by side in one run.

Run: ``python -m bench.ui [--records 1000000] [--reads 200]``.

* **Search page**: ``GET /ui/?q=…`` over HTTP on loopback (one keep-alive client): the
  explained ranked read of its first page, its results counted up to 100, rendered. Behind
  it: ``retrieve(q, trust, limit=101, explain=True)`` called in process (and, for what the
  count costs, the first page alone: ``limit=21``).
* **Records page**: ``GET /ui/records`` (every record, newest first, 50 a page). Behind it:
  the id listings it filters (``record_ids`` with and without the retracted records; below
  ``hyper``, one level of trust up too, for the records shown redacted) and
  ``retrieve_by_id`` of the 50 shown, called in process.
* **Timeline page**: ``GET /ui/records/{id}`` for records with a few events (created,
  reinforced, penalised, pinned, contested): the record, its events and what each changed.
  Behind it: ``retrieve_by_id(id)``, ``history(id)`` and ``retrieve_by_id(id, as_of=…)`` at
  each event's time (the versions the page compares), called in process.

The page is timed over HTTP and the call in process, so the ratio includes the HTTP hop (timed
alone too: a bodiless redirect) as well as the rendering; each page is also made in process
(the handler's work: reads, diff, template), without the hop. The target is a page ≤ 2× the
call behind it. Records are synthetic semantic facts whose words are drawn from a Zipf-like
vocabulary (queries of 1–3 words match from a handful to thousands); one record in 500 gets a
history of five events.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import httpx

from membrane_es import Membrane
from membrane_es.access.keys import DEFAULT_CALLER, KeyRing
from membrane_es.http_api import HttpServer, create_app
from membrane_es.http_api.ui import reads, routes
from membrane_es.http_api.ui.context import Reading
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext
from membrane_es.serving.tenants import Tenants

VOCABULARY = 20_000
BATCH = 5_000
REVISED_EVERY = 500
SEED = 11
TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)


def _words(rng: random.Random, count: int) -> str:
    return " ".join(f"w{int(VOCABULARY ** rng.random())}" for _ in range(count))


def _record(rng: random.Random) -> dict[str, object]:
    return {
        "type": "semantic",
        "tags": [_words(rng, 1)],
        "payload": {
            "kind": "semantic",
            "subject": _words(rng, 2),
            "predicate": "notes",
            "object": _words(rng, rng.randint(6, 14)),
        },
    }


def fill(memory: Membrane, count: int) -> list[str]:
    """Write ``count`` records; returns the ids of those given a history of five events."""
    rng = random.Random(SEED)
    revised: list[str] = []
    for start in range(0, count, BATCH):
        with memory.batch():
            for i in range(start, min(start + BATCH, count)):
                record = memory.create_record(_record(rng), actor="bench", rationale="seed")
                if i % REVISED_EVERY == 0:
                    revised.append(record.id)
        for record_id in revised[-(BATCH // REVISED_EVERY) :]:
            memory.reinforce(record_id, "bench", "it helped")
            memory.penalize(record_id, 0.1, "reviewer", "half right")
            memory.pin(record_id, actor="bench", rationale="keep")
            memory.contest(record_id, "", "reviewer", "another source disagrees")
    return revised


def side_by_side(calls: list[Callable[[str], object]], inputs: list[str]) -> list[float]:
    """The p50 (ms) of each call over the inputs, taking turns on each input (a busy machine
    slows them alike, and their ratio holds)."""
    for text in inputs[:10]:  # warm caches
        for call in calls:
            call(text)
    times: list[list[float]] = [[] for _ in calls]
    for text in inputs:
        for call, spent in zip(calls, times, strict=True):
            start = time.perf_counter()
            call(text)
            spent.append(time.perf_counter() - start)
    return [statistics.median(spent) * 1000 for spent in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--reads", type=int, default=200, help="reads of each kind")
    args = parser.parse_args()

    memory = Membrane.in_memory(embedder=None)
    started = time.perf_counter()
    revised = fill(memory, args.records)
    memory.retrieve("w1", trust=TRUST, limit=1)  # the views follow the log once
    fill_s = time.perf_counter() - started
    rng = random.Random(SEED + 1)
    texts = [_words(rng, rng.randint(1, 3)) for _ in range(args.reads)]
    ids = [revised[i % len(revised)] for i in range(args.reads)]

    tenants = Tenants(":memory:", lambda tenant, path: memory)
    with HttpServer(create_app(tenants, KeyRing()), "127.0.0.1:0") as server:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=60) as client:

            def page(path: str, **params: str) -> bytes:
                response = client.get(path, params=params)
                response.raise_for_status()
                return response.content

            def search_call(text: str) -> object:
                return memory.retrieve(
                    text, trust=TRUST, limit=reads.COUNTED_UPTO + 1, explain=True
                )

            def first_page_call(text: str) -> object:
                return memory.retrieve(text, trust=TRUST, limit=21, explain=True)

            def timeline_call(record_id: str) -> object:
                record = memory.retrieve_by_id(record_id, trust=TRUST)
                events = memory.history(record_id, trust=TRUST)
                versions = [
                    memory.retrieve_by_id(record_id, trust=TRUST, as_of=event.timestamp)
                    for event in events
                ]
                return record, events, versions

            def records_call(_: str) -> object:
                every = memory.record_ids(trust=TRUST, include_retracted=True)
                memory.record_ids(trust=TRUST)  # (one level up is asked below hyper only)
                return [memory.retrieve_by_id(i, trust=TRUST) for i in every[-50:]]

            def hop(_: str) -> object:  # a server without keys redirects the key form
                return client.get("/ui/key").status_code

            hop_ms = side_by_side([hop], texts)[0]
            # the same pages made in process too: the handler's work without the HTTP hop
            reader = Reading(DEFAULT_CALLER, Sensitivity.HYPER, (), None)
            search_ms, first_ms, search_page_ms, search_made_ms = side_by_side(
                [
                    search_call,
                    first_page_call,
                    lambda text: page("/ui/", q=text),
                    lambda text: routes.search_page(memory, reader, text, [], 1).content,
                ],
                texts,
            )
            timeline_ms, timeline_page_ms, timeline_made_ms = side_by_side(
                [
                    timeline_call,
                    lambda record_id: page(f"/ui/records/{record_id}"),
                    lambda record_id: routes.record_page(memory, reader, record_id, 1).content,
                ],
                ids,
            )
            records_ms, records_page_ms = side_by_side(
                [records_call, lambda _: page("/ui/records")], texts[:20]
            )
    memory.close()

    lines = [
        "## Inspector pages against the calls behind them",
        "",
        f"{args.records:,} synthetic records (in-memory log, written and followed in "
        f"{fill_s:.0f} s), {args.reads} reads of each kind, p50 latency, measured in one run "
        "(`python -m bench.ui`). Pages over HTTP on loopback, calls in process.",
        "",
        "| measurement | call (in process) | page | page / call |",
        "| --- | --- | --- | --- |",
        f"| search, first page of 20, explained, counted up to 100 | {search_ms:.2f} ms "
        f"| {search_page_ms:.2f} ms | {search_page_ms / search_ms:.2f}× |",
        f"| (the first 21 alone, uncounted) | {first_ms:.2f} ms | "
        f"| {search_page_ms / first_ms:.2f}× |",
        f"| the same page made in process | | {search_made_ms:.2f} ms "
        f"| {search_made_ms / search_ms:.2f}× |",
        f"| timeline of a record with 5 events | {timeline_ms:.2f} ms "
        f"| {timeline_page_ms:.2f} ms | {timeline_page_ms / timeline_ms:.2f}× |",
        f"| the same page made in process | | {timeline_made_ms:.2f} ms "
        f"| {timeline_made_ms / timeline_ms:.2f}× |",
        f"| records table, first page of 50 | {records_ms:.2f} ms | {records_page_ms:.2f} ms "
        f"| {records_page_ms / records_ms:.2f}× |",
        f"| the HTTP hop alone: a bodiless redirect | | {hop_ms:.2f} ms | |",
        "",
        "Target: each page ≤ 2× the call behind it.",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()

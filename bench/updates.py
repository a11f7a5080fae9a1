"""Memory that stays current: facts that change over simulated months, asked about now and
as they stood at past moments, against the engine without resolution on write and against a
plain vector + BM25 store of every statement, side by side in one run.

Run: ``python -m bench.updates [--people 150] [--projects 100] [--seed 7]``.

The workload (seeded): people with a ``city``, an ``employer`` and a ``diet``, projects with a
``deploy_target``, a ``budget`` and a ``status``; each fact takes 1–6 values over about a
year, a value every 5–60 days, and a value is sometimes said again later (a restatement).
Each statement is written as a reader would: half through ``ingest_observation``, half
through ``capture`` (the fact as content, sometimes nested under ``fact`` beside the words of
the turn), in varied spellings (``Deploy target``, ``deploy-target``; ``Production.``;
a subject in lower case). Every engine runs on a clock driven by the workload, so a moment of
the simulated months is a moment of the log.

The three stores:

* ``engine``: resolution on write (the default);
* ``no-resolution``: the same engine opened with ``resolve_writes=False``;
* ``baseline``: every statement's words with its date, ranked by the strongest simple method
  of :mod:`bench.baselines` on each figure (BM25, cosine, their fusions), and by a fusion
  with recency (newest statement first) that a plain store could also do.

For every fact, "what is S's P?" asked now, and for every fact that changed, asked as of a
moment between two values. Figures:

* ``current first``: the first fact a semantic retrieve returns (the baseline: the first
  statement) holds the current value of the fact asked about;
* ``current in context``: a 256-token ``context`` holds a record stating the current value;
* ``current alone in context``: it holds a fact stating the current value and no fact
  stating an earlier one (the baseline: the current statement and no earlier one) — the
  current value as the only one a reader could take for current (a turn that said an
  earlier value reads as said on its date);
* ``stale in context``: it holds any record stating an earlier value (a captured turn
  included);
* ``past first``: as ``current first``, as of the past moment (the baseline: among the
  statements made by then);
* ``duplicate lines``: lines of a 256-token context that repeat another line's words (its
  date and ref aside), over all questions;
* ``below floor``: the share of a 512-token context's tokens in memories scoring under
  ``--floor`` times the context's best score (the engines only: the plain store's methods
  have no common scale to put a floor on).
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from bench.baselines import BASELINES, Bm25, best, rankings, rrf, top
from membrane_es import Membrane
from membrane_es.embedding.hashing import HashingEmbedder
from membrane_es.embedding.tokens import counter_for
from membrane_es.schema.enums import MemoryType, Sensitivity
from membrane_es.schema.records import MemoryRecord, TrustContext
from membrane_es.timekeeping.clock import MonotonicClock

TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)
START = datetime(2026, 1, 5, 9, tzinfo=UTC)
CONTEXT_TOKENS = 256
FLOOR_TOKENS = 512
DEFAULT_FLOOR = 0.3
RECENCY = "rrf-recency"

FIRST = "Dana Sam Noor Ilse Tomas Mei Ravi Lena Omar Ana Yuki Piet Zara Ivo Kofi Elif".split()
LAST = "Okafor Lindqvist Moreau Haddad Silva Novak Tanaka Byrne Costa Weber Ito Roy".split()
PROJECT_WORDS = "Orchid Falcon Juniper Quartz Nimbus Cobalt Maple Aurora Vega Lumen".split()
VALUES: dict[str, list[str]] = {
    "city": "Lisbon Faro Porto Madrid Berlin Oslo Kyoto Lagos Quito Tunis Riga Perth".split(),
    "employer": "Acme Globex Initech Umbrella Hooli Vandelay Stark Wayne Tyrell Cyberdyne".split(),
    "diet": ["vegetarian", "vegan", "pescatarian", "omnivore", "keto", "halal"],
    "deploy_target": ["production", "staging", "canary", "eu-west", "us-east", "on-prem"],
    "budget": [f"{n} USD" for n in (150, 220, 300, 480, 640, 900, 1200)],
    "status": ["planning", "active", "paused", "shipping", "maintenance", "archived"],
}
PERSON_FACTS = ("city", "employer", "diet")
PROJECT_FACTS = ("deploy_target", "budget", "status")
SPELLINGS = {
    "deploy_target": ["deploy_target", "Deploy target", "deploy-target", "DEPLOY_TARGET"],
    "city": ["city", "City", "city "],
    "employer": ["employer", "Employer"],
    "diet": ["diet", "Diet"],
    "budget": ["budget", "Budget"],
    "status": ["status", "Status"],
}


@dataclass
class Statement:
    """One value of one fact said at one moment (``value`` as the workload means it)."""

    subject: str
    predicate: str
    value: str
    at: datetime
    index: int  # of the value among the fact's values (0: first)


@dataclass
class Fact:
    subject: str
    predicate: str
    values: list[tuple[str, datetime]] = field(default_factory=list)  # in time order


def workload(people: int, projects: int, seed: int) -> tuple[list[Fact], list[Statement]]:
    rng = random.Random(seed)
    subjects = [(n, PERSON_FACTS) for n in _names(rng, people, _person)]
    subjects += [(n, PROJECT_FACTS) for n in _names(rng, projects, _project)]
    facts: list[Fact] = []
    statements: list[Statement] = []
    for subject, predicates in subjects:
        for predicate in predicates:
            fact = Fact(subject, predicate)
            moment = START + timedelta(days=rng.uniform(0, 30), minutes=rng.randrange(600))
            previous = ""
            for index in range(rng.randint(1, 6)):
                value = rng.choice([v for v in VALUES[predicate] if v != previous])
                fact.values.append((value, moment))
                statements.append(Statement(subject, predicate, value, moment, index))
                if rng.random() < 0.3:  # said again later
                    again = moment + timedelta(days=rng.uniform(1, 4))
                    statements.append(Statement(subject, predicate, value, again, index))
                previous = value
                moment += timedelta(days=rng.uniform(5, 60), minutes=rng.randrange(600))
            facts.append(fact)
    statements.sort(key=lambda s: s.at)
    return facts, statements


def _person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def _project(rng: random.Random) -> str:
    return f"Project {rng.choice(PROJECT_WORDS)} {rng.randrange(10, 100)}"


def _names(rng: random.Random, count: int, make: Callable[[random.Random], str]) -> list[str]:
    names: dict[str, None] = {}
    while len(names) < count:
        names[make(rng)] = None
    return list(names)


def question(fact: Fact) -> str:
    return f"What is the {fact.predicate.replace('_', ' ')} of {fact.subject}?"


# --- the engines ------------------------------------------------------------------------------


class Moment:
    """The clock the workload drives: the log's time is the simulated time."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@dataclass
class EngineRun:
    memory: Membrane
    # (subject, predicate) -> value index -> the ids of the records stating it (facts and
    # the turns captured), and of the facts alone
    stating: dict[tuple[str, str], dict[int, set[str]]] = field(default_factory=dict)
    facts: dict[tuple[str, str], dict[int, set[str]]] = field(default_factory=dict)
    seconds: float = 0.0


def fill_engine(statements: list[Statement], resolve: bool, seed: int) -> EngineRun:
    moment = Moment()
    memory = Membrane.in_memory(
        clock=MonotonicClock(source=moment), embedder=HashingEmbedder(), resolve_writes=resolve
    )
    run = EngineRun(memory)
    rng = random.Random(seed)
    started = time.perf_counter()
    for statement in statements:
        moment.now = statement.at
        key = (statement.subject, statement.predicate)
        ids = run.stating.setdefault(key, {}).setdefault(statement.index, set())
        facts = run.facts.setdefault(key, {}).setdefault(statement.index, set())
        for record_id, is_fact in _write(memory, statement, rng):
            ids.add(record_id)
            if is_fact:
                facts.add(record_id)
    run.seconds = time.perf_counter() - started
    return run


def _write(
    memory: Membrane, statement: Statement, rng: random.Random
) -> Iterator[tuple[str, bool]]:
    """Say the statement one of the ways a caller would; the ids of the records stating it,
    each with whether it is a fact (else the turn a capture stored)."""
    predicate = rng.choice(SPELLINGS[statement.predicate])
    subject = statement.subject.lower() if rng.random() < 0.15 else statement.subject
    value = statement.value.capitalize() + "." if rng.random() < 0.2 else statement.value
    way = rng.random()
    if way < 0.5:
        yield memory.ingest_observation(subject, predicate, value, timestamp=statement.at).id, True
        return
    fact = {"subject": subject, "predicate": predicate, "object": value}
    content: dict[str, Any] = fact
    if way < 0.75:
        words = f"{statement.subject} {statement.predicate.replace('_', ' ')} is now {value}"
        content = {"text": words, "fact": fact}
    result = memory.capture_memory(content, source_kind="observation", timestamp=statement.at)
    yield result.primary_record.id, False
    for record in (*result.created_records, *result.resolved_records):
        if record.type is MemoryType.SEMANTIC:
            yield record.id, True


# --- the plain store ---------------------------------------------------------------------------


@dataclass
class PlainStore:
    """Every statement's words with its date: BM25 and cosine over them (bench.baselines)."""

    statements: list[Statement]
    texts: list[str]
    vectors: np.ndarray
    bm25: Bm25
    embedder: HashingEmbedder
    _newest: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, statements: list[Statement], embedder: HashingEmbedder) -> PlainStore:
        texts = [
            f"{s.at.date().isoformat()} {s.subject} {s.predicate.replace('_', ' ')} {s.value}"
            for s in statements
        ]
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
        return cls(statements, texts, vectors, Bm25(texts), embedder)

    def rankings(self, asked: str) -> dict[str, list[int]]:
        """Every method's ranking of every statement, best first."""
        query = np.asarray(self.embedder.embed([asked])[0], dtype=np.float32)
        ranked = rankings(self.bm25, asked, self.vectors, query, len(self.texts))
        by_words = top(self.bm25.scores(asked, content_only=True), len(self.texts))
        ranked[RECENCY] = rrf(len(self.texts), by_words, ranked["cosine"], self.newest)
        return ranked

    @property
    def newest(self) -> list[int]:
        if not self._newest:
            self._newest = sorted(
                range(len(self.texts)), key=lambda i: -self.statements[i].at.timestamp()
            )
        return self._newest

    def said_by(self, ranked: dict[str, list[int]], moment: datetime) -> dict[str, list[int]]:
        """The rankings of the statements made by ``moment`` (a plain store's as-of)."""
        return {
            name: [i for i in order if self.statements[i].at <= moment]
            for name, order in ranked.items()
        }


# --- the figures --------------------------------------------------------------------------------


@dataclass
class Tally:
    asked: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, hit: bool) -> None:
        self.counts[name] = self.counts.get(name, 0) + int(hit)

    def share(self, name: str) -> float:
        return self.counts.get(name, 0) / max(self.asked, 1)


def _line_words(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        line = re.sub(r"^\d{4}-\d\d-\d\d\s+", "", line.strip())
        line = re.sub(r"\s*\[[0-9a-f]+\]$", "", line)
        if line:
            lines.append(line.casefold())
    return lines


def duplicates(text: str) -> int:
    lines = _line_words(text)
    return len(lines) - len(set(lines))


def below_floor(memories: list[Any], floor: float) -> tuple[int, int]:
    if not memories:
        return 0, 0
    best_score = max(m.score for m in memories)
    low = sum(m.tokens for m in memories if m.score < floor * best_score)
    return low, sum(m.tokens for m in memories)


def _holds(record: MemoryRecord, fact: Fact, value: str) -> bool:
    obj = getattr(record.payload, "object", None)
    return isinstance(obj, str) and obj.strip(" .").casefold() == value.casefold()


def measure_engine(run: EngineRun, facts: list[Fact], floor: float, rng: random.Random) -> Any:
    memory = run.memory
    now, past = Tally(), Tally()
    dupes, low, total = 0, 0, 0
    seconds = time.perf_counter()
    for fact in facts:
        asked = question(fact)
        stating = run.stating[(fact.subject, fact.predicate)]
        current = len(fact.values) - 1
        now.asked += 1
        first = memory.retrieve(asked, trust=TRUST, memory_types=["semantic"], limit=5).records
        now.add("current first", bool(first) and _holds(first[0], fact, fact.values[-1][0]))
        context = memory.context(asked, trust=TRUST, budget_tokens=CONTEXT_TOKENS)
        held = set(context.ids)
        now.add("current in context", bool(held & stating[current]))
        stale = set().union(*(ids for i, ids in stating.items() if i != current))
        now.add("stale in context", bool(held & stale))
        facts_held = run.facts[(fact.subject, fact.predicate)]
        stale_facts = set().union(*(ids for i, ids in facts_held.items() if i != current))
        now.add(
            "current alone in context",
            bool(held & facts_held[current]) and not held & stale_facts,
        )
        dupes += duplicates(context.text)
        wide = memory.context(asked, trust=TRUST, budget_tokens=FLOOR_TOKENS)
        under, tokens = below_floor(wide.memories, floor)
        low, total = low + under, total + tokens
        if len(fact.values) > 1:
            index = rng.randrange(len(fact.values) - 1)
            value, said = fact.values[index]
            moment = said + (fact.values[index + 1][1] - said) / 2
            past.asked += 1
            then = memory.retrieve(
                asked, trust=TRUST, memory_types=["semantic"], limit=5, as_of=moment
            ).records
            past.add("past first", bool(then) and _holds(then[0], fact, value))
    return now, past, dupes, low / max(total, 1), time.perf_counter() - seconds


def measure_plain(store: PlainStore, facts: list[Fact], rng: random.Random) -> Any:
    """Each figure by each ranking method; the best of them is reported."""
    methods = (*BASELINES, RECENCY)
    now = {m: Tally() for m in methods}
    past = {m: Tally() for m in methods}
    dupes = dict.fromkeys(methods, 0)
    counter = counter_for(store.embedder)
    lengths = counter.count(store.texts)
    for fact in facts:
        asked = question(fact)
        current = fact.values[-1][0]
        ranked = store.rankings(asked)
        moment, then_value = None, ""
        if len(fact.values) > 1:
            index = rng.randrange(len(fact.values) - 1)
            then_value, said = fact.values[index]
            moment = said + (fact.values[index + 1][1] - said) / 2
        ranked_then = store.said_by(ranked, moment) if moment is not None else {}
        for method in methods:
            order = ranked.get(method, [])
            tally = now[method]
            tally.asked += 1
            tally.add("current first", bool(order) and _states(store, order[0], fact, current))
            packed = _pack(order, lengths, CONTEXT_TOKENS)
            holds = any(_states(store, i, fact, current) for i in packed)
            tally.add("current in context", holds)
            stale = any(
                _about(store, i, fact) and store.statements[i].value != current for i in packed
            )
            tally.add("stale in context", stale)
            tally.add("current alone in context", holds and not stale)
            dupes[method] += duplicates("\n".join(store.texts[i][11:] for i in packed))
            if moment is not None:
                then = ranked_then.get(method, [])
                past[method].asked += 1
                past[method].add(
                    "past first", bool(then) and _states(store, then[0], fact, then_value)
                )
    return now, past, dupes


def _about(store: PlainStore, i: int, fact: Fact) -> bool:
    s = store.statements[i]
    return s.subject == fact.subject and s.predicate == fact.predicate


def _states(store: PlainStore, i: int, fact: Fact, value: str) -> bool:
    return _about(store, i, fact) and store.statements[i].value == value


def _pack(order: list[int], lengths: list[int], budget: int) -> list[int]:
    packed, used = [], 0
    for i in order:
        if used + lengths[i] > budget:
            break
        packed.append(i)
        used += lengths[i]
    return packed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=150)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--floor", type=float, default=DEFAULT_FLOOR)
    args = parser.parse_args(argv)
    facts, statements = workload(args.people, args.projects, args.seed)
    print(
        f"{args.people} people, {args.projects} projects: {len(facts)} facts, "
        f"{len(statements)} statements, {sum(len(f.values) > 1 for f in facts)} facts changed"
    )
    rows: dict[str, dict[str, float]] = {}
    for name, resolve in (("engine", True), ("no-resolution", False)):
        run = fill_engine(statements, resolve, args.seed)
        now, past, dupes, share, seconds = measure_engine(
            run, facts, args.floor, random.Random(args.seed)
        )
        rows[name] = {
            "current first": now.share("current first"),
            "current in context": now.share("current in context"),
            "current alone in context": now.share("current alone in context"),
            "stale in context": now.share("stale in context"),
            "past first": past.share("past first"),
            "duplicate lines": dupes,
            "below floor": share,
        }
        print(f"  {name}: written in {run.seconds:.1f} s, asked in {seconds:.1f} s")
        run.memory.close()
    store = PlainStore.of(statements, HashingEmbedder())
    now_b, past_b, dupes_b = measure_plain(store, facts, random.Random(args.seed))
    methods = (*BASELINES, RECENCY)
    baseline: dict[str, float] = {}
    chosen: dict[str, str] = {}
    for figure, tallies in (
        ("current first", now_b),
        ("current in context", now_b),
        ("current alone in context", now_b),
        ("past first", past_b),
    ):
        chosen[figure], baseline[figure] = best(
            {m: tallies[m].share(figure) for m in methods}, methods
        )
    stale = {m: -now_b[m].share("stale in context") for m in methods}
    chosen["stale in context"], low_stale = best(stale, methods)
    baseline["stale in context"] = -low_stale
    chosen["duplicate lines"] = min(methods, key=lambda m: (dupes_b[m], m))
    baseline["duplicate lines"] = dupes_b[chosen["duplicate lines"]]
    # The plain store's methods have no common scale to put a relevance floor on.
    chosen["below floor"] = "no scores to floor"
    baseline["below floor"] = float("nan")
    rows["baseline"] = baseline
    figures = list(baseline)
    print("\n| figure | engine | no-resolution | best baseline | engine − baseline |")
    print("|---|---|---|---|---|")
    for figure in figures:
        cells = [rows[name][figure] for name in ("engine", "no-resolution", "baseline")]
        shown = [_shown(figure, v) for v in cells]
        lead = cells[0] - cells[2]
        lead_text = "—" if lead != lead else _shown(figure, lead, "+")
        print(
            f"| {figure} | {shown[0]} | {shown[1]} | {shown[2]} ({chosen[figure]}) | {lead_text} |"
        )


def _shown(figure: str, value: float, sign: str = "") -> str:
    if value != value:  # nan: no such figure
        return "—"
    return f"{value:{sign}.0f}" if figure == "duplicate lines" else f"{value:{sign}.3f}"


if __name__ == "__main__":
    main()

"""Evidence coverage at a token budget: how much of what a question needs a context holds.

Run: ``python -m bench.context_coverage --dataset locomo|longmemeval [--path P] [--limit N]
[--budgets 512,1024,2048] [--embedder minilm|hashing|none] [--cache DIR]``.

Data: LoCoMo (``../shared/data/locomo_dev.json``, read by :func:`bench.longmem.load`) and
LongMemEval-S (``../shared/data/longmemeval_s_dev.json.gz``: every question has its own
haystack of about 50 sessions, 500 turns). ``--limit N``: the first N conversations of LoCoMo;
for LongMemEval the subset :mod:`bench.longmemeval` takes with the same limit (each question
type in proportion to its share, evenly spaced within it). Questions without evidence turns
are left out (LoCoMo's adversarial category 5 too, as in :mod:`bench.longmem`;
LongMemEval's abstentions, whose haystacks hold no turn marked ``has_answer``).

Procedure, per haystack, in a fresh in-memory store: every turn is captured as it happened
(``capture_memory({"speaker", "text"}, timestamp=…)``, one ``batch()`` a session, sessions in
time order, the engine's clock at each turn's moment); the question is asked at its moment (a
day after LoCoMo's last session; LongMemEval's ``question_date``). For each budget,
``Membrane.context(question, budget_tokens=B)`` gives the records packed; its coverage is the
share of the question's evidence turns among them.

The baselines pack the same lines (the same format, refs and token counter: MiniLM's word
pieces) into the same budget, from their own ranking of every turn: BM25 of SQLite FTS5
(porter unicode61) with the question's stop words dropped (the engine's list) and the rest
OR-ed; cosine of the same embedder over the same texts the engine embeds; their
reciprocal-rank fusion (k = 60) and their min-max score fusion (equal weights). The best
baseline at a budget is the one with the highest coverage there.

Reported per budget: coverage of the engine and of each baseline, the engine's lead over the
best baseline, and that lead's range when each haystack in turn is left out (its spread).

Vectors are cached by text digest in ``--cache`` (default ``~/.cache/membrane_es/bench``), so
a rerun embeds nothing it has seen; the model is loaded only for texts not cached.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sqlite3
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import numpy.typing as npt

from bench.baselines import RRF_K, minmax
from bench.longmem import Conversation, SessionClock, Turn
from bench.longmem import load as load_locomo
from bench.longmemeval import load as load_longmemeval
from bench.longmemeval import stratified
from bench.vector_cache import DiskCachedEmbedder
from bench.vector_cache import cache_directory as bench_cache_directory
from membrane_es import Membrane, TrustContext
from membrane_es.embedding import Embedder, HashingEmbedder, search_text
from membrane_es.embedding.tokens import TokenCounter, counter_for
from membrane_es.projections.tokens import STOP_WORDS
from membrane_es.queries.context import DEFAULT_RELEVANCE_FLOOR, Memory, memory_of, pack
from membrane_es.schema import Sensitivity
from membrane_es.schema.results import ContextResult
from membrane_es.timekeeping.clock import MonotonicClock

SHARED = Path(__file__).resolve().parent.parent.parent / "shared/data"
DATA = {"locomo": SHARED / "locomo_dev.json", "longmemeval": SHARED / "longmemeval_s_dev.json.gz"}
BUDGETS = (512, 1024, 2048)
FULL_TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)
BASELINES = ("bm25", "cosine", "rrf", "minmax")
METHODS = ("membrane_es", *BASELINES)
PROGRESS = partial(print, flush=True)  # a line per haystack as it is done

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Ask:
    """A question, its evidence turns (ids), when it is asked and its kind."""

    text: str
    evidence: frozenset[str]
    at: datetime
    kind: str


@dataclass(frozen=True)
class Haystack:
    """Sessions of turns, in time order, and the questions asked over them."""

    name: str
    sessions: list[list[Turn]]
    asks: list[Ask]


# --- the data -----------------------------------------------------------------------------


def locomo(path: Path, limit: int) -> list[Haystack]:
    conversations = load_locomo(path)
    if limit:
        conversations = conversations[:limit]
    return [_from_conversation(conversation) for conversation in conversations]


def _from_conversation(conversation: Conversation) -> Haystack:
    asked = conversation.sessions[-1][-1].at + timedelta(days=1)
    asks = [Ask(q.text, q.evidence, asked, f"cat {q.category}") for q in conversation.questions]
    return Haystack(conversation.name, conversation.sessions, asks)


def _lme_time(text: str) -> datetime:
    """A LongMemEval date (``2023/05/25 (Thu) 10:04``) as UTC."""
    return datetime.strptime(re.sub(r"\s*\(\w+\)", "", text), "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def longmemeval(path: Path, limit: int) -> list[Haystack]:
    """The haystacks of the questions :mod:`bench.longmemeval` evaluates with the same
    ``--limit`` (a subset stratified by question type), so both benchmarks measure the same
    questions and share their vectors."""
    chosen = {question.id for question in stratified(load_longmemeval(path), limit)}
    with gzip.open(path, "rt") as stream:
        items = json.load(stream)
    haystacks = [_from_longmemeval(item) for item in items if item["question_id"] in chosen]
    return [haystack for haystack in haystacks if haystack.asks]


def _from_longmemeval(item: dict[str, Any]) -> Haystack:
    dated = sorted(
        zip(
            item["haystack_dates"],
            item["haystack_session_ids"],
            item["haystack_sessions"],
            strict=True,
        ),
        key=lambda entry: _lme_time(entry[0]),
    )
    sessions, evidence = [], set()
    for date, session_id, turns in dated:
        at = _lme_time(date)
        session = []
        for offset, turn in enumerate(turns):
            dia_id = f"{session_id}:{offset}"
            session.append(
                Turn(dia_id, turn["role"], turn["content"], at + timedelta(seconds=offset))
            )
            if turn.get("has_answer"):
                evidence.add(dia_id)
        if session:
            sessions.append(session)
    asks = []
    if evidence:
        asks.append(
            Ask(
                item["question"],
                frozenset(evidence),
                _lme_time(item["question_date"]),
                item["question_type"],
            )
        )
    return Haystack(item["question_id"], sessions, asks)


def make_embedder(name: str, cache: Path) -> Embedder | None:
    if name == "none":
        return None
    if name == "hashing":
        return HashingEmbedder(384)
    from membrane_es.embedding.default import BundledMiniLM

    # The model is loaded only for texts not in the cache.
    return DiskCachedEmbedder(BundledMiniLM(), cache)


# --- the engine -----------------------------------------------------------------------------


def ingest(
    haystack: Haystack, embedder: Embedder | None
) -> tuple[Membrane, SessionClock, dict[str, str]]:
    """A store holding the haystack's turns, captured as they happened; its clock; the turn
    id of each turn's record."""
    wall = SessionClock(haystack.sessions[0][0].at)
    memory = Membrane.in_memory(clock=MonotonicClock(source=wall), embedder=embedder)
    turn_of: dict[str, str] = {}
    with seeded_ids(haystack.name):
        for session in haystack.sessions:
            with memory.batch():
                for turn in session:
                    wall.current = max(wall.current, turn.at)
                    captured = memory.capture_memory(
                        {"speaker": turn.speaker, "text": turn.text},
                        source_kind="dialogue_turn",
                        source="bench",
                        timestamp=turn.at,
                    )
                    turn_of[captured.primary_record.id] = turn.dia_id
    return memory, wall, turn_of


@contextmanager
def seeded_ids(seed: str) -> Iterator[None]:
    """Record ids drawn from a generator seeded by the haystack's name: a line's ref (a
    prefix of its id) counts 5 to 10 word pieces, so random ids would move what fits in a
    budget from run to run; seeded, reruns and variants pack the same lines."""
    draw = random.Random(seed)

    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=draw.getrandbits(128), version=4)

    with patch("uuid.uuid4", uuid4):
        yield


# --- the baselines ------------------------------------------------------------------------


class StopwordedBm25:
    """SQLite FTS5 BM25 over the turns' texts (porter unicode61); the question's words, stop
    words dropped, OR-ed."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.execute(
            "CREATE VIRTUAL TABLE turns USING fts5(body, tokenize='porter unicode61 "
            "remove_diacritics 2')"
        )
        self._db.executemany("INSERT INTO turns(rowid, body) VALUES (?, ?)", list(enumerate(texts)))

    def scores(self, question: str, count: int) -> npt.NDArray[np.float64]:
        words = [w for w in re.findall(r"\w+", question.lower()) if w not in STOP_WORDS]
        out = np.zeros(count, dtype=np.float64)
        if not words:
            return out
        match = " OR ".join(f'"{word}"' for word in dict.fromkeys(words))
        for row, value in self._db.execute(
            "SELECT rowid, -bm25(turns) FROM turns WHERE turns MATCH ?", (match,)
        ):
            out[row] = value
        return out


def by_score(scores: npt.NDArray[Any], present: npt.NDArray[np.bool_] | None = None) -> list[int]:
    """Indices best first (ties by index); only where ``present`` when given."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    if present is not None:
        order = order[present[order]]
    return [int(i) for i in order]


def fused(*rankings: list[int]) -> list[int]:
    """Reciprocal-rank fusion of whole rankings (k = 60)."""
    score: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for place, item in enumerate(ranking):
            score[item] += 1.0 / (RRF_K + place + 1)
    return sorted(score, key=lambda item: (-score[item], item))


def baseline_rankings(
    question: str, query: Vectors | None, bm25: StopwordedBm25, vectors: Vectors | None, count: int
) -> Iterator[tuple[str, list[int]]]:
    """Each baseline's ranking of every turn (indices), best first."""
    lexical = bm25.scores(question, count)
    by_words = by_score(lexical, lexical > 0)
    yield "bm25", by_words
    if vectors is None or query is None:
        return
    cosine = vectors @ query
    by_meaning = by_score(cosine)
    yield "cosine", by_meaning
    yield "rrf", fused(by_words, by_meaning)
    yield "minmax", by_score(minmax(lexical, cosine))


# --- scoring --------------------------------------------------------------------------------


@dataclass
class Scores:
    """Per haystack, per method and budget: the coverage of each question (for the mean and
    the leave-one-out spread), and the tokens its contexts counted."""

    coverage: dict[str, dict[tuple[str, int], list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    tokens: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    kinds: dict[tuple[str, str, int], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    turns: int = 0
    haystack_tokens: list[int] = field(default_factory=list)
    # per haystack, aligned with its coverage lists: each question's kind; and its tokens
    ask_kinds: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    ask_tokens: dict[tuple[str, str, int], list[int]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def add(
        self, haystack: str, kind: str, method: str, budget: int, share: float, tokens: int
    ) -> None:
        self.coverage[haystack][(method, budget)].append(share)
        self.tokens[(method, budget)].append(tokens)
        self.kinds[(kind, method, budget)].append(share)
        self.ask_tokens[(haystack, method, budget)].append(tokens)

    def mean(self, method: str, budget: int, without: str | None = None) -> float:
        values = [
            share
            for name, table in self.coverage.items()
            if name != without
            for share in table[(method, budget)]
        ]
        return float(np.mean(values)) if values else 0.0

    def questions(self) -> int:
        return sum(len(table[("membrane_es", BUDGETS[0])]) for table in self.coverage.values())


def share(packed_ids: Sequence[str], evidence: frozenset[str]) -> float:
    return len(evidence.intersection(packed_ids)) / len(evidence)


def evaluate(
    haystacks: Sequence[Haystack],
    embedder: Embedder | None,
    budgets: Sequence[int],
    progress: Any = PROGRESS,
    floors: Sequence[float] = (),
) -> Scores:
    """Coverage of the engine (at its default relevance floor, and at each of ``floors``
    as methods named by :func:`floor_method`) and of the baselines."""
    scores = Scores()
    counter = counter_for(embedder)
    for number, haystack in enumerate(haystacks, 1):
        started = time.perf_counter()
        memory, wall, turn_of = ingest(haystack, embedder)
        try:
            _ask_all(memory, wall, turn_of, haystack, embedder, counter, budgets, scores, floors)
        finally:
            memory.close()
        turns = sum(len(s) for s in haystack.sessions)
        scores.turns += turns
        progress(
            f"[{number}/{len(haystacks)}] {haystack.name}: {turns} turns, "
            f"{len(haystack.asks)} questions, {time.perf_counter() - started:.1f}s"
        )
    return scores


def _ask_all(
    memory: Membrane,
    wall: SessionClock,
    turn_of: dict[str, str],
    haystack: Haystack,
    embedder: Embedder | None,
    counter: TokenCounter,
    budgets: Sequence[int],
    scores: Scores,
    floors: Sequence[float] = (),
) -> None:
    ids = list(turn_of)  # record ids in capture order
    records = [memory.retrieve_by_id(record_id, trust=FULL_TRUST) for record_id in ids]
    lines = [memory_of(record) for record in records]
    texts = [search_text(record) for record in records]  # what the engine embeds and indexes
    vectors = None if embedder is None else embedder.embed(texts)
    bm25 = StopwordedBm25(texts)
    scores.haystack_tokens.append(sum(counter.count([_plain(m) for m in lines if m is not None])))
    for ask in haystack.asks:
        scores.ask_kinds[haystack.name].append(ask.kind)
        wall.current = max(wall.current, ask.at)
        query = None if embedder is None else embedder.embed([ask.text])[0]
        for budget in budgets:
            packed = memory.context(ask.text, trust=FULL_TRUST, budget_tokens=budget)
            held = [turn_of[i] for i in packed.ids if i in turn_of]
            scores.add(
                haystack.name,
                ask.kind,
                "membrane_es",
                budget,
                share(held, ask.evidence),
                packed.tokens,
            )
            if floors:
                unfloored = packed
                if DEFAULT_RELEVANCE_FLOOR:
                    unfloored = memory.context(
                        ask.text, trust=FULL_TRUST, budget_tokens=budget, relevance_floor=0.0
                    )
                for floor, (ids, tokens) in at_floors(unfloored, floors).items():
                    held = [turn_of[i] for i in ids if i in turn_of]
                    scores.add(
                        haystack.name,
                        ask.kind,
                        floor_method(floor),
                        budget,
                        share(held, ask.evidence),
                        tokens,
                    )
        for method, ranking in baseline_rankings(ask.text, query, bm25, vectors, len(texts)):
            ranked: list[Memory] = [m for m in (lines[i] for i in ranking) if m is not None]
            for budget in budgets:
                chosen = pack(ranked, budget, counter, defer_long=False)
                held = [turn_of[m.id] for m, _, _ in chosen.chosen]
                scores.add(
                    haystack.name,
                    ask.kind,
                    method,
                    budget,
                    share(held, ask.evidence),
                    chosen.tokens,
                )


def at_floors(
    unfloored: ContextResult, floors: Sequence[float]
) -> dict[float, tuple[list[str], int]]:
    """What a context at each floor holds, read off the context with none: its lines scoring
    at least ``floor`` times its best line's score, and their tokens. A context built at the
    floor holds these lines (ranked first, they were taken first) and, where a line below the
    floor had taken room, perhaps a long one that waited: so the figures are what the floor
    costs at most, one context a question and budget instead of one a floor."""
    best = max((memory.score for memory in unfloored.memories), default=0.0)
    out = {}
    for floor in floors:
        kept = [m for m in unfloored.memories if best <= 0 or m.score >= floor * best]
        out[floor] = ([m.id for m in kept], sum(m.tokens for m in kept))
    return out


def floor_method(floor: float) -> str:
    return f"floor {floor:g}"


def _plain(memory: Memory) -> str:
    return f"{memory.who}: {memory.words}"


# --- the report -----------------------------------------------------------------------------


def report(scores: Scores, budgets: Sequence[int], dataset: str, haystacks: int) -> str:
    methods = [m for m in METHODS if scores.tokens.get((m, budgets[0]))]  # floors: apart
    baselines = [m for m in methods if m != "membrane_es"]
    full = np.mean(scores.haystack_tokens) if scores.haystack_tokens else 0.0
    out = [
        f"{dataset}: {haystacks} haystacks, {scores.turns} turns, {scores.questions()} questions; "
        f"a haystack's turns ('who: words') count {full:,.0f} tokens on average",
        "",
        "| budget | "
        + " | ".join(methods)
        + " | lead over the best baseline | lead, one haystack left out |",
        "| --- |" + " --- |" * (len(methods) + 2),
    ]
    for budget in budgets:
        means = {m: scores.mean(m, budget) for m in methods}
        best = max(baselines, key=lambda m: means[m]) if baselines else None
        cells = [f"{means[m]:.3f}" for m in methods]
        if best is None:
            out.append(f"| {budget} | " + " | ".join(cells) + " | – | – |")
            continue
        lead = means["membrane_es"] - means[best]
        leads = []
        for name in scores.coverage:
            left = {m: scores.mean(m, budget, without=name) for m in methods}
            leads.append(left["membrane_es"] - max(left[m] for m in baselines))
        spread = f"{min(leads):+.3f} … {max(leads):+.3f}" if len(leads) > 1 else "–"
        out.append(f"| {budget} | " + " | ".join(cells) + f" | {lead:+.3f} ({best}) | {spread} |")
    out.append("")
    out.append(
        "mean tokens used: "
        + "; ".join(
            f"{budget}: "
            + ", ".join(f"{m} {np.mean(scores.tokens[(m, budget)]):.0f}" for m in methods)
            for budget in budgets
        )
    )
    kinds = sorted({kind for kind, _, _ in scores.kinds})
    if len(kinds) > 1:
        out.append("")
        out.append("| kind (questions) | budget | " + " | ".join(methods) + " |")
        out.append("| --- | --- |" + " --- |" * len(methods))
        for kind in kinds:
            count = len(scores.kinds[(kind, "membrane_es", budgets[0])])
            for budget in budgets:
                cells = [f"{np.mean(scores.kinds[(kind, m, budget)]):.3f}" for m in methods]
                out.append(f"| {kind} ({count}) | {budget} | " + " | ".join(cells) + " |")
    return "\n".join(out)


# --- choosing the relevance floor ------------------------------------------------------------

# The floor chosen is the highest whose coverage, at every budget, is within this of the
# coverage with no floor: it leaves out what matches nothing, not what a question needs.
FLOOR_TOLERANCE = 0.01


def _part_mean(
    scores: Scores, method: str, budget: int, by: str, left_out: str | None
) -> tuple[float, float]:
    """Mean coverage and mean tokens of ``method`` at ``budget`` over the questions not in
    ``left_out`` (a haystack's name when ``by`` is "haystack", else a question kind); with
    ``left_out`` prefixed by "=", over that part alone."""
    only = left_out is not None and left_out.startswith("=")
    part = left_out[1:] if only and left_out is not None else left_out
    shares: list[float] = []
    tokens: list[int] = []
    for name, table in scores.coverage.items():
        for kind_share, kind, used in zip(
            table[(method, budget)],
            scores.ask_kinds[name],
            scores.ask_tokens[(name, method, budget)],
            strict=True,
        ):
            key = name if by == "haystack" else kind
            if (key == part) != only:
                continue
            shares.append(kind_share)
            tokens.append(used)
    return (float(np.mean(shares)) if shares else 0.0, float(np.mean(tokens)) if tokens else 0.0)


def choose_floor(
    scores: Scores, floors: Sequence[float], budgets: Sequence[int], by: str, left_out: str | None
) -> float:
    """The highest of ``floors`` whose coverage at every budget, over the questions not
    ``left_out``, is within :data:`FLOOR_TOLERANCE` of floor 0's."""
    chosen = 0.0
    for floor in sorted(floors):
        if all(
            _part_mean(scores, floor_method(floor), budget, by, left_out)[0]
            >= _part_mean(scores, floor_method(0.0), budget, by, left_out)[0] - FLOOR_TOLERANCE
            for budget in budgets
        ):
            chosen = floor
    return chosen


def floor_report(scores: Scores, floors: Sequence[float], budgets: Sequence[int], by: str) -> str:
    """Coverage and tokens used at each floor; the floor chosen with each part (a haystack
    or a question kind) left out, and what it does to that part."""
    out = [
        "| relevance floor | " + " | ".join(f"coverage {b} | tokens {b}" for b in budgets) + " |",
        "| --- |" + " --- | --- |" * len(budgets),
    ]
    for floor in floors:
        cells = []
        for budget in budgets:
            coverage, tokens = _part_mean(scores, floor_method(floor), budget, by, None)
            cells.append(f"{coverage:.3f} | {tokens:.0f}")
        out.append(f"| {floor:g} | " + " | ".join(cells) + " |")
    parts = (
        sorted(scores.coverage)
        if by == "haystack"
        else sorted({kind for kinds in scores.ask_kinds.values() for kind in kinds})
    )
    out += [
        "",
        f"| left out ({by}) | floor chosen on the rest | "
        + " | ".join(f"coverage change {b} (tokens)" for b in budgets),
        "| --- | --- |" + " --- |" * len(budgets),
    ]
    chosen_floors = []
    for part in parts:
        floor = choose_floor(scores, floors, budgets, by, part)
        chosen_floors.append(floor)
        cells = []
        for budget in budgets:
            base, base_tokens = _part_mean(scores, floor_method(0.0), budget, by, "=" + part)
            at, tokens = _part_mean(scores, floor_method(floor), budget, by, "=" + part)
            cells.append(f"{at - base:+.3f} ({base_tokens:.0f} → {tokens:.0f})")
        out.append(f"| {part} | {floor:g} | " + " | ".join(cells) + " |")
    everything = choose_floor(scores, floors, budgets, by, None)
    out.append("")
    out.append(
        f"floor chosen on every question: {everything:g}; with one {by} left out: "
        f"{min(chosen_floors):g} … {max(chosen_floors):g}"
    )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", choices=sorted(DATA), default="locomo")
    parser.add_argument("--path", type=Path, help="the data file (default: the development split)")
    parser.add_argument("--limit", type=int, default=0, help="haystacks to use (0: all)")
    parser.add_argument(
        "--haystacks",
        type=int,
        default=0,
        help="only the first N haystacks of those chosen (0: all): a quick look while the "
        "vectors of the rest are not cached yet",
    )
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--embedder", choices=["minilm", "hashing", "none"], default="minilm")
    parser.add_argument("--cache", type=Path, default=bench_cache_directory())
    parser.add_argument(
        "--floors",
        default="",
        help="relevance floors to measure besides the default (comma-separated, e.g. "
        "0,0.2,0.4), and to choose from with one haystack (LoCoMo) or question type "
        "(LongMemEval) left out",
    )
    args = parser.parse_args()
    path = args.path or DATA[args.dataset]
    haystacks = (locomo if args.dataset == "locomo" else longmemeval)(path, args.limit)
    if args.haystacks:
        haystacks = haystacks[: args.haystacks]
    budgets = [int(b) for b in args.budgets.split(",")]
    embedder = make_embedder(args.embedder, args.cache)
    floors = sorted({0.0, *(float(f) for f in args.floors.split(","))}) if args.floors else []
    scores = evaluate(haystacks, embedder, budgets, floors=floors)
    print()
    print(report(scores, budgets, args.dataset, len(haystacks)))
    if floors:
        print()
        by = "haystack" if args.dataset == "locomo" else "kind"
        print(floor_report(scores, floors, budgets, by))


if __name__ == "__main__":
    main()

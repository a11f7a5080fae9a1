"""LongMemEval's retrieval evaluation: a user's chat history, and the turns and sessions that
answer a question about it, with plain baselines in the same run.

Run: ``python -m bench.longmemeval PATH [--limit N | --questions IDS] [--embedder E] [--no-cache]
[--timing N]``,
PATH a LongMemEval file (JSON, or gzipped JSON: a list of questions, each with
``question_type``, ``question``, ``question_date``, ``answer_session_ids``, ``haystack_dates``,
``haystack_session_ids``, ``haystack_sessions`` — lists of ``{"role", "content",
"has_answer"}`` turns). The development split of the S setting lives in
``../shared/data/longmemeval_s_dev.json.gz`` beside the repository, not in it.

Procedure, per question (abstention questions, ``_abs``, left out: they have no evidence), in a
fresh in-memory store:

* every haystack session is captured in date order as it happened: each turn
  ``capture_memory({"speaker": role, "text": content})`` with ``timestamp`` the session's date
  and the engine's clock at that moment too (the data dates sessions, not turns: a session's
  turns share its time), one :meth:`~membrane_es.Membrane.batch` a session;
* the question is asked at its ``question_date``: ``retrieve(question, limit=100)``; the turns
  among the records returned, in order, are the turn ranking, and the sessions in the order
  their first turn appears in it the session ranking;
* the baselines of :mod:`bench.baselines` rank the same turns the same way, in the same run:
  BM25 over ``"role: content"``, cosine over the vector of the text the engine embeds for the
  turn (its search text: the same vector the engine holds).

Metrics, as LongMemEval defines them, at k = 5 and 10, at session level (evidence:
``answer_session_ids``) and turn level (evidence: turns with ``has_answer``):
``recall_any@k`` (any evidence in the top k), ``recall_all@k`` (all of it), ``ndcg_any@k``
(binary relevance, DCG with the first place undiscounted), averaged over the questions, overall
and per ``question_type``. "best" is the strongest baseline on each figure.

Vectors are kept on disk by text digest (:mod:`bench.vector_cache`), so a rerun takes minutes;
``--limit N`` takes a subset stratified by question type (evenly spaced within each type, in
file order). Ingestion is timed separately on the first ``--timing`` questions with the model
running (no cache): turns per second through ``capture_memory``, beside the embedder alone on
exactly the texts the engine gave it, in the same calls.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench import baselines
from bench.baselines import BASELINES, Bm25
from bench.longmem import FULL_TRUST, SessionClock, make_embedder
from bench.vector_cache import DiskCachedEmbedder
from membrane_es import Membrane
from membrane_es.embedding import Embedder, search_text
from membrane_es.embedding.protocol import Matrix
from membrane_es.timekeeping.clock import MonotonicClock

DEFAULT_DATA = (
    Path(__file__).resolve().parent.parent.parent / "shared/data/longmemeval_s_dev.json.gz"
)
KS = (5, 10)
RETRIEVED = 100  # turns asked for: enough to hold ten distinct sessions
METHODS = ("membrane_es", *BASELINES)
LEVELS = ("session", "turn")
METRICS = tuple(
    f"{level} {name}@{k}"
    for level in LEVELS
    for k in KS
    for name in ("recall_any", "recall_all", "ndcg_any")
)


@dataclass(frozen=True)
class Turn:
    id: str  # "<session id>:<index in the session>"
    session: str
    role: str
    text: str
    evidence: bool

    @property
    def line(self) -> str:
        return f"{self.role}: {self.text}"


@dataclass(frozen=True)
class Session:
    id: str
    at: datetime
    turns: list[Turn]


@dataclass(frozen=True)
class Question:
    id: str
    type: str
    text: str
    asked: datetime
    sessions: list[Session]  # in date order
    evidence_sessions: frozenset[str]

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]

    @property
    def evidence_turns(self) -> frozenset[str]:
        return frozenset(turn.id for turn in self.turns if turn.evidence)


def moment(text: str) -> datetime:
    """A LongMemEval date (``2023/05/20 (Sat) 02:21``) as UTC."""
    return datetime.strptime(
        text.split(" (")[0] + " " + text.split(") ")[1], "%Y/%m/%d %H:%M"
    ).replace(tzinfo=UTC)


def load(path: Path) -> list[Question]:
    """The questions of a LongMemEval file, abstention questions left out."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as source:
        items = json.load(source)
    questions = []
    for item in items:
        if item["question_id"].endswith("_abs"):
            continue
        sessions = []
        for session_id, date, turns in zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
            strict=True,
        ):
            made = [
                Turn(
                    f"{session_id}:{i}",
                    session_id,
                    turn["role"],
                    turn["content"],
                    bool(turn.get("has_answer")),
                )
                for i, turn in enumerate(turns)
                if turn["content"].strip()
            ]
            sessions.append(Session(session_id, moment(date), made))
        sessions.sort(key=lambda s: s.at)  # stable: sessions of one date keep the file's order
        questions.append(
            Question(
                item["question_id"],
                item["question_type"],
                item["question"],
                moment(item["question_date"]),
                sessions,
                frozenset(item["answer_session_ids"]),
            )
        )
    return questions


def stratified(questions: Sequence[Question], limit: int) -> list[Question]:
    """About ``limit`` questions, each type in proportion to its share (at least one), evenly
    spaced within the type in file order; the rest in file order."""
    if limit <= 0 or limit >= len(questions):
        return list(questions)
    by_type: dict[str, list[Question]] = defaultdict(list)
    for question in questions:
        by_type[question.type].append(question)
    chosen: set[str] = set()
    for members in by_type.values():
        quota = max(1, round(limit * len(members) / len(questions)))
        step = len(members) / quota
        chosen.update(members[int(i * step)].id for i in range(quota))
    return [question for question in questions if question.id in chosen]


def chosen(questions: Sequence[Question], ids: str, limit: int) -> list[Question]:
    """The questions named in ``ids`` (comma-separated, in file order), else the
    :func:`stratified` subset of ``limit``."""
    wanted = {item.strip() for item in ids.split(",") if item.strip()}
    if not wanted:
        return stratified(questions, limit)
    missing = wanted - {question.id for question in questions}
    if missing:
        raise SystemExit(f"--questions: no question {', '.join(sorted(missing))} in the file")
    return [question for question in questions if question.id in wanted]


# --- the engine ---------------------------------------------------------------------------


def ingest(
    question: Question, embedder: Embedder | None
) -> tuple[Membrane, dict[str, str], dict[str, str]]:
    """A store holding the question's haystack, captured as it happened; the turn id of each
    turn's record, and the text the engine embeds for each turn id."""
    wall = SessionClock(question.sessions[0].at)
    memory = Membrane.in_memory(clock=MonotonicClock(source=wall), embedder=embedder)
    turn_of: dict[str, str] = {}
    embedded: dict[str, str] = {}
    for session in question.sessions:
        wall.current = session.at
        with memory.batch():
            for turn in session.turns:
                captured = memory.capture_memory(
                    {"speaker": turn.role, "text": turn.text},
                    source_kind="dialogue_turn",
                    source="longmemeval",
                    timestamp=session.at,
                )
                turn_of[captured.primary_record.id] = turn.id
                embedded[turn.id] = search_text(captured.primary_record)
    wall.current = max(question.asked, question.sessions[-1].at)
    return memory, turn_of, embedded


def engine_ranking(
    memory: Membrane, turn_of: dict[str, str], question: str, vector: Matrix | None
) -> list[str]:
    found = memory.retrieve(
        task_descriptor=question,
        trust=FULL_TRUST,
        limit=RETRIEVED,
        query_embedding=None if vector is None else vector.tolist(),
    )
    return [turn_of[record.id] for record in found.records if record.id in turn_of]


# --- metrics ------------------------------------------------------------------------------


def dcg(relevances: Sequence[float]) -> float:
    return sum(r if i == 0 else r / math.log2(i + 1) for i, r in enumerate(relevances))


def figures(ranking: Sequence[str], evidence: frozenset[str]) -> dict[str, float]:
    """recall_any, recall_all and ndcg_any at each k of one ranking (ids, best first)."""
    out = {}
    for k in KS:
        top = ranking[:k]
        found = evidence.intersection(top)
        out[f"recall_any@{k}"] = 1.0 if found else 0.0
        out[f"recall_all@{k}"] = 1.0 if found == evidence else 0.0
        ideal = dcg([1.0] * min(k, len(evidence)))
        out[f"ndcg_any@{k}"] = dcg([1.0 if item in evidence else 0.0 for item in top]) / ideal
    return out


def sessions_of(ranking: Sequence[str]) -> list[str]:
    """The sessions of a turn ranking, in the order their first turn appears."""
    return list(dict.fromkeys(turn_id.rsplit(":", 1)[0] for turn_id in ranking))


@dataclass
class Results:
    # method -> group ("all" or a question type) -> metric -> values
    values: dict[str, dict[str, dict[str, list[float]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    )
    turns: int = 0
    questions: int = 0
    ingest_seconds: float = 0.0  # through capture_memory, vectors as the embedder gives them
    types: list[str] = field(default_factory=list)  # of each question scored, in order

    def add(self, method: str, question: Question, ranking: Sequence[str]) -> None:
        scored = {
            **{
                f"session {name}": value
                for name, value in figures(sessions_of(ranking), question.evidence_sessions).items()
            },
            **{
                f"turn {name}": value
                for name, value in figures(ranking, question.evidence_turns).items()
            },
        }
        for group in ("all", question.type):
            for metric, value in scored.items():
                self.values[method][group][metric].append(value)

    def mean(self, method: str, group: str, metric: str) -> float:
        values = self.values[method][group][metric]
        return float(np.mean(values)) if values else 0.0

    def count(self, group: str) -> int:
        return len(self.values["membrane_es"][group][METRICS[0]])


def evaluate(
    questions: Sequence[Question],
    embedder: Embedder | None,
    progress: Callable[[str], None] = lambda _: None,
) -> Results:
    results = Results()
    for number, question in enumerate(questions, 1):
        turns = question.turns
        started = time.perf_counter()
        memory, turn_of, embedded = ingest(question, embedder)
        results.ingest_seconds += time.perf_counter() - started
        results.turns += len(turns)
        results.questions += 1
        bm25 = Bm25([turn.line for turn in turns])
        try:
            vectors = query = None
            if embedder is not None:
                # The text the engine embeds for each turn: one vector per text, shared.
                vectors = embedder.embed([embedded[turn.id] for turn in turns])
                query = embedder.embed([question.text])[0]
            ranking = engine_ranking(memory, turn_of, question.text, query)
            results.types.append(question.type)
            results.add("membrane_es", question, ranking)
            ids = [turn.id for turn in turns]
            for method, found in baselines.rankings(
                bm25, question.text, vectors, query, RETRIEVED
            ).items():
                results.add(method, question, [ids[i] for i in found])
        finally:
            memory.close()
            bm25.close()
        progress(f"{number}/{len(questions)} {question.id} ({question.type}): {len(turns)} turns")
    return results


class RecordingEmbedder:
    """An embedder that notes every call's texts (to time the model alone on the same calls)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    @property
    def model(self) -> str:
        return self.inner.model

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def time_ingestion(questions: Sequence[Question], embedder: Embedder) -> tuple[int, float, float]:
    """(turns, seconds through capture_memory, seconds of the embedder alone on the texts the
    engine gave it, call for call), the model running every time."""
    turns, engine, alone = 0, 0.0, 0.0
    for question in questions:
        recording = RecordingEmbedder(embedder)
        started = time.perf_counter()
        memory, _, _ = ingest(question, recording)
        engine += time.perf_counter() - started
        memory.close()
        turns += len(question.turns)
        started = time.perf_counter()
        for texts in recording.calls:
            embedder.embed(texts)
        alone += time.perf_counter() - started
    return turns, engine, alone


TARGETS = ("turn recall_all@10", "session recall_all@5")


def left_out(results: Results, metric: str) -> dict[str, float]:
    """The engine's lead over the best baseline on ``metric`` over every question but those
    of one type, for each type left out."""
    methods = [m for m in METHODS if results.values[m]["all"]]
    types = np.array(results.types)
    leads = {}
    for kind in sorted(set(results.types)):
        keep = types != kind
        if not keep.any():
            continue
        figures = {
            m: float(np.mean(np.array(results.values[m]["all"][metric])[keep])) for m in methods
        }
        rest = [m for m in methods if m != "membrane_es"]
        if rest:
            leads[kind] = figures["membrane_es"] - baselines.best(figures, rest)[1]
    return leads


def report(results: Results, embedder: str) -> str:
    methods = [m for m in METHODS if results.values[m]["all"]]
    groups = sorted(results.values["membrane_es"], key=lambda g: (g != "all", g))
    out = [f"embedder {embedder}; {results.questions} questions, {results.turns} turns"]
    for group in groups:
        out.append(f"\n{group} ({results.count(group)} questions)")
        out.append("| metric | " + " | ".join(methods) + " | best baseline | lead |")
        out.append("| --- |" + " --- |" * (len(methods) + 2))
        for metric in METRICS:
            values = {m: results.mean(m, group, metric) for m in methods}
            name, value = baselines.best(values, [m for m in methods if m != "membrane_es"])
            row = " | ".join(f"{values[m]:.3f}" for m in methods)
            lead = values["membrane_es"] - value
            out.append(f"| {metric} | {row} | {name} | {lead:+.3f} |")
    for metric in TARGETS:
        leads = left_out(results, metric)
        if leads:
            out.append(f"\n{metric}: lead over the best baseline, one question type left out")
            out.extend(f"  without {kind}: {lead:+.3f}" for kind, lead in leads.items())
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", type=Path, nargs="?", default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, default=0, help="a stratified subset (0: all)")
    parser.add_argument(
        "--embedder",
        choices=["minilm", "minilm-fp32", "minilm-torch", "hashing", "none"],
        default="minilm",
    )
    parser.add_argument(
        "--questions",
        default="",
        metavar="IDS",
        help="only these question ids (comma-separated), instead of --limit's subset",
    )
    parser.add_argument("--no-cache", action="store_true", help="run the model on every text")
    parser.add_argument(
        "--timing", type=int, default=0, help="time ingestion on this many questions (no cache)"
    )
    args = parser.parse_args()
    questions = chosen(load(args.path), args.questions, args.limit)
    model = make_embedder(args.embedder)
    embedder: Embedder | None = model
    if model is not None and not args.no_cache and args.embedder != "hashing":
        embedder = DiskCachedEmbedder(model)
    started = time.perf_counter()
    results = evaluate(questions, embedder, progress=print)
    print(f"(evaluated in {time.perf_counter() - started:.0f} s)")
    print(report(results, args.embedder))
    rate = results.turns / results.ingest_seconds if results.ingest_seconds else 0.0
    cached = "from the cache" if isinstance(embedder, DiskCachedEmbedder) else "computed"
    print(f"\ningestion in the run (vectors {cached}): {rate:.0f} turns/s")
    if args.timing and model is not None:
        turns, engine, alone = time_ingestion(questions[: args.timing], model)
        print(
            f"ingestion, model running ({args.timing} questions, {turns} turns): "
            f"{turns / engine:.1f} turns/s through capture_memory; the embedder alone on the "
            f"same texts, same calls: {turns / alone:.1f} turns/s (ratio {alone / engine:.2f})"
        )


if __name__ == "__main__":
    main()

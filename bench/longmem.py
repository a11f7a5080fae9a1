"""Long-conversation memory: the LoCoMo retrieval procedure, with its baselines in the same run.

Run: ``python -m bench.longmem PATH [--conversations 0,2] [--embedder E]``, E one of
``minilm`` (the default embedder: MiniLM, int8, on ONNX Runtime), ``minilm-fp32`` (its fp32
weights, the ``embeddings`` extra, on ONNX Runtime), ``minilm-torch`` (the fp32 model on torch),
``hashing``, ``none``;
where PATH is a LoCoMo-format JSON file (a list of conversations with ``conversation`` —
``speaker_a``, ``session_N``, ``session_N_date_time`` — and ``qa``); the development split
lives in ``../shared/data/locomo_dev.json`` beside the repository, not in it.

Procedure, per conversation, in a fresh in-memory store:

* every dialogue turn is captured as it happened: ``capture_memory({"speaker", "text"})`` with
  ``timestamp`` the session's date and the engine's clock at that moment too (a memory made
  during the conversation, not loaded afterwards); a shared image adds its caption to the text.
  A session's turns are written in one :meth:`~membrane_es.Membrane.batch`;
* each question (category 5, the adversarial ones, left out as is standard) is asked a day
  after the last session: ``retrieve(question, limit=25)``; the turns among the records
  returned, in order, are scored against the question's evidence turns;
* baselines over the same turn texts (``"speaker: text"``), measured in the same run
  (:mod:`bench.baselines`): BM25 of SQLite FTS5 with every word of the question, and with only
  the words the engine searches by (its tokenizer and stop words), plain cosine of the same
  embedder, and each BM25's reciprocal-rank fusion (k = 60) and min-max score fusion (equal
  weights) with cosine. "best" is the strongest of them on each figure.

Metrics per question, averaged overall and per category: recall@k = evidence turns in the top k
/ evidence turns; hit@k = whether any is. Ingestion is reported as turns per second of the
engine's captures (embedding included), beside the embedder alone on the same texts: a
conversation's turns in one call, and one call a session (as the captures batch them).

``--cache`` keeps vectors on disk by text digest (:mod:`bench.vector_cache`): reruns take a
fraction of the time, and the ingestion figures then mean nothing. ``--shared-times`` stamps
every turn of a session with the session's time (the data dates sessions, not turns) instead
of a second apart.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench import baselines
from bench.baselines import BASELINES, Bm25
from bench.vector_cache import DiskCachedEmbedder
from membrane_es import Membrane, TrustContext
from membrane_es.embedding import Embedder, HashingEmbedder
from membrane_es.schema import Sensitivity
from membrane_es.timekeeping.clock import MonotonicClock

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared/data/locomo_dev.json"
KS = (5, 10, 25)
ADVERSARIAL = 5
FULL_TRUST = TrustContext(max_sensitivity=Sensitivity.HYPER, authenticated=True)
METHODS = ("membrane_es", *BASELINES)

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    at: datetime

    @property
    def line(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True)
class Conversation:
    name: str
    sessions: list[list[Turn]]
    questions: list[Question]

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session]


def session_time(text: str) -> datetime:
    """A LoCoMo session date (``1:56 pm on 8 May, 2023``) as UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(path: Path, shared_times: bool = False) -> list[Conversation]:
    """The conversations of a LoCoMo file; a session's turns a second apart, or all at the
    session's time with ``shared_times``."""
    conversations = []
    for index, item in enumerate(json.loads(path.read_text())):
        dialogue = item["conversation"]
        numbers = sorted(
            int(match.group(1))
            for key in dialogue
            if (match := re.fullmatch(r"session_(\d+)", key)) and dialogue[key]
        )
        sessions = []
        for number in numbers:
            at = session_time(dialogue[f"session_{number}_date_time"])
            session = []
            for offset, turn in enumerate(dialogue[f"session_{number}"]):
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares an image: {turn['blip_caption']}]"
                moment = at if shared_times else at + timedelta(seconds=offset)
                session.append(Turn(turn["dia_id"], turn["speaker"], text, moment))
            sessions.append(session)
        known = {turn.dia_id for session in sessions for turn in session}
        questions = []
        for qa in item["qa"]:
            evidence = frozenset(e.strip() for e in qa.get("evidence", []) if e.strip() in known)
            if qa["category"] != ADVERSARIAL and evidence:
                questions.append(Question(qa["question"], evidence, int(qa["category"])))
        conversations.append(Conversation(item.get("sample_id", str(index)), sessions, questions))
    return conversations


# --- the engine ---------------------------------------------------------------------------


class SessionClock:
    """A wall clock the benchmark sets to each turn's moment."""

    def __init__(self, start: datetime) -> None:
        self.current = start

    def __call__(self) -> datetime:
        return self.current


def ingest(
    conversation: Conversation, embedder: Embedder | None
) -> tuple[Membrane, dict[str, str]]:
    """A store holding the conversation's turns, captured as they happened; the dia id of
    each turn's record."""
    wall = SessionClock(conversation.sessions[0][0].at)
    memory = Membrane.in_memory(clock=MonotonicClock(source=wall), embedder=embedder)
    dia_of: dict[str, str] = {}
    for session in conversation.sessions:
        with memory.batch():
            for turn in session:
                wall.current = turn.at
                captured = memory.capture_memory(
                    {"speaker": turn.speaker, "text": turn.text},
                    source_kind="dialogue_turn",
                    source="locomo",
                    timestamp=turn.at,
                )
                dia_of[captured.primary_record.id] = turn.dia_id
    wall.current = conversation.sessions[-1][-1].at + timedelta(days=1)
    return memory, dia_of


def engine_ranking(
    memory: Membrane, dia_of: dict[str, str], question: str, vector: Vectors | None
) -> list[str]:
    found = memory.retrieve(
        task_descriptor=question,
        trust=FULL_TRUST,
        limit=max(KS),
        query_embedding=None if vector is None else vector.tolist(),
    )
    return [dia_of[record.id] for record in found.records if record.id in dia_of]


# --- scoring ------------------------------------------------------------------------------


@dataclass
class Tally:
    questions: int = 0
    recall: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))
    hits: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))

    def add(self, ranking: Sequence[str], evidence: frozenset[str]) -> None:
        self.questions += 1
        for k in KS:
            found = len(evidence.intersection(ranking[:k]))
            self.recall[k] += found / len(evidence)
            self.hits[k] += 1.0 if found else 0.0

    def mean(self) -> dict[str, float]:
        n = max(self.questions, 1)
        return {
            **{f"R@{k}": self.recall[k] / n for k in KS},
            **{f"hit@{k}": self.hits[k] / n for k in KS},
        }


@dataclass
class Results:
    tallies: dict[str, dict[str, Tally]] = field(
        default_factory=lambda: {method: defaultdict(Tally) for method in METHODS}
    )
    turns: int = 0
    ingest_seconds: float = 0.0
    embed_seconds: float = 0.0  # the embedder alone, a conversation's turns in one call
    session_embed_seconds: float = 0.0  # ... one call a session, as the captures batch them

    def add(
        self,
        method: str,
        category: int,
        ranking: Sequence[str],
        evidence: frozenset[str],
        conversation: str = "",
    ) -> None:
        groups = ["all", f"cat {category}"]
        if conversation:  # for leaving one conversation out (:func:`left_out`)
            groups += [f"{conversation}|{group}" for group in groups]
        for group in groups:
            self.tallies[method][group].add(ranking, evidence)


def left_out(results: Results, metric: str = "R@5") -> dict[str, list[float]]:
    """For each group (all, each category): the engine's lead over the best baseline on the
    questions of every conversation but one, one figure per conversation left out."""
    methods = [m for m in METHODS if results.tallies[m]["all"].questions]
    k = int(metric.split("@")[1])
    field = "recall" if metric.startswith("R@") else "hits"
    conversations = sorted({g.split("|")[0] for g in results.tallies["membrane_es"] if "|" in g})
    leads: dict[str, list[float]] = defaultdict(list)
    for group in [g for g in results.tallies["membrane_es"] if "|" not in g]:
        for conversation in conversations:
            figures = {}
            for method in methods:
                whole = results.tallies[method][group]
                part = results.tallies[method].get(f"{conversation}|{group}", Tally())
                count = whole.questions - part.questions
                total = getattr(whole, field)[k] - getattr(part, field)[k]
                figures[method] = total / count if count else float("nan")
            rest = [m for m in methods if m != "membrane_es"]
            if rest and figures["membrane_es"] == figures["membrane_es"]:  # not NaN
                leads[group].append(figures["membrane_es"] - baselines.best(figures, rest)[1])
    return dict(leads)


def evaluate(
    conversations: Sequence[Conversation],
    embedder: Embedder | None,
    progress: Callable[[str], None] = lambda _: None,
) -> Results:
    results = Results()
    for conversation in conversations:
        turns = conversation.turns
        lines = [turn.line for turn in turns]
        started = time.perf_counter()
        memory, dia_of = ingest(conversation, embedder)
        results.ingest_seconds += time.perf_counter() - started
        results.turns += len(turns)
        bm25 = Bm25(lines)
        try:
            vectors = None
            if embedder is not None:
                started = time.perf_counter()
                vectors = embedder.embed(lines)
                results.embed_seconds += time.perf_counter() - started
                started = time.perf_counter()
                for session in conversation.sessions:
                    embedder.embed([turn.line for turn in session])
                results.session_embed_seconds += time.perf_counter() - started
            questions = [q.text for q in conversation.questions]
            query_vectors = embedder.embed(questions) if embedder is not None else None
            for i, question in enumerate(conversation.questions):
                query = None if query_vectors is None else query_vectors[i]
                for method, ranking in _rankings(
                    memory, dia_of, bm25, vectors, query, question.text, turns
                ):
                    results.add(
                        method,
                        question.category,
                        ranking,
                        question.evidence,
                        conversation.name,
                    )
        finally:
            memory.close()
            bm25.close()
        progress(
            f"{conversation.name}: {len(turns)} turns, {len(conversation.questions)} questions"
        )
    return results


def _rankings(
    memory: Membrane,
    dia_of: dict[str, str],
    bm25: Bm25,
    vectors: Vectors | None,
    query: Vectors | None,
    question: str,
    turns: Sequence[Turn],
) -> Iterator[tuple[str, list[str]]]:
    ids = [turn.dia_id for turn in turns]
    yield "membrane_es", engine_ranking(memory, dia_of, question, query)
    for method, ranking in baselines.rankings(bm25, question, vectors, query, max(KS)).items():
        yield method, [ids[i] for i in ranking]


def make_embedder(name: str) -> Embedder | None:
    if name == "none":
        return None
    if name == "hashing":
        return HashingEmbedder(384)
    if name == "minilm-torch":
        from membrane_es.embedding import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder()
    from membrane_es.embedding.default import TORCH_MODEL, load_minilm

    if name == "minilm-fp32":  # the fp32 weights (the embeddings extra) on ONNX Runtime
        return load_minilm(TORCH_MODEL)
    return load_minilm()  # the default: int8 on ONNX Runtime


def report(results: Results, embedder: str) -> str:
    methods = [m for m in METHODS if results.tallies[m]["all"].questions]
    groups = sorted(
        (g for g in results.tallies["membrane_es"] if "|" not in g),
        key=lambda g: (g != "all", g),
    )
    out = [f"embedder {embedder}; {results.turns} turns"]
    for group in groups:
        tally = results.tallies["membrane_es"][group]
        out.append(f"\n{group} ({tally.questions} questions)")
        out.append("| metric | " + " | ".join(methods) + " | best baseline | lead |")
        out.append("| --- |" + " --- |" * (len(methods) + 2))
        for metric in [f"R@{k}" for k in KS] + [f"hit@{k}" for k in KS]:
            figures = {m: results.tallies[m][group].mean()[metric] for m in methods}
            name, value = baselines.best(figures, [m for m in methods if m != "membrane_es"])
            row = " | ".join(f"{figures[m]:.3f}" for m in methods)
            lead = figures["membrane_es"] - value
            out.append(f"| {metric} | {row} | {name} | {lead:+.3f} |")
    spread = left_out(results)
    if spread:
        out.append("\nR@5 lead over the best baseline, one conversation left out (min / max):")
        for group in sorted(spread, key=lambda g: (g != "all", g)):
            low, high = min(spread[group]), max(spread[group])
            out.append(f"  {group}: {low:+.3f} / {high:+.3f}")
    ingest = results.turns / results.ingest_seconds if results.ingest_seconds else 0.0
    out.append(f"\ningestion: {ingest:.0f} turns/s (captures, embedding included)")
    if results.embed_seconds:
        alone = results.turns / results.embed_seconds
        out.append(
            f"embedder alone on the same texts: {alone:.0f} turns/s (ratio {ingest / alone:.2f})"
        )
    if results.session_embed_seconds:
        alone = results.turns / results.session_embed_seconds
        out.append(
            f"embedder alone, one call a session as captured: {alone:.0f} turns/s "
            f"(ratio {ingest / alone:.2f})"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", type=Path, nargs="?", default=DEFAULT_DATA)
    parser.add_argument("--conversations", default="", help="indexes, e.g. 0,2 (default all)")
    parser.add_argument(
        "--embedder",
        choices=["minilm", "minilm-fp32", "minilm-torch", "hashing", "none"],
        default="minilm",
    )
    parser.add_argument(
        "--cache", action="store_true", help="vectors kept on disk by text digest (reruns)"
    )
    parser.add_argument(
        "--shared-times", action="store_true", help="a session's turns share its time"
    )
    args = parser.parse_args()
    conversations = load(args.path, args.shared_times)
    if args.conversations:
        conversations = [conversations[int(i)] for i in args.conversations.split(",")]
    embedder = make_embedder(args.embedder)
    if args.cache and embedder is not None:
        embedder = DiskCachedEmbedder(embedder)
    results = evaluate(conversations, embedder, progress=print)
    if args.cache:
        print("(vectors from a cache: the ingestion figures below mean nothing)")
    print(report(results, args.embedder))


if __name__ == "__main__":
    main()

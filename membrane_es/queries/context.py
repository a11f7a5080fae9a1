"""A context for a language model: the memories a task needs, packed into a token budget.

An agent reads memory through its model's context window, where every token costs. This read
ranks exactly as :mod:`membrane_es.queries.retrieve` does (same trust, filters and ``as_of``)
and packs the records it returns, best first, as one line each::

    2023-05-08 Caroline: I adopted a puppy last week [e7e489b7]

— the event date, who said it (a conversation turn's speaker; otherwise the record's type in
parentheses), the words, and a short reference to cite: a prefix of the record's id, unique
within the context. A record whose line no longer fits is passed over for the next one that
does, and a long line — over a quarter of the budget, or over :data:`LONG_LINE_TOKENS`
whatever the budget — is offered only after the shorter ones ranked below it, unless it is
the best match, which is always offered first; packing ends
when the budget cannot hold another line or the candidates run out. A text longer than the
embedder reads was ranked by its passage closest to the task
(:mod:`membrane_es.embedding.passages`); a long line is offered as that passage, marked as an
excerpt by ``…`` where the words go on: the part of a long answer that matched is more
likely to fit in what the budget has left than all of it. The
chosen lines are then written grouped by scope and day — the turns of one conversation
together — groups and lines in time order, groups apart by a blank line, so a model reads
what was said in the order it was said.

Only what the caller may read in full is packed: a record returned redacted (one level above
the trust's ceiling) shows no words, and is left out; erased (forgotten) records have none.
So a context built ``as_of`` T holds only records a retrieve at T returned.

Tokens are counted by :mod:`membrane_es.embedding.tokens`: the embedder's word pieces, or the
documented estimate without one; a text's count is the sum of its lines' counts (line breaks
count nothing).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import msgspec
import numpy as np

from membrane_es.embedding.passages import Splitter, located, splitter_of
from membrane_es.embedding.record_text import search_text, trigger_text
from membrane_es.embedding.tokens import TokenCounter
from membrane_es.errors import ValidationError
from membrane_es.queries import retrieve as retrieval
from membrane_es.queries.snapshot import Hydrator, Snapshot, consistently
from membrane_es.schema.payloads import EpisodicPayload
from membrane_es.schema.records import MemoryRecord, TrustContext
from membrane_es.schema.results import ContextMemory, ContextResult
from membrane_es.schema.validation import check_trust

DEFAULT_BUDGET_TOKENS = 1024
MIN_BUDGET_TOKENS = 16
MAX_BUDGET_TOKENS = 1_000_000
REF_LENGTH = 8  # hex digits of a record id that cite it (extended on a clash)
# Candidates ranked for a budget: enough lines to fill it (a short line is about 12 tokens)
# and, past a fully packed budget, some to pass over; never fewer than a short list.
TOKENS_PER_CANDIDATE = 8
MIN_CANDIDATES = 32
COUNT_BATCH = 32  # lines rendered and counted together
LONG_SHARE = 0.25  # a line over this share of the budget is offered after the shorter ones
# ... as is a line over this many tokens, whatever the budget: the window a sentence embedder
# reads whole (all-MiniLM-L6-v2: 256 word pieces), a few paragraphs — a document more than a
# message. A larger budget then holds more of the memories ranked first, not one long text
# sooner: what a budget holds is about what a smaller one held, and more.
LONG_LINE_TOKENS = 256
# Keys of captured content whose value says who spoke, and whose value is the words.
SPEAKER_KEYS = ("speaker", "role", "author", "user", "from")
WORDS_KEYS = ("text", "content", "message", "utterance", "body")
_SPACES = re.compile(r"\s+")
ELLIPSIS = "…"  # where an excerpt's words go on


class Context(msgspec.Struct, kw_only=True, frozen=True):
    """A context request; fields are checked when it runs (each failure names its field).

    ``budget_tokens``: the most the text may count; ``as_of``, ``memory_types``,
    ``min_salience``, ``created_after`` / ``created_before``: as for
    :class:`~membrane_es.queries.retrieve.Retrieve`.
    """

    task_descriptor: str
    trust: TrustContext | None = msgspec.field(default_factory=TrustContext)
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    as_of: datetime | None = None
    memory_types: Iterable[str] | None = None
    min_salience: float = 0.0
    created_after: datetime | None = None
    created_before: datetime | None = None


@dataclass(frozen=True)
class Memory:
    """What a line says of a record: the parts :func:`pack` writes."""

    id: str
    type: str
    at: datetime  # event time
    who: str
    words: str
    group: str  # records of one group (a scope) on one day are written together
    score: float = 0.0
    excerpt: str = ""  # a long text's passage that matched the task, marked (empty: none)


@dataclass(frozen=True)
class Packed:
    """Chosen memories in the order of the text, with their refs and token counts."""

    text: str
    chosen: list[tuple[Memory, str, int]]

    @property
    def tokens(self) -> int:
        return sum(tokens for _, _, tokens in self.chosen)


def context(query: Context, sources: retrieval.Sources, counter: TokenCounter) -> ContextResult:
    """The context for ``query``, read from one snapshot of ``sources``."""
    trust = check_trust(query.trust)
    budget = check_budget(query.budget_tokens)
    plan = retrieval.make_plan(
        sources,
        descriptor=query.task_descriptor,
        trust=trust,
        memory_types=query.memory_types,
        min_salience=query.min_salience,
        limit=max(MIN_CANDIDATES, budget // TOKENS_PER_CANDIDATE),
        as_of=query.as_of,
        valid_at=None,
        include_retracted=False,
        query_embedding=None,
        created_after=query.created_after,
        created_before=query.created_before,
    )
    # What retrieve would return: with a task in words, only records it gives evidence for.
    plan = replace(plan, evidence_only=bool(plan.descriptor.strip()))
    read = partial(_answer, plan, sources, counter, budget)
    return consistently(sources.views, sources.now, plan.as_of, read)


def check_budget(budget_tokens: Any) -> int:
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
        raise ValidationError("budget_tokens", "budget_tokens must be an integer")
    if not MIN_BUDGET_TOKENS <= budget_tokens <= MAX_BUDGET_TOKENS:
        raise ValidationError(
            "budget_tokens",
            f"must be between {MIN_BUDGET_TOKENS} and {MAX_BUDGET_TOKENS:,}, got {budget_tokens}",
        )
    return budget_tokens


def _answer(
    plan: retrieval.Plan,
    sources: retrieval.Sources,
    counter: TokenCounter,
    budget: int,
    snapshot: Snapshot,
) -> ContextResult:
    ranking = retrieval.rank(snapshot, plan, sources.selection_threshold)
    ranked = ranking.ranked
    hydrator = Hydrator(sources.reader, snapshot)
    hydrator.know(ranked.rows, ranked.salience)
    scores = ranking.scores if ranking.scores is not None else ranked.salience
    passages = ranking.passages if ranking.passages is not None else np.zeros(len(ranked), np.int64)
    readable = [
        (int(row), float(score), int(passage))
        for row, redacted, score, passage in zip(
            ranked.rows, ranked.redacted, scores, passages, strict=True
        )
        if not redacted  # a redacted record shows no words: nothing of it is packed
    ]
    split = splitter_of(sources.embedder)

    def memories() -> Iterator[Memory]:
        for start in range(0, len(readable), COUNT_BATCH):
            chunk = readable[start : start + COUNT_BATCH]
            hydrator.prepare(_rows(chunk))
            for row, score, passage in chunk:
                record = hydrator.full(row)
                memory = memory_of(record, score)
                if memory is not None and passage > 0 and split is not None:
                    memory = replace(memory, excerpt=excerpt(record, passage, split))
                if memory is not None:
                    yield memory

    packed = pack(memories(), budget, counter)
    return ContextResult(
        text=packed.text,
        ids=[memory.id for memory, _, _ in packed.chosen],
        memories=[
            ContextMemory(
                ref=ref,
                id=memory.id,
                type=memory.type,
                at=memory.at,
                who=memory.who,
                score=memory.score,
                tokens=tokens,
            )
            for memory, ref, tokens in packed.chosen
        ],
        tokens=packed.tokens,
        budget_tokens=budget,
        counted_with=counter.name,
        moment=snapshot.moment,
    )


def _rows(chunk: list[tuple[int, float, int]]) -> Any:
    return np.array([row for row, _, _ in chunk], dtype=np.int64)


# --- a record as a line -----------------------------------------------------------------------


def memory_of(record: MemoryRecord, score: float = 0.0) -> Memory | None:
    """The line's parts for a record; None for one with no words (an erased record)."""
    words = words_of(record)
    if not words or record.created_at is None:
        return None
    return Memory(
        id=record.id,
        type=str(record.type),
        at=record.created_at,
        who=speaker_of(record),
        words=words,
        group=record.scope,
        score=score,
    )


def captured_content(record: MemoryRecord) -> Any:
    """The raw content a captured episode was made from (None for any other record)."""
    payload = record.payload
    if not isinstance(payload, EpisodicPayload) or payload.environment is None:
        return None
    context = payload.environment.context
    return context.get("capture_content") if isinstance(context, dict) else None


def speaker_of(record: MemoryRecord) -> str:
    """Who said it: the speaker (role, author…) of captured content, else empty."""
    content = captured_content(record)
    if isinstance(content, dict):
        for key in SPEAKER_KEYS:
            value = content.get(key)
            if isinstance(value, str) and value.strip():
                return one_line(value)
    return ""


def words_of(record: MemoryRecord) -> str:
    """The words of a record, on one line: a captured turn's text as it was said, captured
    prose as given, else the record's own text (a fact's subject, predicate and object, an
    episode's summary…)."""
    content = captured_content(record)
    if isinstance(content, str) and content.strip():
        return one_line(content)
    if isinstance(content, dict):
        for key in WORDS_KEYS:
            value = content.get(key)
            if isinstance(value, str) and value.strip():
                return one_line(value)
    return one_line(trigger_text(record) or search_text(record))


def excerpt(record: MemoryRecord, passage: int, split: Splitter) -> str:
    """The words of passage ``passage`` (1: the first) of the text the record was embedded
    by, as they read in its line, ``…`` marking where its words go on; empty when the text is
    one passage or its words are not found verbatim in it."""
    text, words = search_text(record), words_of(record)
    parts = split(text)
    places = located(text, parts) if len(parts) > 1 else None
    at = text.find(words)
    if places is None or not 1 <= passage <= len(places) or at < 0:
        return ""
    first, last = max(places[passage - 1][0], at), min(places[passage - 1][1], at + len(words))
    # Whole words only: a window may start or end inside one.
    if first > at and not text[first - 1].isspace():
        first = _after_space(text, first, last)
    if last < at + len(words) and not text[last].isspace():
        last = text.rfind(" ", first, last)
    piece = text[first:last].strip() if 0 <= first < last else ""
    if not piece:
        return ""
    before = f"{ELLIPSIS} " if first > at else ""
    after = f" {ELLIPSIS}" if last < at + len(words) else ""
    return before + piece + after


def _after_space(text: str, start: int, end: int) -> int:
    space = text.find(" ", start, end)
    return space + 1 if space >= 0 else end


def one_line(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def line(memory: Memory, ref: str) -> str:
    """``2023-05-08 Caroline: the words [ref]`` (``(semantic)`` for a record with no
    speaker)."""
    day = memory.at.astimezone(UTC).date().isoformat()
    who = f"{memory.who}:" if memory.who else f"({memory.type})"
    return f"{day} {who} {memory.words} [{ref}]"


# --- packing --------------------------------------------------------------------------------


def pack(
    ranked: Iterable[Memory], budget: int, counter: TokenCounter, *, defer_long: bool = True
) -> Packed:
    """Take memories in rank order while their lines fit in ``budget`` tokens (one that does
    not fit is passed over), then write them grouped by scope and day, in time order.

    ``defer_long``: a long line (over a quarter of the budget or :data:`LONG_LINE_TOKENS`)
    waits until every shorter candidate has been offered, then is taken, in rank order, if it
    still fits — one long memory (a tool's output, an assistant's whole answer) would
    otherwise crowd out several ranked just below it; a long memory with an excerpt waits as
    its excerpt. The best match never waits: it is what the task needs most (the assistant's
    answer to "what did you recommend?"), so it is offered first — whole when it fits, else
    as its excerpt."""
    candidates = list(ranked)
    long = min(budget * LONG_SHARE, LONG_LINE_TOKENS) if defer_long else float("inf")
    chosen: list[tuple[Memory, str, int]] = []
    refs: set[str] = set()
    deferred: list[Memory] = []
    left = budget
    for start in range(0, len(candidates), COUNT_BATCH):
        if left <= 0:
            break
        batch = candidates[start : start + COUNT_BATCH]
        proposed = [(memory, ref_for(memory.id, refs)) for memory in batch]
        counts = counter.count([line(memory, ref) for memory, ref in proposed])
        for place, ((memory, ref), tokens) in enumerate(zip(proposed, counts, strict=True)):
            best = start == 0 and place == 0  # ranked first of all
            if best and tokens > left and memory.excerpt:
                # The best match that cannot fit whole is offered as the part that matched.
                memory = replace(memory, words=memory.excerpt, excerpt="")
                tokens = counter.count([line(memory, ref)])[0]
            elif tokens > long and not best:
                if memory.excerpt:
                    memory = replace(memory, words=memory.excerpt, excerpt="")
                deferred.append(memory)
                continue
            left -= _take(memory, ref, tokens, left, chosen, refs, counter)
    for memory in deferred:
        if left <= 0:
            break
        ref = ref_for(memory.id, refs)
        tokens = counter.count([line(memory, ref)])[0]
        left -= _take(memory, ref, tokens, left, chosen, refs, counter)
    return arrange(chosen)


def _take(
    memory: Memory,
    ref: str,
    tokens: int,
    left: int,
    chosen: list[tuple[Memory, str, int]],
    refs: set[str],
    counter: TokenCounter,
) -> int:
    """Add ``memory``'s line when it fits in ``left`` tokens; the tokens it took (0: none).
    ``ref`` was proposed before earlier lines of its batch were taken: one of them may have
    taken it meanwhile, and the line is then counted again with a longer one."""
    if ref in refs:
        ref = ref_for(memory.id, refs)
        tokens = counter.count([line(memory, ref)])[0]
    if tokens > left:
        return 0
    chosen.append((memory, ref, tokens))
    refs.add(ref)
    return tokens


def ref_for(record_id: str, taken: set[str]) -> str:
    """The shortest prefix of ``record_id`` from :data:`REF_LENGTH` characters not taken."""
    length = REF_LENGTH
    while record_id[:length] in taken and length < len(record_id):
        length += 1
    return record_id[:length]


def arrange(chosen: list[tuple[Memory, str, int]]) -> Packed:
    """The chosen lines grouped by scope and event day; groups by their first moment, lines
    by event time (ties by id), groups apart by a blank line."""
    groups: dict[tuple[str, str], list[tuple[Memory, str, int]]] = {}
    for item in chosen:
        memory = item[0]
        day = memory.at.astimezone(UTC).date().isoformat()
        groups.setdefault((memory.group, day), []).append(item)
    for items in groups.values():
        items.sort(key=lambda item: (item[0].at, item[0].id))
    ordered = sorted(groups.items(), key=lambda kv: (kv[1][0][0].at, kv[0]))
    blocks = ["\n".join(line(memory, ref) for memory, ref, _ in items) for _, items in ordered]
    return Packed(text="\n\n".join(blocks), chosen=[item for _, items in ordered for item in items])

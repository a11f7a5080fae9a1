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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import msgspec
import numpy as np

from membrane_es.embedding.passages import Splitter, located, splitter_of
from membrane_es.embedding.record_text import search_text
from membrane_es.embedding.tokens import TokenCounter
from membrane_es.errors import ValidationError
from membrane_es.queries import retrieve as retrieval
from membrane_es.queries.context_changes import Lookup, change_note, older_notes
from membrane_es.queries.context_words import (
    Namer,
    fact_object,
    no_names,
    one_line,
    said,
    words_of,
)
from membrane_es.queries.snapshot import Hydrator, Snapshot, consistently
from membrane_es.queries.trust import Visibility, record_visibility
from membrane_es.schema.fact_keys import normal_predicate
from membrane_es.schema.payloads import EntityPayload, SemanticPayload
from membrane_es.schema.records import MemoryRecord, TrustContext
from membrane_es.schema.results import ContextMemory, ContextResult
from membrane_es.schema.validation import check_trust

DEFAULT_BUDGET_TOKENS = 1024
MIN_BUDGET_TOKENS = 16
MAX_BUDGET_TOKENS = 1_000_000
UUID_LENGTH = 36
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
# A line is packed only when its score is at least this share of the best match's: past it,
# lines match the task by chance (measured on LoCoMo and LongMemEval, docs/benchmarks.md).
DEFAULT_RELEVANCE_FLOOR = 0.4
ELLIPSIS = "…"  # where an excerpt's words go on


class Context(msgspec.Struct, kw_only=True, frozen=True):
    """A context request; fields are checked when it runs (each failure names its field).

    ``budget_tokens``: the most the text may count; ``as_of``, ``memory_types``,
    ``min_salience``, ``created_after`` / ``created_before``: as for
    :class:`~membrane_es.queries.retrieve.Retrieve`; ``relevance_floor``: the share of the
    best match's score a line needs to be packed (0 to 1; None: :data:`DEFAULT_RELEVANCE_FLOOR`).
    """

    task_descriptor: str
    trust: TrustContext | None = msgspec.field(default_factory=TrustContext)
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    as_of: datetime | None = None
    memory_types: Iterable[str] | None = None
    min_salience: float = 0.0
    created_after: datetime | None = None
    created_before: datetime | None = None
    relevance_floor: float | None = None
    # predicates known to hold many values at once (likes, knows…): two active values of one
    # are both current, so neither is noted older
    many_valued: frozenset[str] = frozenset()


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
    note: str = ""  # what changed (:mod:`.context_changes`), in parentheses before the ref
    fact: tuple[str, str] | None = None  # a fact's (subject, predicate), casefolded
    value: str = ""  # a fact's object in words


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
    floor = check_floor(query.relevance_floor)
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
    read = partial(_answer, plan, sources, counter, budget, floor, query.many_valued)
    return consistently(sources.views, sources.now, plan.as_of, read)


def check_floor(floor: Any) -> float:
    if floor is None:
        return DEFAULT_RELEVANCE_FLOOR
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 <= floor <= 1:
        raise ValidationError("relevance_floor", f"must be a number from 0 to 1, got {floor!r}")
    return float(floor)


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
    floor: float,
    many_valued: frozenset[str],
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
    if plan.descriptor.strip():
        readable = above_floor(readable, floor)
    split = splitter_of(sources.embedder)
    lookup = _lookup(hydrator, snapshot, plan.trust)
    name = _namer(lookup)

    def memories() -> Iterator[Memory]:
        for start in range(0, len(readable), COUNT_BATCH):
            chunk = readable[start : start + COUNT_BATCH]
            hydrator.prepare(_rows(chunk))
            for row, score, passage in chunk:
                record = hydrator.full(row)
                memory = memory_of(record, score, name, lookup)
                if memory is not None and passage > 0 and split is not None:
                    memory = replace(memory, excerpt=excerpt(record, passage, split))
                if memory is not None:
                    yield memory

    packed = pack(with_older_noted(list(memories()), many_valued), budget, counter)
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


def above_floor(
    readable: list[tuple[int, float, int]], floor: float
) -> list[tuple[int, float, int]]:
    """The candidates scoring at least ``floor`` times the best one's score (all of them
    when the best scores nothing: there is no match to be relative to)."""
    best = max((score for _, score, _ in readable), default=0.0)
    if floor <= 0 or best <= 0:
        return readable
    return [item for item in readable if item[1] >= floor * best]


def _lookup(hydrator: Hydrator, snapshot: Snapshot, trust: TrustContext) -> Lookup:
    """Records by id as of the snapshot, only those ``trust`` may read in full."""
    seen: dict[str, MemoryRecord | None] = {}

    def lookup(record_id: str) -> MemoryRecord | None:
        if record_id not in seen:
            row = snapshot.row(record_id)
            record = hydrator.full(row) if row is not None else None
            if record is not None and (
                record_visibility(trust, str(record.sensitivity), record.scope)
                is not Visibility.FULL
            ):
                record = None
            seen[record_id] = record
        return seen[record_id]

    return lookup


def _namer(lookup: Lookup) -> Namer:
    """An entity id -> the entity's canonical name, when the caller may read the entity."""

    def name(value: str) -> str | None:
        if len(value) != UUID_LENGTH:  # entity ids are UUIDs: anything else is words
            return None
        record = lookup(value)
        payload = record.payload if record is not None else None
        if isinstance(payload, EntityPayload) and payload.canonical_name.strip():
            return one_line(payload.canonical_name)
        return None

    return name


def with_older_noted(
    memories: list[Memory], many_valued: frozenset[str] = frozenset()
) -> list[Memory]:
    """The memories with a fact noted ``older`` where a newer one with the same subject and
    predicate and another object is among them (:func:`.context_changes.older_notes`); a
    predicate in ``many_valued`` (normalised) holds both values at once, so is never noted."""
    facts = [
        (m.fact, m.value, m.at, m.id)
        for m in memories
        if m.fact is not None and not m.note and normal_predicate(m.fact[1]) not in many_valued
    ]
    notes = older_notes([(fact, value, at, i) for fact, value, at, i in facts if fact is not None])
    if not notes:
        return memories
    return [replace(m, note=notes[m.id]) if m.id in notes else m for m in memories]


def _rows(chunk: list[tuple[int, float, int]]) -> Any:
    return np.array([row for row, _, _ in chunk], dtype=np.int64)


# --- a record as a line -----------------------------------------------------------------------


def memory_of(
    record: MemoryRecord,
    score: float = 0.0,
    name: Namer = no_names,
    lookup: Lookup | None = None,
) -> Memory | None:
    """The line's parts for a record; None for one with no words (an erased record).
    ``name``: entity ids to names; ``lookup``: the records a note on what changed reads
    (None: no note)."""
    who, words = said(record, name)
    if not words or record.created_at is None:
        return None
    payload = record.payload
    fact = None
    if isinstance(payload, SemanticPayload):
        subject = name(payload.subject) or payload.subject
        fact = (subject.casefold(), payload.predicate.casefold())
    return Memory(
        id=record.id,
        type=str(record.type),
        at=record.created_at,
        who=who,
        words=words,
        group=record.scope,
        score=score,
        note=change_note(record, lookup, name) if lookup is not None else "",
        fact=fact,
        value=fact_object(record, name) if fact is not None else "",
    )


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


def line(memory: Memory, ref: str) -> str:
    """``2023-05-08 Caroline: the words [ref]`` (``(semantic)`` for a record with no
    speaker); a note on what changed in parentheses before the ref."""
    day = memory.at.astimezone(UTC).date().isoformat()
    who = f"{memory.who}:" if memory.who else f"({memory.type})"
    note = f" ({memory.note})" if memory.note else ""
    return f"{day} {who} {memory.words}{note} [{ref}]"


def said_key(memory: Memory) -> str:
    """What makes two lines the same line: who said it and the words (case and spacing
    aside), whatever the record, day or ref."""
    return f"{memory.who}\x00{memory.words}".casefold()


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
    packed: set[str] = set()  # what the chosen lines say (:func:`said_key`)
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
            if said_key(memory) in packed:
                continue  # the same line again (a repeated capture): never packed twice
            if best and tokens > left and memory.excerpt:
                # The best match that cannot fit whole is offered as the part that matched.
                memory = replace(memory, words=memory.excerpt, excerpt="")
                tokens = counter.count([line(memory, ref)])[0]
            elif tokens > long and not best:
                if memory.excerpt:
                    memory = replace(memory, words=memory.excerpt, excerpt="")
                deferred.append(memory)
                continue
            left -= _take(memory, ref, tokens, left, chosen, refs, counter, packed)
    for memory in deferred:
        if left <= 0:
            break
        if said_key(memory) in packed:
            continue
        ref = ref_for(memory.id, refs)
        tokens = counter.count([line(memory, ref)])[0]
        left -= _take(memory, ref, tokens, left, chosen, refs, counter, packed)
    return arrange(chosen)


def _take(
    memory: Memory,
    ref: str,
    tokens: int,
    left: int,
    chosen: list[tuple[Memory, str, int]],
    refs: set[str],
    counter: TokenCounter,
    packed: set[str],
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
    packed.add(said_key(memory))
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

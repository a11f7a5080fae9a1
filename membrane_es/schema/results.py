"""What retrieval returns: records, the selector's verdict, and graph neighbourhoods.

Names and fields follow the reference SDK (``RetrieveResult``, ``SelectionResult``,
``GraphNode``, ``RetrieveGraphResult``); records are returned as the trust context admits
them (in full, or redacted one level above the caller's ceiling).
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from membrane_es.schema.records import GraphEdge, MemoryRecord


class _Result(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of the result Structs: keyword-only; every field is always encoded."""


class SelectionResult(_Result):
    """The multi-solution selector's ranking of competence and plan_graph candidates.

    ``selected`` holds every candidate, best first; ``confidence`` is the normalised gap
    between the best two scores (the best's own score when there is one candidate, 0 when
    there are none); ``needs_more`` says it fell below the engine's selection threshold;
    ``scores`` maps each candidate id to its composite score.
    """

    selected: list[MemoryRecord]
    confidence: float
    needs_more: bool
    scores: dict[str, float]


class RetrieveResult(_Result):
    """Layered retrieval: ranked records, and the selector's verdict when competence or
    plan_graph candidates were found (None otherwise)."""

    records: list[MemoryRecord]
    selection: SelectionResult | None = None


class GraphNode(_Result):
    """A record in a graph neighbourhood: a ranked root (hop 0), or reached in ``hop`` steps."""

    record: MemoryRecord
    root: bool
    hop: int


class RetrieveGraphResult(_Result):
    """Ranked roots and their bounded neighbourhood: nodes (roots first, then by hop),
    the edges between returned nodes, the root ids in rank order, and the selection."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    root_ids: list[str]
    selection: SelectionResult | None = None


class Explanation(_Result):
    """Why a record placed where it did in a ranked read (``explain=True``).

    ``vector_similarity``: its cosine with the query vector as given (None: no vector, or
    not scored); ``vector_score``: the vector evidence it was ranked by, in [0, 1] (its
    similarity relative to the best candidate's; after relevance feedback, of the task's
    vector moved toward the records the result's ``searched_toward`` names);
    ``lexical_score``: BM25 of the descriptor's words as the fraction of a full match, in
    [0, 1] (0 for a record returned redacted: words the caller cannot see are no evidence);
    ``time_score``: 1 when its event time is within a period the descriptor
    names ("in October 2023", "last week"), else 0 (None: it names none); ``passage``: for a
    text longer than the embedder reads, which of its passages the similarity is of — it is
    scored by its best, less what the best of that many reaches by chance (1: its opening,
    the record's own vector; None: a text read whole);
    ``speaker_score``: 1 when it is a conversation turn said by someone the descriptor names
    (by name, or a chat's role by person: "I" the user, "you" the assistant), else 0 (None:
    it names no one who spoke); ``searched_with``:
    the conversation turns it was said after, whose words its lexical score counts at half
    weight, lifting it up to theirs, never above (:mod:`membrane_es.projections.said_after`);
    ``relevance``: the evidence combined (None: the read had none and ordered by
    salience); ``salience``: at ``moment``, the moment the read answered for (its ``as_of``,
    or now); ``boost``: a graph root's tie to what the descriptor names, added to its score;
    ``score``: what it was ordered by; ``trust``: ``full`` or ``redacted``.

    A record returned ``redacted`` has its score and every part of it withheld (None, and
    ``boost`` 0): how well a record above the caller's trust matched would tell what it is
    about. Its rank and salience stay (the redacted copy shows its salience anyway); the rank
    tells nothing either: a redacted hit is placed after every readable one, by salience,
    newer, then id (:mod:`membrane_es.queries.ranking`).
    """

    record_id: str
    rank: int
    score: float | None
    vector_similarity: float | None
    vector_score: float | None
    lexical_score: float | None
    relevance: float | None
    salience: float
    boost: float
    trust: str
    moment: datetime
    time_score: float | None = None
    searched_with: list[str] = msgspec.field(default_factory=list)
    passage: int | None = None
    speaker_score: float | None = None


class ExplainedRetrieveResult(RetrieveResult):
    """A :class:`RetrieveResult` with an :class:`Explanation` per record, in their order, and
    ``searched_toward``: the records the task's vector was moved toward before the search
    that ranked these (relevance feedback, :mod:`membrane_es.queries.feedback`: the first
    records a search found, in its order), empty when the read searched once."""

    explanations: list[Explanation] = msgspec.field(default_factory=list)
    searched_toward: list[str] = msgspec.field(default_factory=list)


class ExplainedRetrieveGraphResult(RetrieveGraphResult):
    """A :class:`RetrieveGraphResult` with an :class:`Explanation` per root, in rank order,
    and ``searched_toward`` as :class:`ExplainedRetrieveResult` has it."""

    explanations: list[Explanation] = msgspec.field(default_factory=list)
    searched_toward: list[str] = msgspec.field(default_factory=list)


class ConsolidationResult(msgspec.Struct, kw_only=True):
    """What one consolidation run did (the reference's ``ConsolidationResult`` counters).

    ``duplicates_resolved`` counts reinforcements of existing facts and skills; every counter
    is 0 on a run that finds nothing new (consolidation is idempotent).
    """

    episodic_compressed: int = 0
    semantic_extracted: int = 0
    semantic_triples_extracted: int = 0
    competence_extracted: int = 0
    plan_graphs_extracted: int = 0
    duplicates_resolved: int = 0
    extraction_skipped: int = 0


class ContextMemory(_Result):
    """One memory in a :class:`ContextResult`: its line's short ``ref`` (a prefix of ``id``,
    unique in the context), its type, event time (``at``), who said it (the speaker of a
    conversation turn, else empty), the score it was ranked by, and the tokens of its line."""

    ref: str
    id: str
    type: str
    at: datetime
    who: str
    score: float
    tokens: int


class ContextResult(_Result):
    """The memories a task needs, packed into a token budget as text a language model reads.

    ``text``: one line a memory (event date, who, the words, ``[ref]``), grouped by scope and
    day, groups and lines in time order, groups apart by a blank line; ``ids``: the records
    it holds, in the order of the text; ``memories``: the same, described; ``tokens``: what
    the text counts (at most ``budget_tokens``), counted as ``counted_with`` says;
    ``moment``: the moment answered for (now, or ``as_of``).
    """

    text: str
    ids: list[str]
    memories: list[ContextMemory]
    tokens: int
    budget_tokens: int
    counted_with: str
    moment: datetime

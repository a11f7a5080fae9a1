"""Choosing the roots of a graph retrieval (spec §3.5 steps 2–4).

* **Entity roots**: entities whose canonical name or an alias *is* the whole descriptor
  (trimmed, lower-cased) join the ranked candidates, when entities are among the requested
  types. They pass the same filters as every candidate.
* **Rerank** (when the descriptor is not blank): each candidate keeps the score layered
  retrieval ranked it by (relevance blended with salience, in [0, 1]) and gains
  ``root_boost / CANONICAL_BOOST`` when it is tied to what the descriptor names: an entity
  named by it, a record mentioning it, a record related to an entity named by it (more for
  the predicates that mean "is about"). Ties keep rank order.

Matching starts from the reference's ``lexicalMatch`` (both sides trimmed and lower-cased,
neither empty, one equal to or a substring of the other), with two refinements, each a
general rule rather than a weight:

1. **How much of the descriptor a name is** (:func:`name_strength`). The reference's boosts
   are built for a descriptor that *names* an entity ("Orchid", "orchid deploy target"):
   then the tie is decisive, and it still is here (strength 1). A natural-language task
   that merely *contains* a name ("what build system does the team use?" contains "team")
   is a different case: the name is one of the things the task talks about, and counts
   by how telling it is. The tie counts the weight of the name's most telling content word
   over the summed weights of the task's content words, a word's weight being its IDF in
   the store as of the read's moment (:func:`word_weights`, the statistics the lexical
   evidence uses): with equal weights a task of ``m`` content words gives ``1/m``. A name is
   one referent however many words spell it ("project alpha" counts by "alpha", not by
   both words), and a generic word that happens to be an entity's name counts little: it is
   one piece of evidence among the others (it tips close calls) rather than a trump card.
   The name must occur as whole words ("api" is not in "rapid").
2. **Same words, same evidence**: an alias spelled like the entity's canonical name
   (capture writes the canonical name as the first alias) adds nothing the canonical name
   did not already count.

The rerank works on scores, not positions. The reference scores candidate ``i`` of ``n`` as
``(n − i) + boost``, which throws away how far apart candidates are; here relevance keeps
its size, and a full-strength canonical-name tie is worth exactly the whole span of the
blended score (1), so a record tied to the entity the descriptor names still outranks every
record that is not, as in the reference, while a partial tie only tips close calls.

A redacted record carries no payload, interpretation or relations, so its boost is 0; a
related entity counts only if the caller may read it in full.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from membrane_es.projections.record_table import TYPE_CODE
from membrane_es.projections.tokens import query_terms, tokens
from membrane_es.queries.candidates import Candidates, Filters, admit, visibility
from membrane_es.queries.ranking import order
from membrane_es.queries.snapshot import Snapshot
from membrane_es.schema.enums import MemoryType
from membrane_es.schema.payloads import EntityPayload
from membrane_es.schema.records import MemoryRecord, TrustContext

CANONICAL_BOOST = 100  # an entity whose canonical name matches
ALIAS_BOOST = 75  # ... one of whose aliases matches
TYPE_BOOST = 15  # ... one of whose types matches
MENTION_SURFACE_BOOST = 30  # a record that mentions the descriptor (first such mention)
MENTION_ALIAS_BOOST = 20  # ... a mention with a matching alias (each, until a surface match)
RELATED_CANONICAL_BOOST = 60  # a relation to an entity whose canonical name matches
RELATED_ALIAS_BOOST = 45  # ... one of whose aliases matches
PREDICATE_BOOSTS = {
    "mentions_entity": 20,
    "mentioned_in": 20,
    "subject_entity": 25,
    "fact_subject_of": 25,
    "object_entity": 25,
    "fact_object_of": 25,
    "supports": 10,
    "supported_by": 10,
    "depends_on": 10,
    "dependency_of": 10,
}

EntityNames = tuple[str, tuple[str, ...]]  # (canonical name, aliases), normalised


Weight = Callable[[str], float]  # how telling a content word is (its IDF); 0: unknown


def _equal(_: str) -> float:
    return 1.0


def name_strength(name: str, descriptor: str, weight: Weight | None = None) -> float:
    """How fully the descriptor names ``name``, in [0, 1] (rule 1 of the module notes).

    1 when they are equal or the descriptor is part of the name (the reference's match of a
    descriptor that names an entity). When the name occurs, as whole words, inside a longer
    descriptor: the weight of the name's most telling content word over the summed weights
    of the descriptor's distinct content words (stop words dropped) — with every word
    weighing the same, ``1 / m`` for a descriptor of ``m`` content words. 0 otherwise.
    ``weight`` is the words' IDF in the store (words it has never seen weigh 0); equal
    weights when it is None, or when no word of the descriptor is known.
    """
    name, descriptor = name.strip().lower(), descriptor.strip().lower()
    if not name or not descriptor:
        return 0.0
    if name == descriptor or descriptor in name:
        return 1.0
    # Whole words, read by the text index's tokenizer: "platforms" names "platform",
    # "zurich" names "Zürich", "rapid" does not name "api".
    name_words, words = tokens(name), tokens(descriptor)
    width = len(name_words)
    if not width or not any(
        words[i : i + width] == name_words for i in range(len(words) - width + 1)
    ):
        return 0.0
    content, named = query_terms(descriptor), query_terms(name)
    if not content or not named:
        return 0.0
    weight = weight or _equal
    total = sum(weight(word) for word in content)
    if total <= 0:
        weight, total = _equal, float(len(content))
    return min(1.0, max(weight(word) for word in named) / total)


def _best(names: Iterable[str], descriptor: str, weight: Weight | None, skip: str = "") -> float:
    """The strongest match among ``names`` (those spelled like ``skip`` left out: rule 2)."""
    skip = skip.strip().lower()
    return max(
        (
            name_strength(n, descriptor, weight)
            for n in names
            if n.strip().lower() != skip or not skip
        ),
        default=0.0,
    )


def relation_boost(predicate: str, base: int) -> int:
    return base + PREDICATE_BOOSTS.get(predicate.strip().lower(), 0)


def entity_types(payload: EntityPayload) -> list[str]:
    """The primary type then the others, trimmed, blanks dropped, case-insensitively unique."""
    seen: set[str] = set()
    types = []
    for value in (payload.primary_type, *payload.types):
        value = value.strip()
        if value and value.lower() not in seen:
            seen.add(value.lower())
            types.append(value)
    return types


def root_boost(
    record: MemoryRecord,
    query: str,
    related: Callable[[str], EntityNames | None],
    weight: Weight | None = None,
) -> float:
    """How strongly a candidate is tied to what the descriptor names: the reference's points,
    each scaled by the strength of its match (``related`` gives the names of an entity the
    caller may read in full, by id; None otherwise; ``weight``: see :func:`name_strength`)."""
    boost = 0.0
    payload = record.payload
    if isinstance(payload, EntityPayload):
        canonical = payload.canonical_name
        boost += CANONICAL_BOOST * name_strength(canonical, query, weight)
        spellings = [a.value for a in payload.aliases]
        boost += ALIAS_BOOST * _best(spellings, query, weight, skip=canonical)
        boost += TYPE_BOOST * _best(entity_types(payload), query, weight)
    if record.interpretation is not None:
        for mention in record.interpretation.mentions:
            strength = name_strength(mention.surface, query, weight)
            if strength > 0:
                boost += MENTION_SURFACE_BOOST * strength
                break
            boost += MENTION_ALIAS_BOOST * _best(mention.aliases, query, weight)
    for relation in record.relations:
        names = related(relation.target_id)
        if names is None:
            continue
        canonical, aliases = names
        strength = name_strength(canonical, query, weight)
        boost += relation_boost(relation.predicate, RELATED_CANONICAL_BOOST) * strength
        strength = _best(aliases, query, weight, skip=canonical)
        boost += relation_boost(relation.predicate, RELATED_ALIAS_BOOST) * strength
    return boost


def rerank(scores: Sequence[float], boosts: Sequence[float]) -> list[int]:
    """Positions of candidates (given in rank order, with the scores they were ranked by) by
    ``score + boost / CANONICAL_BOOST``, best first; ties keep rank order."""
    total = [score + boost / CANONICAL_BOOST for score, boost in zip(scores, boosts, strict=True)]
    return sorted(range(len(total)), key=lambda i: -total[i])


def entity_roots(
    snapshot: Snapshot, descriptor: str, trust: TrustContext, filters: Filters, limit: int
) -> Candidates:
    """Entities named exactly by the descriptor that pass the filters; the ``limit`` most
    salient (ties: newer, then id)."""
    rows = [r for r in snapshot.views.entities.rows_named(descriptor) if r < snapshot.size]
    entity_only = Filters(
        types=frozenset({MemoryType.ENTITY}),
        min_salience=filters.min_salience,
        include_retracted=filters.include_retracted,
        valid_at=filters.valid_at,
        created_after=filters.created_after,
        created_before=filters.created_before,
    )
    found = admit(snapshot, np.asarray(rows, dtype=np.int64), trust, entity_only)
    table = snapshot.table

    def id_of(i: int) -> str:
        return table.ids[int(found.rows[i])]

    created = table.content["created_at"][found.rows]
    return found.take(order(found.salience, found.salience, created, id_of, limit))


def related_entities(
    snapshot: Snapshot, trust: TrustContext
) -> Callable[[str], EntityNames | None]:
    """Names of the entity a relation points at, if it existed then and the caller may read
    it in full (looked up once per id)."""
    cache: dict[str, EntityNames | None] = {}
    table, names = snapshot.table, snapshot.views.entities.names

    def lookup(record_id: str) -> EntityNames | None:
        if record_id in cache:
            return cache[record_id]
        found: EntityNames | None = None
        row = snapshot.row(record_id) if record_id else None
        if row is not None and table.content["type"][row] == TYPE_CODE[MemoryType.ENTITY]:
            full, _ = visibility(snapshot, np.array([row]), trust)
            if full[0]:
                found = names.get(row)
        cache[record_id] = found
        return found

    return lookup


def word_weights(snapshot: Snapshot) -> Weight:
    """Each content term's IDF (terms as :func:`~membrane_es.projections.tokens.query_terms`
    reads them) among the records that existed at the snapshot's moment (the same statistics
    and formula as the lexical evidence, so a read ``as_of`` T weighs words as a live read at
    T did); 0 for a term no record holds. Looked up once per term."""
    text, size = snapshot.views.text, snapshot.size
    documents, _ = text.corpus(size)
    cache: dict[str, float] = {}

    def weight(word: str) -> float:
        if word not in cache:
            frequency = sum(len(rows) for rows, _ in text.term_postings([word], size))
            cache[word] = (
                float(np.log1p((documents - frequency + 0.5) / (frequency + 0.5)))
                if frequency
                else 0.0
            )
        return cache[word]

    return weight

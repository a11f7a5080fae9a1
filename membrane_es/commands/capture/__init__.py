"""Capture (spec §2.4): raw content in; a primary record, entities, a fact and edges out.

The steps, as the reference runs them:

1. defaults: sensitivity ``low`` (the engine's configured default is *not* used), timestamp now;
2. a fallback interpretation built from the content's keys (summary, proposed type, labels,
   mentions of entities, references to records);
3. the engine's :class:`~membrane_es.commands.interpreter.Interpreter`, if any, merged over it;
4. a pool of up to 20 candidate records (scope, type, tag and term matches, recency);
5. the interpreter's ``resolve`` pass against that pool, if it has one;
6. one atomic write of everything below;
7. the primary record by ``source_kind`` (working for ``working_state``, episodic otherwise),
   the capture itself kept in an episodic record's ``environment.context`` — for a
   conversation turn (content with a ``speaker``) with the ids of the turns it was said
   after in the same sitting (:mod:`.conversation`);
8. the interpretation stored on the primary;
9. each mention resolved to an entity — by id, by the entity-term index, among the candidates
   — or a new entity created, and ``mentions_entity``/``mentioned_in`` written;
10. each reference resolved to a record (``references_record``/``referenced_by``);
11. each relation candidate with a resolvable target written with its inverse;
12. a semantic record derived from ``subject``/``predicate``/``object`` content
    (``derived_semantic``/``derived_from``, ``subject_entity``/``object_entity`` and inverses);
13. the interpretation ``resolved`` when nothing named is left unresolved, else ``tentative``.

Everything is first worked out in memory; then every new record is created with its final
content (relations included) and every pre-existing record it links to gets its relation
events, all saved in one :meth:`~membrane_es.commands.UnitOfWork.save`. If that write fails,
nothing of the capture exists.

Where the reference leaves order to Go's map iteration, this follows the content's key order,
so the same capture always gives the same result.

The package follows those steps: :mod:`.primary` (steps 1 and 7; :mod:`.conversation` for a
turn's earlier turns), :mod:`.interpretation`
(steps 2, 3 and 5), :mod:`.pool` (step 4), :mod:`.resolution` (steps 9–11),
:mod:`.semantic` (step 12) and :mod:`.handler`, which runs them and saves in one write
(steps 6, 8 and 13); :mod:`.common` holds the small helpers they share.
"""

from membrane_es.commands.capture.common import (
    INVERSE_PREDICATES,
    inverse_predicate,
    looks_like_entity_id,
    text_of,
    unique_labels,
)
from membrane_es.commands.capture.handler import capture_memory
from membrane_es.commands.capture.interpretation import (
    entity_type_of_kind,
    fallback_interpretation,
    fallback_mentions,
    fallback_references,
    infer_entity_kind,
    infer_proposed_type,
    merge_interpretation,
    summarize,
)
from membrane_es.commands.capture.pool import (
    candidate_pool,
    query_terms,
    record_search_terms,
    score_candidate,
    term_matches,
)
from membrane_es.commands.capture.primary import constraint_list, string_list
from membrane_es.commands.capture.semantic import semantic_fact

__all__ = [
    "INVERSE_PREDICATES",
    "candidate_pool",
    "capture_memory",
    "constraint_list",
    "entity_type_of_kind",
    "fallback_interpretation",
    "fallback_mentions",
    "fallback_references",
    "infer_entity_kind",
    "infer_proposed_type",
    "inverse_predicate",
    "looks_like_entity_id",
    "merge_interpretation",
    "query_terms",
    "record_search_terms",
    "score_candidate",
    "semantic_fact",
    "string_list",
    "summarize",
    "term_matches",
    "text_of",
    "unique_labels",
]

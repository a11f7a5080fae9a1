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
   the capture itself kept in an episodic record's ``environment.context``;
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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from membrane_es.aggregates.identity import new_record_id
from membrane_es.aggregates.memory_record import MemoryRecord
from membrane_es.commands.ingest import (
    EVENT,
    TOOL_OUTPUT,
    WORKING_STATE,
    check_sensitivity,
    check_tag_list,
    check_timestamp,
    create_ingested,
    event_record,
    json_value,
    plain_text,
    tool_output_record,
    working_record,
)
from membrane_es.commands.interpreter import InterpretationLike
from membrane_es.commands.messages import CaptureMemory
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.embedding.text import go_json, go_sprint
from membrane_es.errors import NotFoundError, ValidationError
from membrane_es.schema.capture import CaptureMemoryResult
from membrane_es.schema.enums import (
    DeletionPolicy,
    GraphPredicate,
    InterpretationStatus,
    MemoryType,
    Sensitivity,
    SourceKind,
    TaskState,
)
from membrane_es.schema.payloads import (
    CompetencePayload,
    Constraint,
    EntityAlias,
    EntityIdentifier,
    EntityPayload,
    EpisodicPayload,
    PlanGraphPayload,
    ProvenanceRef,
    SemanticPayload,
    Validity,
    WorkingPayload,
)
from membrane_es.schema.records import (
    DEFAULT_HALF_LIFE_SECONDS,
    DecayProfile,
    GraphEdge,
    Interpretation,
    Lifecycle,
    Mention,
    Provenance,
    ReferenceCandidate,
    Relation,
    RelationCandidate,
    copy_record,
)
from membrane_es.schema.records import MemoryRecord as RecordData
from membrane_es.schema.validation import MAX_TAG_BYTES, MAX_TAGS, validate_record

replace = msgspec.structs.replace

CAPTURE_SENSITIVITY = Sensitivity.LOW.value  # capture's own default (spec Appendix A.4)
POOL_LIST_LIMIT = 80  # records read per List call
POOL_SIZE = 20  # candidates kept after scoring
FALLBACK_EXTRACTION_CONFIDENCE = 0.25
FALLBACK_CANDIDATE_CONFIDENCE = 0.5
DERIVED_EXTRACTION_CONFIDENCE = 0.7  # a derived fact's confidence floor when none was given
DERIVED_MIN_SALIENCE = 0.9
DERIVE_THRESHOLD = 0.5  # extraction confidence that derives a fact from any source kind

SCOPE_BONUS = 100.0
ENTITY_BONUS = 15.0
TYPE_BONUS = 10.0
TAG_BONUS = 8.0
TERM_BONUS = 25.0

ENTITY_RATIONALE = "Created canonical entity during capture resolution"
SEMANTIC_RATIONALE = "Derived semantic record during capture interpretation"
ENTITY_NAMESPACE = "membrane"
DEFAULT_ENTITY_NAME = "entity"

MENTION_KEYS = frozenset({"subject", "tool_name", "project", "file"})
SUBJECT_KEYS = ("subject", "project", "tool_name", "file")
ENTITY_TYPE_OF_KIND = {
    "person": "Person",
    "tool": "Tool",
    "project": "Project",
    "file": "File",
    "concept": "Concept",
}
INVERSE_PREDICATES: dict[str, str] = {
    "mentions_entity": "mentioned_in",
    "mentioned_in": "mentions_entity",
    "references_record": "referenced_by",
    "referenced_by": "references_record",
    "derived_semantic": "derived_from",
    "derived_from": "derived_semantic",
    "subject_entity": "fact_subject_of",
    "fact_subject_of": "subject_entity",
    "object_entity": "fact_object_of",
    "fact_object_of": "object_entity",
    "uses": "used_by",
    "used_by": "uses",
    "depends_on": "dependency_of",
    "dependency_of": "depends_on",
    "caused_by": "causes",
    "causes": "caused_by",
    "supports": "supported_by",
    "supported_by": "supports",
    "contradicts": "contradicted_by",
    "contradicted_by": "contradicts",
}

_MEMORY_TYPES = ", ".join(t.value for t in MemoryType)
_TASK_STATES = frozenset(s.value for s in TaskState)


def capture_memory(cmd: CaptureMemory, uow: UnitOfWork) -> CaptureMemoryResult:
    """Run the whole capture; see the module documentation for the steps."""
    request = _validated(cmd, uow)
    primary, kind = _primary_draft(request)  # policy errors surface before any interpreter
    interpretation = fallback_interpretation(request)
    interpreter = uow.interpreter
    if interpreter is not None:
        offered = _ask(interpreter.interpret, request)
        interpretation = merge_interpretation(interpretation, offered)
    pool = candidate_pool(request, interpretation, uow)
    resolve = getattr(interpreter, "resolve", None)
    if callable(resolve):
        offered = _ask(resolve, request, _copy(interpretation), [copy_record(r) for r in pool])
        interpretation = merge_interpretation(interpretation, offered)
    capture = _Capture(request, interpretation, pool, primary, kind, uow)
    return capture.run()


# --- step 1: validation (spec §8.4, in its order) --------------------------------------------


def _validated(cmd: CaptureMemory, uow: UnitOfWork) -> CaptureMemory:
    """The request with every field checked and normalised: plain strings, JSON content,
    the sensitivity resolved and the timestamp a UTC datetime."""
    source = plain_text("source", cmd.source)
    source_kind = plain_text("source_kind", cmd.source_kind)
    reason = plain_text("reason_to_remember", cmd.reason_to_remember)
    summary = plain_text("summary", cmd.summary)
    scope = plain_text("scope", cmd.scope)
    tags = check_tag_list("tags", cmd.tags)
    sensitivity = check_sensitivity("sensitivity", cmd.sensitivity)
    proposed_type = plain_text("proposed_type", cmd.proposed_type or "")
    if proposed_type and proposed_type not in MemoryType.__members__.values():
        raise ValidationError("proposed_type", f"proposed_type must be one of: {_MEMORY_TYPES}")
    content = json_value("content", cmd.content)
    context = json_value("context", cmd.context)
    timestamp = check_timestamp(cmd.timestamp)
    return replace(
        cmd,
        source=source,
        source_kind=source_kind,
        reason_to_remember=reason,
        summary=summary,
        scope=scope,
        tags=tags,
        sensitivity=sensitivity or CAPTURE_SENSITIVITY,
        proposed_type=proposed_type,
        content=content,
        context=context,
        timestamp=uow.now() if timestamp is None else timestamp,
    )


def _timestamp(request: CaptureMemory) -> datetime:
    assert isinstance(request.timestamp, datetime)  # _validated made it one
    return request.timestamp


# --- step 2: the fallback interpretation -------------------------------------------------------


def fallback_interpretation(request: CaptureMemory) -> Interpretation:
    """What the content's own keys say, before any interpreter."""
    content, context = request.content, request.context
    return Interpretation(
        status=InterpretationStatus.TENTATIVE.value,
        summary=_first_non_blank(request.summary, request.reason_to_remember, summarize(content)),
        proposed_type=request.proposed_type or infer_proposed_type(request.source_kind),
        topical_labels=unique_labels(request.tags),
        mentions=fallback_mentions(content),
        reference_candidates=[*fallback_references(content), *fallback_references(context)],
        extraction_confidence=FALLBACK_EXTRACTION_CONFIDENCE,
    )


def summarize(content: Any) -> str:
    """A string as it is; anything else as Go's compact JSON ("" if it cannot be encoded)."""
    if isinstance(content, str):
        return content
    try:
        return go_json(content)
    except ValueError:
        return ""


def infer_proposed_type(source_kind: str) -> str:
    if source_kind == SourceKind.WORKING_STATE:
        return MemoryType.WORKING.value
    if source_kind == SourceKind.OBSERVATION:
        return MemoryType.SEMANTIC.value
    return MemoryType.EPISODIC.value


def infer_entity_kind(key: str) -> str:
    """The kind of entity a content key names (``tool_name`` → tool, ``file_path`` → file)."""
    key = key.lower()
    if "tool" in key:
        return "tool"
    if "project" in key:
        return "project"
    if "file" in key or "path" in key:
        return "file"
    if any(word in key for word in ("person", "user", "agent", "subject")):
        return "person"
    return "concept"


def entity_type_of_kind(kind: str) -> str:
    return ENTITY_TYPE_OF_KIND.get(kind.strip().lower(), "Other")


def fallback_mentions(content: Any) -> list[Mention]:
    """One mention per top-level key naming an entity (``*entity*``, ``subject``,
    ``tool_name``, ``project``, ``file``), in key order, unique by surface."""
    if not isinstance(content, dict):
        return []
    mentions: list[Mention] = []
    seen: set[str] = set()
    for key, value in content.items():
        if "entity" not in key and key not in MENTION_KEYS:
            continue
        surface = text_of(value).strip()
        if not surface or _norm(surface) in seen:
            continue
        seen.add(_norm(surface))
        mentions.append(
            Mention(
                surface=surface,
                entity_kind=infer_entity_kind(key),
                confidence=FALLBACK_CANDIDATE_CONFIDENCE,
            )
        )
    return mentions


def fallback_references(value: Any) -> list[ReferenceCandidate]:
    """One reference per top-level key that names a record (``*ref*``, ``*record_id*``,
    ``id``), in key order."""
    if not isinstance(value, dict):
        return []
    references = []
    for key, item in value.items():
        if "ref" not in key and "record_id" not in key and key != "id":
            continue
        ref = text_of(item).strip()
        if ref:
            references.append(ReferenceCandidate(ref=ref, confidence=FALLBACK_CANDIDATE_CONFIDENCE))
    return references


# --- steps 3 and 5: the interpreter --------------------------------------------------------------


def merge_interpretation(base: Interpretation, offered: Interpretation | None) -> Interpretation:
    """``offered`` over ``base``: non-empty fields win, labels are unioned, non-empty lists
    replace, a positive extraction confidence wins (at most 1)."""
    if offered is None:
        return base
    return Interpretation(
        status=offered.status if offered.status.strip() else base.status,
        summary=offered.summary if offered.summary.strip() else base.summary,
        proposed_type=(
            offered.proposed_type if offered.proposed_type.strip() else base.proposed_type
        ),
        topical_labels=unique_labels([*base.topical_labels, *offered.topical_labels]),
        mentions=offered.mentions or base.mentions,
        relation_candidates=offered.relation_candidates or base.relation_candidates,
        reference_candidates=offered.reference_candidates or base.reference_candidates,
        extraction_confidence=(
            min(1.0, offered.extraction_confidence)
            if offered.extraction_confidence > 0
            else base.extraction_confidence
        ),
    )


def _ask(method: Callable[..., InterpretationLike], *args: Any) -> Interpretation | None:
    """Call the interpreter; a failure, or an answer of the wrong shape, counts as no answer."""
    try:
        answer = method(*args)
        if answer is None:
            return None
        if isinstance(answer, Interpretation):
            return _copy(answer)
        return msgspec.convert(answer, Interpretation, strict=False)
    except Exception:  # the reference ignores interpreter errors (spec §2.4 step 3)
        return None


def _copy(interpretation: Interpretation) -> Interpretation:
    return msgspec.convert(msgspec.to_builtins(interpretation), Interpretation)


# --- step 4: the candidate pool --------------------------------------------------------------


def candidate_pool(
    request: CaptureMemory, interpretation: Interpretation, uow: UnitOfWork
) -> list[RecordData]:
    """The 20 records most likely to be what the capture names (spec §2.4 step 4)."""
    scope = request.scope
    listed = uow.candidate_pool(scope or None, POOL_LIST_LIMIT)
    if scope:
        listed += uow.candidate_pool(None, POOL_LIST_LIMIT)
    unique: dict[str, RecordData] = {}
    for record in listed:
        unique.setdefault(record.id, record)
    terms = query_terms(request, interpretation)
    now = uow.now()
    scored = [(score_candidate(r, request, interpretation, terms, now), r) for r in unique.values()]
    scored.sort(key=lambda item: (-item[0], -_created_seconds(item[1]), item[1].id))
    return [record for _, record in scored[:POOL_SIZE]]


def query_terms(request: CaptureMemory, interpretation: Interpretation) -> list[str]:
    """What the capture is about, normalised and unique: tags, the context's active entities,
    the content's subject, labels, mention surfaces and aliases, reference refs."""
    values: list[str] = list(request.tags)
    context, content = request.context, request.content
    if isinstance(context, dict) and isinstance(context.get("active_entities"), list):
        values += [v for v in context["active_entities"] if isinstance(v, str)]
    if isinstance(content, dict):
        values.append(_first_non_blank(*(text_of(content.get(k)) for k in SUBJECT_KEYS)))
    values += interpretation.topical_labels
    for mention in interpretation.mentions:
        values += [mention.surface, *mention.aliases]
    values += [reference.ref for reference in interpretation.reference_candidates]
    return list(dict.fromkeys(term for term in map(_norm, values) if term))


def score_candidate(
    record: RecordData,
    request: CaptureMemory,
    interpretation: Interpretation,
    terms: Sequence[str],
    now: datetime,
) -> float:
    score = 0.0
    if request.scope and record.scope == request.scope:
        score += SCOPE_BONUS
    if record.type is MemoryType.ENTITY:
        score += ENTITY_BONUS
    if interpretation.proposed_type and interpretation.proposed_type == record.type.value:
        score += TYPE_BONUS
    record_tags = {tag.lower() for tag in record.tags}
    score += TAG_BONUS * sum(1 for tag in request.tags if tag.lower() in record_tags)
    searchable = record_search_terms(record)
    score += TERM_BONUS * sum(1 for term in terms if term_matches(searchable, term))
    if record.created_at is not None:
        age_hours = max(0.0, (now - record.created_at).total_seconds() / 3600)
        score += 1 / (1 + age_hours / 24)
    return score


def term_matches(searchable: Iterable[str], term: str) -> bool:
    """A record term equals the query term, contains it, or is one of its words."""
    words = term.split()
    return any(value == term or term in value or value in words for value in searchable)


def record_search_terms(record: RecordData) -> list[str]:
    """The normalised strings a candidate is matched by."""
    values: list[str] = [record.id, record.scope, *record.tags]
    interpretation = record.interpretation
    if interpretation is not None:
        values += [interpretation.summary, *interpretation.topical_labels]
        for mention in interpretation.mentions:
            values += [mention.surface, *mention.aliases]
    payload = record.payload
    if isinstance(payload, EntityPayload):
        values += [payload.canonical_name, payload.primary_type, *payload.types]
        values += [alias.value for alias in payload.aliases]
        values.append(payload.summary)
    elif isinstance(payload, SemanticPayload):
        values += [payload.subject, payload.predicate, text_of(payload.object)]
    elif isinstance(payload, EpisodicPayload):
        for event in payload.timeline:
            values += [event.ref, event.event_kind, event.summary]
    elif isinstance(payload, WorkingPayload):
        values += [payload.thread_id, payload.context_summary]
        values += [*payload.next_actions, *payload.open_questions]
    elif isinstance(payload, CompetencePayload):
        values += [payload.skill_name, *payload.required_tools]
    elif isinstance(payload, PlanGraphPayload):
        values += [payload.plan_id, payload.intent]
    return [term for term in map(_norm, values) if term]


# --- step 7: the primary record ------------------------------------------------------------


def _primary_draft(request: CaptureMemory) -> tuple[RecordData, str]:
    """The primary record (without interpretation or relations) and its candidate kind.

    Times are stamped when it is created; policy errors (empty source, no thread id for
    working state, no tool name for a tool output) are raised here.
    """
    content, ts = request.content, _timestamp(request)
    fields = content if isinstance(content, dict) else {}
    common: dict[str, Any] = {
        "source": request.source,
        "timestamp": ts,
        "at": ts,
        "tags": request.tags,
        "scope": request.scope,
        "sensitivity": request.sensitivity,
    }
    capture_context = {
        "capture_content": content,
        "capture_context": request.context,
        "reason_to_remember": request.reason_to_remember,
    }
    if request.source_kind == SourceKind.WORKING_STATE:
        state = fields.get("state")
        record = working_record(
            thread_id=_first_non_blank(
                text_of(fields.get("thread_id")), text_of(fields.get("thread"))
            ),
            state=state if isinstance(state, str) and state in _TASK_STATES else "executing",
            next_actions=string_list(fields.get("next_actions")),
            open_questions=string_list(fields.get("open_questions")),
            context_summary=_first_non_blank(
                request.summary,
                request.reason_to_remember,
                _string_field(fields, "context_summary"),
                _string_field(fields, "summary"),
            ),
            active_constraints=constraint_list(fields.get("active_constraints")),
            **common,
        )
        return record, WORKING_STATE
    if request.source_kind == SourceKind.TOOL_OUTPUT:
        args = fields.get("args")
        record = tool_output_record(
            tool_name=_first_non_blank(
                text_of(fields.get("tool_name")), text_of(fields.get("tool"))
            ),
            args=args if isinstance(args, dict) else {},
            result=fields.get("result"),
            depends_on=string_list(fields.get("depends_on")),
            environment_context=capture_context,
            **common,
        )
        return record, TOOL_OUTPUT
    record = event_record(
        event_kind=request.source_kind or EVENT,
        ref=_first_non_blank(text_of(fields.get("ref")), text_of(fields.get("id")))
        or new_record_id(),
        summary=_first_non_blank(request.summary, request.reason_to_remember, summarize(content)),
        environment_context=capture_context,
        **common,
    )
    return record, EVENT


def string_list(value: Any) -> list[str]:
    """A list's items as strings (numbers too), trimmed, blanks dropped, unique ignoring case."""
    items = value if isinstance(value, list) else []
    texts = [text_of(item).strip() for item in items]
    return _unique_ignoring_case(text for text in texts if text)


def constraint_list(value: Any) -> list[Constraint]:
    """A list of objects as typed constraints; ``required`` only for a real ``true``."""
    if not isinstance(value, list):
        return []
    return [
        Constraint(
            type=text_of(item.get("type")),
            key=text_of(item.get("key")),
            value=item.get("value"),
            required=item.get("required") is True,
        )
        for item in value
        if isinstance(item, dict)
    ]


# --- steps 8–13 -----------------------------------------------------------------------------


@dataclass
class _Capture:
    """One capture worked out in memory, then written at once."""

    request: CaptureMemory
    interpretation: Interpretation
    pool: list[RecordData]
    primary: RecordData
    kind: str
    uow: UnitOfWork
    entities: list[RecordData] = field(default_factory=list)  # created here
    semantic: RecordData | None = None
    # outgoing relations of the records this capture creates, and of existing ones it touches
    relations: dict[str, list[Relation]] = field(default_factory=dict)
    edges: list[GraphEdge] = field(default_factory=list)
    _looked_up: dict[str, RecordData | None] = field(default_factory=dict)

    @property
    def ts(self) -> datetime:
        return _timestamp(self.request)

    @property
    def candidates(self) -> list[RecordData]:
        """The pool, then the primary, then the entities created so far."""
        return [*self.pool, self.primary, *self.entities]

    def run(self) -> CaptureMemoryResult:
        interpretation = self.interpretation
        for mention in interpretation.mentions:
            self.resolve_mention(mention)
        for reference in interpretation.reference_candidates:
            self.resolve_reference(reference)
        for candidate in interpretation.relation_candidates:
            self.resolve_relation(candidate)
        self.derive_semantic()
        interpretation.status = (
            InterpretationStatus.TENTATIVE.value
            if _unresolved(interpretation)
            else InterpretationStatus.RESOLVED.value
        )
        return self.write()

    # --- lookups ---------------------------------------------------------------------------

    def lookup(self, record_id: str) -> RecordData | None:
        """A record by id: among the candidates, else from the store; None if there is none."""
        if not record_id:
            return None
        for record in self.candidates:
            if record.id == record_id:
                return record
        if record_id not in self._looked_up:
            try:
                found: RecordData | None = self.uow.get(record_id).view(self.uow.now())
            except NotFoundError:
                found = None
            self._looked_up[record_id] = found
        return self._looked_up[record_id]

    # --- step 9: mentions -------------------------------------------------------------------

    def resolve_mention(self, mention: Mention) -> None:
        entity = self.find_entity(mention) or self.create_entity(mention)
        self.link(self.primary.id, GraphPredicate.MENTIONS_ENTITY, entity.id, 1.0)
        mention.canonical_entity_id = entity.id
        if not mention.confidence > 0:
            mention.confidence = 1.0

    def find_entity(self, mention: Mention) -> RecordData | None:
        if mention.canonical_entity_id:
            named = self.lookup(mention.canonical_entity_id)
            if named is not None and named.type is MemoryType.ENTITY:
                return named
        terms = list(dict.fromkeys(_norm(t) for t in (mention.surface, *mention.aliases)))
        terms = [term for term in terms if term]
        for term in terms:
            for found in self.uow.find_entities(term, self.request.scope, 1):
                if found.type is MemoryType.ENTITY:
                    return found
        for record in self.candidates:
            payload = record.payload
            if isinstance(payload, EntityPayload) and _entity_terms(payload) & set(terms):
                return record
        return None

    def create_entity(self, mention: Mention) -> RecordData:
        canonical = mention.surface.strip() or DEFAULT_ENTITY_NAME
        primary_type = entity_type_of_kind(mention.entity_kind)
        aliases = _unique_ignoring_case(
            a for a in (canonical, *(alias.strip() for alias in mention.aliases)) if a
        )
        payload = EntityPayload(
            canonical_name=canonical,
            primary_type=primary_type,
            types=[primary_type],
            aliases=[EntityAlias(value=alias) for alias in aliases],
            identifiers=[EntityIdentifier(namespace=ENTITY_NAMESPACE, value=new_record_id())],
            summary=canonical,
        )
        entity = self._derived_record(MemoryType.ENTITY, payload, confidence=1.0, salience=1.0)
        self.entities.append(entity)
        return entity

    # --- step 10: references -------------------------------------------------------------------

    def resolve_reference(self, reference: ReferenceCandidate) -> None:
        target = (
            self.lookup(reference.target_record_id)
            or self.lookup(reference.target_entity_id)
            or self.scan_for_ref(reference.ref)
        )
        if target is None:
            reference.resolved = False
            reference.target_record_id = reference.target_entity_id = ""
            return
        reference.resolved = True
        if target.id == self.primary.id:
            reference.target_record_id = target.id
            return
        if target.type is MemoryType.ENTITY:
            reference.target_entity_id = target.id
        else:
            reference.target_record_id = target.id
        if not reference.confidence > 0:
            reference.confidence = 1.0
        self.link(self.primary.id, GraphPredicate.REFERENCES_RECORD, target.id, 1.0)

    def scan_for_ref(self, ref: str) -> RecordData | None:
        """The first candidate whose id is ``ref`` or whose timeline has an event with it."""
        wanted = _norm(ref)
        if not wanted:
            return None
        for record in self.candidates:
            if _norm(record.id) == wanted:
                return record
            payload = record.payload
            if isinstance(payload, EpisodicPayload) and any(
                _norm(event.ref) == wanted for event in payload.timeline
            ):
                return record
        return None

    # --- step 11: relation candidates -------------------------------------------------------

    def resolve_relation(self, candidate: RelationCandidate) -> None:
        target = self.lookup(candidate.target_record_id) or self.lookup(candidate.target_entity_id)
        if target is None or target.id == self.primary.id:
            candidate.resolved = False
            candidate.target_record_id = candidate.target_entity_id = ""
            return
        predicate = candidate.predicate.strip().lower()
        if not predicate:
            candidate.resolved = False
            return
        if target.type is MemoryType.ENTITY:
            candidate.target_entity_id = target.id
        else:
            candidate.target_record_id = target.id
        candidate.resolved = True
        confidence = candidate.confidence if candidate.confidence > 0 else 1.0
        candidate.confidence = _clamp01(confidence)
        self.link(self.primary.id, predicate, target.id, candidate.confidence or 1.0)

    # --- step 12: the derived semantic record ---------------------------------------------

    def derive_semantic(self) -> None:
        request, interpretation = self.request, self.interpretation
        fact = semantic_fact(request.content)
        if fact is None:
            return
        if (
            request.source_kind != SourceKind.OBSERVATION
            and interpretation.proposed_type != MemoryType.SEMANTIC
            and not interpretation.extraction_confidence >= DERIVE_THRESHOLD
        ):
            return
        subject_text, predicate, obj = fact
        subject = self.canonical_id(subject_text) or subject_text
        if isinstance(obj, str):
            obj = self.canonical_id(obj) or obj
        offered = interpretation.extraction_confidence
        extraction = offered if offered > 0 else DERIVED_EXTRACTION_CONFIDENCE
        mentions = [
            Mention(
                surface=text,
                entity_kind=self.mention_kind(value),
                canonical_entity_id=value,
                confidence=1.0,
            )
            for text, value in ((subject_text, subject), (fact[2], obj))
            if isinstance(value, str) and looks_like_entity_id(value)
        ]
        payload = SemanticPayload(
            subject=subject,
            predicate=predicate,
            object=obj,
            validity=Validity(mode="global"),
            evidence=[
                ProvenanceRef(
                    source_type=self.primary.type.value,
                    source_id=self.primary.id,
                    timestamp=self.ts,
                )
            ],
        )
        semantic = self._derived_record(
            MemoryType.SEMANTIC,
            payload,
            confidence=_clamp01(max(self.primary.confidence, extraction)),
            salience=max(self.primary.salience, DERIVED_MIN_SALIENCE),
        )
        self.semantic = replace(
            semantic,
            tags=_fitting_tags([*request.tags, *interpretation.topical_labels]),
            interpretation=Interpretation(
                status=InterpretationStatus.RESOLVED.value,
                summary=interpretation.summary,
                proposed_type=MemoryType.SEMANTIC.value,
                topical_labels=list(interpretation.topical_labels),
                mentions=mentions,
                extraction_confidence=_clamp01(extraction),
            ),
        )
        self.link(self.primary.id, GraphPredicate.DERIVED_SEMANTIC, semantic.id, 1.0)
        for value, predicate_name in (
            (subject, GraphPredicate.SUBJECT_ENTITY),
            (obj, GraphPredicate.OBJECT_ENTITY),
        ):
            if isinstance(value, str) and looks_like_entity_id(value):
                entity = self.lookup(value)
                if entity is not None and entity.type is MemoryType.ENTITY:
                    self.link(semantic.id, predicate_name, entity.id, 1.0)

    def canonical_id(self, text: str) -> str:
        """The canonical entity id of the mention whose surface or alias ``text`` is."""
        wanted = _norm(text)
        for mention in self.interpretation.mentions:
            names = {_norm(mention.surface), *map(_norm, mention.aliases)}
            if mention.canonical_entity_id and wanted in names:
                return mention.canonical_entity_id
        return ""

    def mention_kind(self, entity_id: str) -> str:
        for mention in self.interpretation.mentions:
            if mention.canonical_entity_id == entity_id:
                return mention.entity_kind
        return ""

    # --- building -------------------------------------------------------------------------

    def _derived_record(
        self, memory_type: MemoryType, payload: Any, *, confidence: float, salience: float
    ) -> RecordData:
        """A record as the reference's ``NewMemoryRecord`` makes it, dated by the capture."""
        request = self.request
        return RecordData(
            id=new_record_id(),
            type=memory_type,
            sensitivity=Sensitivity(request.sensitivity),
            confidence=confidence,
            salience=salience,
            scope=request.scope,
            created_at=self.ts,
            updated_at=self.ts,
            lifecycle=Lifecycle(
                decay=DecayProfile(half_life_seconds=DEFAULT_HALF_LIFE_SECONDS),
                deletion_policy=DeletionPolicy.AUTO_PRUNE,
            ),
            provenance=Provenance(created_by=request.source),
            payload=payload,
        )

    def link(self, source_id: str, predicate: str, target_id: str, weight: float) -> None:
        """Write ``source -predicate-> target`` and its inverse back (once each)."""
        predicate = str(predicate)
        for edge_source, edge_predicate, edge_target in (
            (source_id, predicate, target_id),
            (target_id, inverse_predicate(predicate), source_id),
        ):
            outgoing = self.relations.setdefault(edge_source, [])
            if any(r.predicate == edge_predicate and r.target_id == edge_target for r in outgoing):
                continue
            relation = Relation(
                predicate=edge_predicate, target_id=edge_target, weight=weight, created_at=self.ts
            )
            outgoing.append(relation)
            self.edges.append(
                GraphEdge(
                    source_id=edge_source,
                    predicate=edge_predicate,
                    target_id=edge_target,
                    weight=weight,
                    created_at=self.ts,
                )
            )

    # --- step 6: one write --------------------------------------------------------------------

    def write(self) -> CaptureMemoryResult:
        """Create every new record with its final content, add the relations of existing
        records, and save all of it in one write."""
        uow, source = self.uow, self.request.source
        at = uow.now()
        lifecycle = replace(self.primary.lifecycle, last_reinforced_at=at)
        primary = replace(
            self.primary,
            created_at=at,
            updated_at=at,
            lifecycle=lifecycle,
            relations=self.relations.get(self.primary.id, []),
            interpretation=self.interpretation,
        )
        created = [create_ingested(primary, self.kind, source, uow)]
        new_ids = {primary.id}
        for draft, rationale in (
            *((entity, ENTITY_RATIONALE) for entity in self.entities),
            *(((self.semantic, SEMANTIC_RATIONALE),) if self.semantic is not None else ()),
        ):
            at = uow.now()
            record = replace(
                draft,
                lifecycle=replace(draft.lifecycle, last_reinforced_at=at),
                relations=self.relations.get(draft.id, []),
            )
            validate_record(record)
            created.append(
                MemoryRecord.create(
                    record, actor=source, rationale=rationale, at=at, embedding=uow.embed(record)
                )
            )
            new_ids.add(record.id)
        touched = []
        for record_id, relations in self.relations.items():
            if record_id in new_ids:
                continue
            aggregate = uow.get(record_id)
            for relation in relations:
                aggregate.add_relation(
                    relation,
                    actor=source,
                    rationale=f"linked by capture {primary.id}",
                    at=uow.now(),
                )
            touched.append(aggregate)
        uow.save(*created, *touched)
        now = uow.now()
        views = [copy_record(aggregate.view(now)) for aggregate in created]
        return CaptureMemoryResult(
            primary_record=views[0], created_records=views[1:], edges=list(self.edges)
        )


def semantic_fact(content: Any) -> tuple[str, str, Any] | None:
    """(subject, predicate, object) of content (or its non-empty ``fact`` object) that has a
    non-blank subject and predicate and an ``object`` key; None otherwise."""
    if not isinstance(content, dict):
        return None
    nested = content.get("fact")
    fact = nested if isinstance(nested, dict) and nested else content
    subject = text_of(fact.get("subject")).strip()
    predicate = text_of(fact.get("predicate")).strip()
    if not subject or not predicate or "object" not in fact:
        return None
    return subject, predicate, fact["object"]


def looks_like_entity_id(value: str) -> bool:
    return value.startswith("entity-") or value.count("-") >= 4


def inverse_predicate(predicate: str) -> str:
    """The predicate of the edge back (spec §1.6); ``inverse_of_<p>`` for any other."""
    normalised = predicate.strip().lower()
    return INVERSE_PREDICATES.get(normalised, f"inverse_of_{normalised}")


def _unresolved(interpretation: Interpretation) -> bool:
    return (
        any(m.surface.strip() and not m.canonical_entity_id for m in interpretation.mentions)
        or any(r.ref.strip() and not r.resolved for r in interpretation.reference_candidates)
        or any(c.predicate.strip() and not c.resolved for c in interpretation.relation_candidates)
    )


# --- small helpers -----------------------------------------------------------------------------


def text_of(value: Any) -> str:
    """A JSON value's string form: a string as is, nothing as "", anything else as Go prints
    it (``fmt.Sprint``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return go_sprint(value)


def unique_labels(values: Iterable[str]) -> list[str]:
    """Trimmed, blanks dropped, unique ignoring case (the first spelling kept)."""
    return _unique_ignoring_case(v.strip() for v in values if isinstance(v, str) and v.strip())


def _unique_ignoring_case(values: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    unique = []
    for value in values:
        key = value.lower()
        if key not in seen:
            seen.add(key)
            unique.append(value)
    return unique


def _fitting_tags(values: Iterable[str]) -> list[str]:
    """Tags for a derived record: unique ignoring case, within the record limits."""
    fitting = [t for t in unique_labels(values) if len(t.encode()) <= MAX_TAG_BYTES]
    return fitting[:MAX_TAGS]


def _first_non_blank(*values: str) -> str:
    for value in values:
        if value.strip():
            return value.strip()
    return ""


def _string_field(fields: dict[str, Any], key: str) -> str:
    value = fields.get(key)
    return value if isinstance(value, str) else ""


def _norm(value: str) -> str:
    return value.strip().lower()


def _entity_terms(payload: EntityPayload) -> set[str]:
    terms = {_norm(payload.canonical_name), *(_norm(a.value) for a in payload.aliases)}
    terms.discard("")
    return terms


def _clamp01(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


def _created_seconds(record: RecordData) -> float:
    return record.created_at.timestamp() if record.created_at is not None else -math.inf

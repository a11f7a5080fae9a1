"""Capture (spec §2.4): the handler that runs every step in order and saves in one write."""

from __future__ import annotations

from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.commands.builders import (
    create_ingested,
)
from membrane_es.commands.capture.common import (
    _timestamp,
    replace,
)
from membrane_es.commands.capture.conversation import with_conversation
from membrane_es.commands.capture.interpretation import (
    _ask,
    _copy,
    _unresolved,
    fallback_interpretation,
    merge_interpretation,
)
from membrane_es.commands.capture.pool import (
    candidate_pool,
)
from membrane_es.commands.capture.primary import (
    _primary_draft,
    _validated,
)
from membrane_es.commands.capture.resolution import (
    _Capture,
)
from membrane_es.commands.capture.semantic import (
    derive_semantic,
)
from membrane_es.commands.messages import CaptureMemory
from membrane_es.commands.resolution import (
    REINFORCED,
    corroborate,
    marked,
    settle,
    with_supersedes,
)
from membrane_es.commands.unit_of_work import UnitOfWork
from membrane_es.schema.capture import CaptureMemoryResult
from membrane_es.schema.enums import (
    InterpretationStatus,
    ProvenanceKind,
)
from membrane_es.schema.records import (
    ProvenanceSource,
    copy_record,
)
from membrane_es.schema.validation import validate_record

ENTITY_RATIONALE = "Created canonical entity during capture resolution"
SEMANTIC_RATIONALE = "Derived semantic record during capture interpretation"


def capture_memory(cmd: CaptureMemory, uow: UnitOfWork) -> CaptureMemoryResult:
    """Run the whole capture; see the package documentation for the steps."""
    request = _validated(cmd, uow)
    primary, kind = _primary_draft(request)  # policy errors surface before any interpreter
    primary = with_conversation(primary, request, uow)
    interpretation = fallback_interpretation(request)
    interpreter = uow.interpreter
    if interpreter is not None:
        offered = _ask(interpreter.interpret, request)
        interpretation = merge_interpretation(interpretation, offered)
    resolve = getattr(interpreter, "resolve", None)
    if callable(resolve):
        pool = candidate_pool(request, interpretation, uow)
        offered = _ask(resolve, request, _copy(interpretation), [copy_record(r) for r in pool])
        interpretation = merge_interpretation(interpretation, offered)
        capture = _Capture(request, interpretation, lambda: pool, primary, kind, uow)
    else:
        # The pool is ranked by the interpretation as it stands now (steps 9-11 fill in what
        # they resolve): a copy, so the pool is the same whenever it is listed.
        asked = _copy(interpretation)
        capture = _Capture(
            request, interpretation, lambda: candidate_pool(request, asked, uow), primary, kind, uow
        )
    for mention in interpretation.mentions:  # step 9
        capture.resolve_mention(mention)
    for reference in interpretation.reference_candidates:  # step 10
        capture.resolve_reference(reference)
    for candidate in interpretation.relation_candidates:  # step 11
        capture.resolve_relation(candidate)
    derive_semantic(capture)  # step 12
    interpretation.status = (  # step 13
        InterpretationStatus.TENTATIVE.value
        if _unresolved(interpretation)
        else InterpretationStatus.RESOLVED.value
    )
    return write(capture)


# --- step 6: one write --------------------------------------------------------------------


def write(capture: _Capture) -> CaptureMemoryResult:
    """Create every new record with its final content, add the relations of existing
    records, and save all of it in one write."""
    uow, source = capture.uow, capture.request.source
    at = uow.now()
    request = capture.request
    happened = _timestamp(request)
    lifecycle = replace(
        capture.primary.lifecycle,
        last_reinforced_at=min(happened, at),  # it fades from when it happened
        decay=capture.primary.lifecycle.decay if request.decay is None else request.decay,
        pinned=request.pinned,
    )
    primary = replace(
        capture.primary,
        created_at=happened,  # event time; the log keeps when it was written
        updated_at=at,
        lifecycle=lifecycle,
        relations=capture.relations.get(capture.primary.id, []),
        interpretation=capture.interpretation,
    )
    created = [create_ingested(primary, capture.kind, source, uow)]
    new_ids = {primary.id}
    decision = capture.decision
    semantic_id = capture.semantic.id if capture.semantic is not None else ""
    settled: list[RecordAggregate] = []
    for draft, rationale in (
        *((entity, ENTITY_RATIONALE) for entity in capture.entities),
        *(((capture.semantic, SEMANTIC_RATIONALE),) if capture.semantic is not None else ()),
    ):
        at = uow.now()
        record = replace(
            draft,
            lifecycle=replace(draft.lifecycle, last_reinforced_at=at),
            relations=capture.relations.get(draft.id, []),
        )
        if record.id == semantic_id and decision is not None:
            record = with_supersedes(record, decision, at)
        validate_record(record)
        aggregate = RecordAggregate.create(
            record, actor=source, rationale=rationale, at=at, embedding=uow.embed(record)
        )
        created.append(aggregate)
        if record.id == semantic_id and decision is not None:
            settled.extend(settle(uow, decision, aggregate, source))
        new_ids.add(record.id)
    touched: list[RecordAggregate] = []
    reinforced: list[RecordAggregate] = []
    if decision is not None and decision.outcome == REINFORCED:
        restated = ProvenanceSource(
            kind=ProvenanceKind.EVENT, ref=primary.id, created_by=source, timestamp=happened
        )
        reinforced.append(corroborate(uow, decision, restated, source))
    for record_id, relations in capture.relations.items():
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
    changed = {a.record_id: a for a in (*touched, *reinforced, *settled)}
    uow.save(*created, *changed.values())
    now = uow.now()
    views = [
        marked(
            copy_record(aggregate.view(now)),
            decision if aggregate.record_id == semantic_id else None,
        )
        for aggregate in created
    ]
    return CaptureMemoryResult(
        primary_record=views[0],
        created_records=views[1:],
        edges=list(capture.edges),
        resolved_records=[marked(copy_record(a.view(now)), decision) for a in reinforced],
    )

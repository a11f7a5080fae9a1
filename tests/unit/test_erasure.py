"""Erasure (``Membrane.forget``): the content goes for good, every read shows the record
redacted — now, as of any earlier moment, in its history — the views let go of its text,
vector and entity names, what was derived from it alone goes with it, and the log only grows."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from membrane_es import (
    ErasureUnsupportedError,
    ForgottenError,
    Membrane,
    MembraneError,
    NotFoundError,
    ValidationError,
)
from membrane_es.aggregates import RecordAggregate
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections.read_model import ReadModel
from membrane_es.schema import AuditAction
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import FULL_TRUST, entity, episodic, log_size, read, semantic
from tests.unit.conftest import ManualTime
from tests.views_support import assert_same_views

SECRET = "Zanzibarquux"


@pytest.fixture
def embedded(clock: MonotonicClock) -> Iterator[Membrane]:
    engine = Membrane.in_memory(clock=clock, embedder=HashingEmbedder())
    yield engine
    engine.close()


def _secret_fact(memory: Membrane) -> str:
    record = memory.create_record(
        semantic(SECRET, "lives_in", "Lisbon", tags=["person"]), rationale=f"{SECRET} told us"
    )
    return record.id


def _mentions_secret(value: object) -> bool:
    return SECRET.lower() in repr(value).lower()


def test_forget_redacts_every_read_now_before_and_in_history(
    memory: Membrane, time: ManualTime
) -> None:
    record_id = _secret_fact(memory)
    before = time.advance(hours=1)
    memory.reinforce(record_id, "agent", "useful")
    time.advance(hours=1)

    assert memory.forget(record_id, "dpo", "erasure request 42") == [record_id]

    now = read(memory, record_id)
    then = memory.retrieve_by_id(record_id, trust=FULL_TRUST, as_of=before)
    history = memory.history(record_id, trust=FULL_TRUST)
    for shown in (now, then, history):
        assert not _mentions_secret(shown)
    assert now.payload is None and now.tags == [] and then.payload is None
    assert (now.type, now.scope, now.salience) == (then.type, "", 0.0)
    assert [entry.event for entry in history] == ["Created", "Reinforced", "Forgotten"]
    last = history[-1]
    assert (last.action, last.actor, last.rationale) == (
        "delete",
        "dpo",
        "forgotten: erasure request 42",
    )
    assert [(e.action, e.actor) for e in now.audit_log][-1] == (AuditAction.DELETE, "dpo")


def test_forgotten_records_leave_retrieval_and_the_views(embedded: Membrane) -> None:
    record_id = _secret_fact(embedded)
    kept = embedded.create_record(entity("Lisbon")).id
    assert [r.id for r in embedded.retrieve(SECRET, trust=FULL_TRUST).records][0] == record_id
    views = embedded.views
    row = views.table.row_of_key[embedded.application.load(record_id).id]
    assert views.text.lengths(np.array([row]))[0] > 0

    embedded.forget(record_id, "dpo", "erasure request")

    views = embedded.views
    found = embedded.retrieve(SECRET, trust=FULL_TRUST, include_retracted=True).records
    assert all(not _mentions_secret(r.payload) for r in found)
    assert record_id not in [r.id for r in embedded.retrieve(SECRET, trust=FULL_TRUST).records]
    assert views.text.lengths(np.array([row]))[0] == -1
    assert not views.text.search(SECRET)[0].size
    block_rows = {int(r) for b in views.embeddings.blocks.values() for r in b.rows}
    assert row in block_rows  # the row keeps its place, with a zero vector
    for block in views.embeddings.blocks.values():
        positions = np.flatnonzero(block.rows == row)
        if positions.size:
            assert not block.matrix[positions[0]].any()
    assert views.entities.rows_named("lisbon")  # an entity of its own stays
    assert read(embedded, kept).payload is not None
    assert_same_views(views, ReadModel.rebuild(embedded.application))


def test_an_entity_forgotten_leaves_the_entity_names(memory: Membrane) -> None:
    person = memory.create_record(entity(SECRET)).id
    assert memory.views.entities.rows_named(SECRET)

    memory.forget(person, "dpo", "erasure request")

    assert memory.views.entities.rows_named(SECRET) == []
    assert_same_views(memory.views, ReadModel.rebuild(memory.application))


def test_capture_derived_records_of_that_capture_alone_go_with_it(memory: Membrane) -> None:
    fact = {"subject": SECRET, "predicate": "deploy_target_for", "object": "staging"}
    captured = memory.capture_memory(fact, source_kind="observation")
    primary = captured.primary_record.id
    person, derived = (r.id for r in captured.created_records)
    other = memory.create_record(semantic("api", "runs_on", "port 8080")).id
    before = log_size(memory)

    forgotten = memory.forget(primary, "dpo", "erasure request")

    assert forgotten[0] == primary and set(forgotten) == {primary, person, derived}
    assert log_size(memory) == before + 3  # one Forgotten event each, in one write
    for record_id in forgotten:
        assert not _mentions_secret(read(memory, record_id).payload)
        history = memory.history(record_id, trust=FULL_TRUST)
        assert history[-1].event == "Forgotten"
    cascade = memory.history(derived, trust=FULL_TRUST)[-1]
    assert cascade.rationale == f"forgotten with {primary}: erasure request"
    assert read(memory, other).payload is not None
    assert memory.views.entities.rows_named(SECRET) == []


def test_an_entity_another_capture_mentions_is_kept(memory: Membrane) -> None:
    event = {"ref": "evt-1", "text": "Remember Orchid", "project": "Orchid"}
    first = memory.capture_memory(event, source_kind="event")
    second = memory.capture_memory({**event, "ref": "evt-2"}, source_kind="event")
    (project,) = first.created_records

    assert memory.forget(first.primary_record.id, "dpo", "erasure request") == [
        first.primary_record.id
    ]

    assert read(memory, project.id).payload is not None
    assert read(memory, second.primary_record.id).payload is not None


def _episode(memory: Membrane, event_kind: str, summary: str) -> str:
    """A successful episode with one timeline event: consolidation derives the fact
    ``<event_kind> observed_in <summary>`` from it."""
    payload = {
        "kind": "episodic",
        "timeline": [{"event_kind": event_kind, "summary": summary}],
        "outcome": "success",
    }
    return memory.create_record({"type": "episodic", "payload": payload}).id


def _facts(memory: Membrane) -> dict[str, set[str]]:
    """Every semantic record's id, with the records it is derived from."""
    found = memory.retrieve(trust=FULL_TRUST, memory_types=["semantic"]).records
    return {
        r.id: {e.target_id for e in r.relations if e.predicate == "derived_from"} for r in found
    }


def test_consolidation_derived_records_of_that_episode_alone_go_with_it(
    memory: Membrane,
) -> None:
    alone = _episode(memory, "latency_check", f"{SECRET} p95 latency 180ms")
    first, second = (_episode(memory, "deploy", "deployed service") for _ in range(2))
    memory.consolidate()
    facts = _facts(memory)
    (derived,) = (f for f, sources in facts.items() if sources == {alone})
    (shared,) = (f for f, sources in facts.items() if sources == {first, second})
    before = log_size(memory)

    assert memory.forget(alone, "dpo", "erasure request") == [alone, derived]

    assert log_size(memory) == before + 2  # one Forgotten event each, in the log
    for record_id in (alone, derived):
        assert not _mentions_secret(read(memory, record_id).payload)
        assert memory.history(record_id, trust=FULL_TRUST)[-1].event == "Forgotten"
    cascade = memory.history(derived, trust=FULL_TRUST)[-1]
    assert cascade.rationale == f"forgotten with {alone}: erasure request"
    assert not memory.views.text.search(SECRET)[0].size  # neither text is searchable
    # A fact another episode still supports stays.
    assert memory.forget(first, "dpo", "erasure request") == [first]
    assert read(memory, shared).payload is not None


def test_a_forgotten_record_can_be_neither_changed_nor_forgotten_again(memory: Membrane) -> None:
    record_id = _secret_fact(memory)
    memory.forget(record_id, "dpo", "erasure request")
    before = log_size(memory)

    with pytest.raises(ForgottenError, match=record_id):
        memory.forget(record_id, "dpo", "again")
    with pytest.raises(ForgottenError):
        memory.reinforce(record_id, "agent", "useful")
    with pytest.raises(ForgottenError):
        memory.supersede(record_id, semantic("x", "y", "z", evidence=True), "agent", "newer")
    assert log_size(memory) == before


def test_episodic_records_can_be_forgotten(memory: Membrane) -> None:
    record_id = memory.create_record(episodic(f"met {SECRET}")).id

    memory.forget(record_id, "dpo", "erasure request")

    assert read(memory, record_id).payload is None


@pytest.mark.parametrize(
    ("record_id", "actor", "rationale", "field"),
    [("", "dpo", "why", "id"), ("x", "", "why", "actor"), ("x", "dpo", "", "rationale")],
)
def test_bad_input_names_the_field_and_writes_nothing(
    memory: Membrane, record_id: str, actor: str, rationale: str, field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        memory.forget(record_id, actor, rationale)
    assert raised.value.field == field
    assert log_size(memory) == 0


def test_unknown_record_and_batches_are_refused(memory: Membrane) -> None:
    with pytest.raises(NotFoundError):
        memory.forget("nope", "dpo", "erasure request")
    record_id = _secret_fact(memory)
    before = log_size(memory)
    with pytest.raises(MembraneError, match="batch"), memory.batch():
        memory.forget(record_id, "dpo", "erasure request")
    assert log_size(memory) == before
    assert _mentions_secret(read(memory, record_id).payload)


def test_records_written_before_per_record_keys_still_read_and_refuse_erasure(
    memory: Membrane,
) -> None:
    mapper = memory.application.mapper
    sealer, mapper.sealer = mapper.sealer, None  # type: ignore[attr-defined]
    try:
        old = memory.create_record(semantic(SECRET, "lives_in", "Lisbon")).id
    finally:
        mapper.sealer = sealer  # type: ignore[attr-defined]
    memory.application.cache.clear()
    before = log_size(memory)

    assert _mentions_secret(read(memory, old).payload)
    with pytest.raises(ErasureUnsupportedError, match="before per-record keys"):
        memory.forget(old, "dpo", "erasure request")
    assert log_size(memory) == before
    assert _mentions_secret(read(memory, old).payload)


def test_the_log_holds_the_content_sealed(memory: Membrane) -> None:
    record_id = _secret_fact(memory)
    app = memory.application
    stored = app.recorder.select_events(app.load(record_id).id, limit=1)[0]

    assert SECRET.encode() not in stored.state
    assert app.content_key(record_id) is not None


def test_a_key_lost_without_a_forgotten_event_reads_redacted(memory: Membrane) -> None:
    """What a forget cut short by an earlier release (it destroyed the key before it saved
    the events) leaves: the content is gone all the same, and forgetting again completes the
    record of it (tests/faults/test_interrupted_forget.py cuts today's forget short)."""
    record_id = _secret_fact(memory)
    app = memory.application
    key_id = app.content_key(record_id)
    assert key_id is not None
    app.keys.destroy([key_id])
    app.cache.clear()

    assert read(memory, record_id).payload is None
    assert memory.forget(record_id, "dpo", "erasure request") == [record_id]
    assert memory.history(record_id, trust=FULL_TRUST)[-1].event == "Forgotten"


def test_in_memory_forget_equals_a_replay(memory: Membrane) -> None:
    """The aggregate forgetting in memory reads the same as one replayed once the key is gone."""
    record_id = _secret_fact(memory)
    memory.forget(record_id, "dpo", "erasure request")
    live = read(memory, record_id)
    memory.application.cache.clear()
    replayed = read(memory, record_id)

    assert live == replayed
    assert isinstance(memory.application.load(record_id), RecordAggregate)


@pytest.mark.parametrize("value", [3.4028236e38, -(2**130)])
def test_a_given_vector_beyond_float32_is_refused(memory: Membrane, value: float) -> None:
    """Vectors are stored as float32 (sealed with the content): a value that would overflow
    to infinity is bad input naming the field, and nothing is written."""
    with pytest.raises(ValidationError) as raised:
        memory.create_record(semantic(), embedding=[value, 1.0])
    assert raised.value.field == "embedding"
    assert log_size(memory) == 0


def test_snapshotting_is_refused_it_would_keep_content_unsealed() -> None:
    with pytest.raises(MembraneError, match="snapshot"):
        Membrane.in_memory(env={"IS_SNAPSHOTTING_ENABLED": "y"})


def test_retrieval_as_of_before_the_erasure_shows_no_content(
    embedded: Membrane, time: ManualTime
) -> None:
    record_id = _secret_fact(embedded)
    before = time.advance(hours=1)
    found = embedded.retrieve(SECRET, trust=FULL_TRUST, as_of=before).records
    assert _mentions_secret([r.payload for r in found if r.id == record_id])

    embedded.forget(record_id, "dpo", "erasure request")

    for query in (embedded.retrieve, embedded.retrieve_graph):
        answer = query(SECRET, trust=FULL_TRUST, as_of=before)
        assert not _mentions_secret(answer)

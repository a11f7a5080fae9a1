"""Input validation: every limit and rule rejects bad input before anything is written.

Each test gives a store, writes something invalid, and checks the error names the field and
that the event log is exactly as long as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from membrane_es import (
    EntityPayload,
    Membrane,
    MemoryRecord,
    MemoryType,
    NotFoundError,
    SemanticPayload,
    ValidationError,
    WorkingPayload,
)
from membrane_es.schema import validation
from membrane_es.schema.validation import (
    MAX_IDS,
    MAX_PAYLOAD_BYTES,
    MAX_STRING_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS,
)
from tests.unit.builders import episodic, log_size, read, semantic, working

TOO_LONG = "x" * (MAX_STRING_BYTES + 1)
NON_FINITE = [math.nan, math.inf, -math.inf]


@contextmanager
def rejected(
    memory: Membrane, *, field: str | None = None, match: str | None = None
) -> Iterator[pytest.ExceptionInfo[ValidationError]]:
    """Expect a ValidationError (on ``field``, mentioning ``match``) and no new events."""
    before = log_size(memory)
    with pytest.raises(ValidationError, match=match) as info:
        yield info
    if field is not None:
        assert info.value.field == field
    assert log_size(memory) == before


@pytest.fixture
def fact_id(memory: Membrane) -> str:
    return memory.create_record(semantic()).id


# --- strings ----------------------------------------------------------------------------------

WRITES_WITH_ACTOR: dict[str, Callable[[Membrane, str, str, str], Any]] = {
    "create": lambda m, rid, actor, why: m.create_record(semantic(), actor=actor, rationale=why),
    "supersede": lambda m, rid, actor, why: m.supersede(rid, working(), actor, why),
    "fork": lambda m, rid, actor, why: m.fork(rid, working(), actor, why),
    "merge": lambda m, rid, actor, why: m.merge([rid], working(), actor, why),
    "retract": lambda m, rid, actor, why: m.retract(rid, actor, why),
    "contest": lambda m, rid, actor, why: m.contest(rid, "", actor, why),
    "reinforce": lambda m, rid, actor, why: m.reinforce(rid, actor, why),
    "penalize": lambda m, rid, actor, why: m.penalize(rid, 0.1, actor, why),
    "pin": lambda m, rid, actor, why: m.pin(rid, actor=actor, rationale=why),
}


@pytest.mark.parametrize("write", sorted(WRITES_WITH_ACTOR))
def test_actor_over_100000_bytes_is_rejected(memory: Membrane, fact_id: str, write: str) -> None:
    with rejected(memory, field="actor", match="exceeds maximum length of 100000"):
        WRITES_WITH_ACTOR[write](memory, fact_id, TOO_LONG, "why")


@pytest.mark.parametrize("write", sorted(WRITES_WITH_ACTOR))
def test_rationale_over_100000_bytes_is_rejected(
    memory: Membrane, fact_id: str, write: str
) -> None:
    with rejected(memory, field="rationale", match="exceeds maximum length of 100000"):
        WRITES_WITH_ACTOR[write](memory, fact_id, "agent", TOO_LONG)


def test_actor_of_exactly_100000_bytes_is_accepted(memory: Membrane, fact_id: str) -> None:
    memory.reinforce(fact_id, "a" * MAX_STRING_BYTES, "why")

    assert read(memory, fact_id).audit_log[-1].actor == "a" * MAX_STRING_BYTES


def test_string_limit_counts_utf8_bytes_not_characters(memory: Membrane, fact_id: str) -> None:
    actor = "é" * (MAX_STRING_BYTES // 2 + 1)  # 50,001 characters, 100,002 bytes

    with rejected(memory, field="actor"):
        memory.reinforce(fact_id, actor, "why")


def test_scope_over_100000_bytes_is_rejected(memory: Membrane) -> None:
    with rejected(memory, field="record.scope", match="exceeds maximum length"):
        memory.create_record(semantic(scope=TOO_LONG))


def test_contesting_ref_over_100000_bytes_is_rejected(memory: Membrane, fact_id: str) -> None:
    with rejected(memory, field="contesting_ref"):
        memory.contest(fact_id, TOO_LONG, "agent", "why")


# --- tags -------------------------------------------------------------------------------------


def test_more_than_100_tags_are_rejected(memory: Membrane) -> None:
    tags = [f"t{i}" for i in range(MAX_TAGS + 1)]

    with rejected(memory, field="record.tags", match="too many tags: 101"):
        memory.create_record(semantic(tags=tags))


def test_exactly_100_tags_are_accepted(memory: Membrane) -> None:
    tags = [f"t{i}" for i in range(MAX_TAGS)]

    assert memory.create_record(semantic(tags=tags)).tags == tags


def test_tag_over_256_bytes_is_rejected(memory: Membrane) -> None:
    with rejected(memory, field="record.tags[1]", match="exceeds maximum length of 256"):
        memory.create_record(semantic(tags=["ok", "t" * (MAX_TAG_BYTES + 1)]))


def test_tag_of_exactly_256_bytes_is_accepted(memory: Membrane) -> None:
    tag = "t" * MAX_TAG_BYTES

    assert memory.create_record(semantic(tags=[tag])).tags == [tag]


def test_duplicate_tags_are_rejected(memory: Membrane) -> None:
    with rejected(memory, field="record.tags[2]", match="duplicate tag"):
        memory.create_record(semantic(tags=["a", "b", "a"]))


# --- payload size -----------------------------------------------------------------------------


def test_record_over_10_mib_is_rejected(memory: Membrane) -> None:
    huge = "x" * (MAX_PAYLOAD_BYTES + 1)

    with rejected(memory, field="record.payload", match="exceeds maximum payload size"):
        memory.create_record(semantic(obj=huge))


def test_record_over_10_mib_given_as_struct_is_rejected(memory: Membrane) -> None:
    record = MemoryRecord(
        type=MemoryType.SEMANTIC, payload=SemanticPayload(object="x" * (MAX_PAYLOAD_BYTES + 1))
    )

    with rejected(memory, field="record.payload"):
        memory.create_record(record)


def test_oversized_replacement_record_is_rejected(memory: Membrane, fact_id: str) -> None:
    with rejected(memory, field="new_record.payload"):
        memory.supersede(
            fact_id, semantic(obj="x" * (MAX_PAYLOAD_BYTES + 1), evidence=True), "a", "b"
        )


# --- merge ids --------------------------------------------------------------------------------


def test_merge_with_no_ids_is_rejected(memory: Membrane) -> None:
    with rejected(memory, field="ids", match="ids must not be empty"):
        memory.merge([], working(), "agent", "why")


def test_merge_with_10001_ids_is_rejected(memory: Membrane) -> None:
    ids = [f"id-{i}" for i in range(MAX_IDS + 1)]

    with rejected(memory, field="ids", match="too many ids: 10001"):
        memory.merge(ids, working(), "agent", "why")


def test_merge_with_10000_ids_passes_the_limit(memory: Membrane) -> None:
    ids = [f"id-{i}" for i in range(MAX_IDS)]

    with pytest.raises(NotFoundError):  # past validation, the first id is looked up
        memory.merge(ids, working(), "agent", "why")


def test_merge_with_an_empty_id_is_rejected(memory: Membrane, fact_id: str) -> None:
    with rejected(memory, field="ids[1]"):
        memory.merge([fact_id, ""], working(), "agent", "why")


# --- penalty amount ---------------------------------------------------------------------------


@pytest.mark.parametrize("amount", [-0.1, *NON_FINITE], ids=["negative", "nan", "inf", "-inf"])
def test_penalize_amount_must_be_non_negative_and_finite(
    memory: Membrane, fact_id: str, amount: float
) -> None:
    with rejected(memory, field="amount", match="amount must be non-negative and finite"):
        memory.penalize(fact_id, amount, "agent", "why")


def test_rejected_penalty_leaves_salience_and_audit_unchanged(
    memory: Membrane, fact_id: str
) -> None:
    before = read(memory, fact_id)

    with pytest.raises(ValidationError):
        memory.penalize(fact_id, math.nan, "agent", "why")

    after = read(memory, fact_id)
    assert after.salience == pytest.approx(before.salience)  # reads a microsecond apart
    assert after.audit_log == before.audit_log


def test_penalize_checks_amount_before_the_id_exists(memory: Membrane) -> None:
    with rejected(memory, field="amount"):
        memory.penalize("no-such-record", -1.0, "agent", "why")


# --- scores -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", NON_FINITE, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("score", ["salience", "confidence"])
def test_non_finite_scores_are_rejected(memory: Membrane, score: str, value: float) -> None:
    with rejected(memory, field=f"record.{score}", match="must be finite"):
        memory.create_record(semantic(**{score: value}))


@pytest.mark.parametrize("value", NON_FINITE, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("score", ["salience", "confidence"])
def test_non_finite_scores_in_structs_are_rejected(
    memory: Membrane, score: str, value: float
) -> None:
    record = MemoryRecord(type=MemoryType.SEMANTIC, payload=SemanticPayload(), **{score: value})

    with rejected(memory, field=f"record.{score}"):
        memory.create_record(record)


@pytest.mark.parametrize("confidence", [-0.01, 1.01])
def test_confidence_outside_unit_interval_is_rejected(memory: Membrane, confidence: float) -> None:
    with rejected(memory, field="record.confidence", match=r"confidence must be in range \[0, 1\]"):
        memory.create_record(semantic(confidence=confidence))


@pytest.mark.parametrize("confidence", [0.0, 1.0])
def test_confidence_at_the_bounds_is_accepted(memory: Membrane, confidence: float) -> None:
    assert memory.create_record(semantic(confidence=confidence)).confidence == confidence


def test_negative_salience_is_rejected(memory: Membrane) -> None:
    with rejected(memory, field="record.salience", match="salience must be >= 0"):
        memory.create_record(semantic(salience=-0.5))


def test_salience_above_one_is_accepted(memory: Membrane) -> None:
    assert memory.create_record(semantic(salience=2.0)).salience == 2.0


# --- payload ----------------------------------------------------------------------------------


def test_payload_kind_must_match_memory_type(memory: Membrane) -> None:
    record = semantic()
    record["payload"] = {"kind": "working", "thread_id": "t"}

    with rejected(memory, field="record.payload", match="payload kind must match memory type"):
        memory.create_record(record)


def test_struct_payload_variant_must_match_memory_type(memory: Membrane) -> None:
    record = MemoryRecord(type=MemoryType.SEMANTIC, payload=WorkingPayload(thread_id="t"))

    with rejected(memory, field="record.payload", match="payload kind must match"):
        memory.create_record(record)


def test_missing_payload_is_rejected(memory: Membrane) -> None:
    with rejected(memory, field="record.payload", match="payload is required"):
        memory.create_record({"type": "semantic", "sensitivity": "low"})


def test_empty_payload_is_rejected(memory: Membrane) -> None:
    with rejected(memory, field="record.payload", match="payload is required"):
        memory.create_record({"type": "semantic", "payload": {}})


def test_missing_record_is_rejected(memory: Membrane, fact_id: str) -> None:
    with rejected(memory, field="new_record", match="new_record is required"):
        memory.supersede(fact_id, None, "agent", "why")  # type: ignore[arg-type]


# --- lifecycle --------------------------------------------------------------------------------


@pytest.mark.parametrize("half_life", [0, -60])
def test_half_life_must_be_positive(memory: Membrane, half_life: int) -> None:
    record = semantic(lifecycle={"decay": {"half_life_seconds": half_life}})

    with rejected(memory, field="record.lifecycle.decay.half_life_seconds", match="must be > 0"):
        memory.create_record(record)


def test_negative_max_age_is_rejected(memory: Membrane) -> None:
    record = semantic(lifecycle={"decay": {"max_age_seconds": -1}})

    with rejected(memory, field="record.lifecycle.decay.max_age_seconds"):
        memory.create_record(record)


@pytest.mark.parametrize("value", [-0.1, math.nan, math.inf])
@pytest.mark.parametrize("name", ["min_salience", "reinforcement_gain"])
def test_decay_floor_and_gain_must_be_non_negative_and_finite(
    memory: Membrane, name: str, value: float
) -> None:
    record = semantic(lifecycle={"decay": {name: value}})

    with rejected(memory, field=f"record.lifecycle.decay.{name}"):
        memory.create_record(record)


# --- timestamps -------------------------------------------------------------------------------


def test_naive_timestamp_string_is_rejected(memory: Membrane) -> None:
    with rejected(memory, field="record.created_at", match="timezone"):
        memory.create_record(semantic(created_at="2024-05-01T12:00:00"))


def test_naive_datetime_in_a_struct_is_rejected(memory: Membrane) -> None:
    record = MemoryRecord(
        type=MemoryType.SEMANTIC, payload=SemanticPayload(), created_at=datetime(2024, 5, 1)
    )

    with rejected(memory, field="record.created_at", match="timezone"):
        memory.create_record(record)


def test_naive_nested_timestamp_names_its_path(memory: Membrane) -> None:
    record = semantic(lifecycle={"last_reinforced_at": "2024-05-01T12:00:00"})

    with rejected(memory, field="record.lifecycle.last_reinforced_at"):
        memory.create_record(record)


def test_naive_as_of_is_rejected(memory: Membrane, fact_id: str) -> None:
    with pytest.raises(ValidationError) as info:
        memory.retrieve_by_id(fact_id, as_of=datetime(2030, 1, 1))

    assert info.value.field == "as_of"


def test_aware_timestamp_in_another_zone_is_accepted(memory: Membrane) -> None:
    record = memory.create_record(semantic(created_at="2024-05-01T14:00:00+02:00"))

    assert record.created_at == datetime(2024, 5, 1, 12, tzinfo=UTC)


# --- wrong types name the field path ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        (
            {"lifecycle": {"decay": {"half_life_seconds": "a day"}}},
            "lifecycle.decay.half_life_seconds",
        ),
        ({"confidence": "high"}, "confidence"),
        ({"tags": "one,two"}, "tags"),
        ({"tags": ["ok", 7]}, "tags[1]"),
        ({"lifecycle": {"pinned": "maybe"}}, "lifecycle.pinned"),
        (
            {"provenance": {"sources": [{"ref": "r", "timestamp": "yesterday"}]}},
            "provenance.sources[0].timestamp",
        ),
        ({"relations": [{"predicate": "p"}]}, "relations[0]"),
    ],
    ids=["half_life", "confidence", "tags_string", "tag_int", "pinned", "source_time", "relation"],
)
def test_wrong_field_type_names_the_field_path(
    memory: Membrane, fields: dict[str, Any], path: str
) -> None:
    with rejected(memory, field=f"record.{path}"):
        memory.create_record(semantic(**fields))


def test_wrong_type_inside_the_payload_names_the_payload_path(memory: Membrane) -> None:
    record = semantic()
    record["payload"]["evidence"] = [{"source_id": 42}]

    with rejected(memory, field="record.payload.evidence[0].source_id"):
        memory.create_record(record)


def test_unknown_field_is_rejected(memory: Membrane) -> None:
    with rejected(memory, match="unknown field `colour`"):
        memory.create_record(semantic(colour="blue"))


def test_error_text_follows_the_reference_form(memory: Membrane) -> None:
    with pytest.raises(ValidationError) as info:
        memory.create_record(semantic(salience=-1))

    assert str(info.value) == "validation error for record.salience: salience must be >= 0"


def test_non_record_input_is_rejected(memory: Membrane) -> None:
    with rejected(memory, field="record", match="must be a MemoryRecord or a dict"):
        memory.create_record("a fact")  # type: ignore[arg-type]


# --- enums ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"type": "rumour"}, "type"),
        ({"sensitivity": "secret"}, "sensitivity"),
        ({"lifecycle": {"deletion_policy": "sometimes"}}, "lifecycle.deletion_policy"),
        ({"lifecycle": {"decay": {"curve": "linear"}}}, "lifecycle.decay.curve"),
        ({"provenance": {"sources": [{"kind": "rumour"}]}}, "provenance.sources[0].kind"),
        (
            {"audit_log": [{"action": "erase", "actor": "a", "timestamp": "2024-01-01T00:00:00Z"}]},
            "audit_log[0].action",
        ),
    ],
    ids=["type", "sensitivity", "deletion_policy", "curve", "provenance_kind", "audit_action"],
)
def test_unknown_enum_value_is_rejected(
    memory: Membrane, fields: dict[str, Any], path: str
) -> None:
    with rejected(memory, field=f"record.{path}", match="Invalid enum value"):
        memory.create_record(semantic(**fields))


def test_unknown_revision_status_is_rejected(memory: Membrane) -> None:
    record = semantic()
    record["payload"]["revision"] = {"status": "zombie"}

    with rejected(memory, field="record.payload.revision.status"):
        memory.create_record(record)


def test_unknown_outcome_status_is_rejected(memory: Membrane) -> None:
    episode = memory.create_record(episodic())

    with rejected(memory, field="outcome_status"):
        memory.record_outcome(episode.id, "triumph")


# --- SDK dict shapes ----------------------------------------------------------------------------


def test_payload_wrapped_under_its_variant_name_is_accepted(memory: Membrane) -> None:
    record = {
        "type": "semantic",
        "payload": {"semantic": {"subject": "db", "predicate": "is", "object": "pg"}},
    }

    payload = memory.create_record(record).payload

    assert isinstance(payload, SemanticPayload)
    assert (payload.subject, payload.object) == ("db", "pg")


def test_flat_payload_without_kind_takes_the_record_type(memory: Membrane) -> None:
    record = {"type": "working", "payload": {"thread_id": "t-9", "state": "blocked"}}

    payload = memory.create_record(record).payload

    assert isinstance(payload, WorkingPayload)
    assert payload.thread_id == "t-9"


def test_entity_aliases_may_be_bare_strings(memory: Membrane) -> None:
    aliases: list[Any] = ["pg", {"value": "postgres", "kind": "alias", "locale": "en"}]
    record = {"type": "entity", "payload": {"canonical_name": "PostgreSQL", "aliases": aliases}}

    payload = memory.create_record(record).payload

    assert isinstance(payload, EntityPayload)
    assert [(a.value, a.kind, a.locale) for a in payload.aliases] == [
        ("pg", "", ""),
        ("postgres", "alias", "en"),
    ]


def test_relation_legacy_kind_key_means_predicate(memory: Membrane, fact_id: str) -> None:
    record = semantic(relations=[{"kind": "supports", "target_id": fact_id}])

    (relation,) = memory.create_record(record).relations

    assert (relation.predicate, relation.target_id) == ("supports", fact_id)


def test_relation_to_a_missing_record_is_rejected(memory: Membrane) -> None:
    record = semantic(relations=[{"predicate": "supports", "target_id": "nowhere"}])

    with rejected(memory, field="record.relations[0].target_id", match="does not exist"):
        memory.create_record(record)


@pytest.mark.parametrize("weight", [-0.5, 1.5, math.nan])
def test_relation_weight_must_be_in_unit_interval(
    memory: Membrane, fact_id: str, weight: float
) -> None:
    record = semantic(relations=[{"predicate": "supports", "target_id": fact_id, "weight": weight}])

    with rejected(memory, field="record.relations[0].weight"):
        memory.create_record(record)


def test_struct_input_is_copied_so_later_changes_do_not_reach_the_store(
    memory: Membrane,
) -> None:
    given = MemoryRecord(
        type=MemoryType.SEMANTIC,
        payload=SemanticPayload(subject="before", predicate="is", object="given"),
    )
    stored = memory.create_record(given)

    assert isinstance(given.payload, SemanticPayload)
    given.payload.subject = "after"
    given.tags.append("late")

    again = read(memory, stored.id)
    assert isinstance(again.payload, SemanticPayload)
    assert again.payload.subject == "before"
    assert again.tags == []


# --- semantic revisions need evidence ---------------------------------------------------------


def test_semantic_supersede_without_evidence_is_rejected(memory: Membrane, fact_id: str) -> None:
    with rejected(memory, field="new_record.payload.evidence", match="requires evidence"):
        memory.supersede(fact_id, semantic(obj="port 9090"), "agent", "moved")


def test_semantic_fork_without_evidence_is_rejected(memory: Membrane, fact_id: str) -> None:
    with rejected(memory, field="forked_record.payload.evidence", match="requires evidence"):
        memory.fork(fact_id, semantic(obj="port 9090"), "agent", "in dev")


def test_semantic_merge_without_evidence_is_rejected(memory: Membrane, fact_id: str) -> None:
    with rejected(memory, field="merged_record.payload.evidence", match="requires evidence"):
        memory.merge([fact_id], semantic(), "agent", "dedupe")


def test_provenance_source_counts_as_evidence(memory: Membrane, fact_id: str) -> None:
    replacement = semantic(provenance={"sources": [{"kind": "observation", "ref": "obs-7"}]})

    assert memory.supersede(fact_id, replacement, "agent", "moved").id


def test_non_semantic_revision_needs_no_evidence(memory: Membrane, fact_id: str) -> None:
    assert memory.fork(fact_id, working(), "agent", "note it").type is MemoryType.WORKING


def test_evidence_is_checked_after_the_old_record_is_found(memory: Membrane) -> None:
    with pytest.raises(NotFoundError):
        memory.supersede("missing", semantic(), "agent", "moved")


# --- ids --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "write",
    [
        lambda m: m.reinforce("", "a", "b"),
        lambda m: m.retract("", "a", "b"),
        lambda m: m.contest("", "", "a", "b"),
        lambda m: m.supersede("", working(), "a", "b"),
    ],
    ids=["reinforce", "retract", "contest", "supersede"],
)
def test_empty_record_id_is_rejected(memory: Membrane, write: Callable[[Membrane], Any]) -> None:
    with rejected(memory, match="is required"):
        write(memory)


MAX_WALKED = validation.MAX_DEPTH


def _nested(depth: int, leaf: Any) -> Any:
    value = [leaf]
    for _ in range(depth):
        value = [value]
    return value


FINITE_CASES: list[Any] = [
    {"a": [1.0, -1e308, 5e-324, 0.0, -0.0], "b": {"c": (2.5, None, True, "x")}},
    {"text": "bytes \xcb\x7f\xf0 that look like an infinity's"},
    {"deep": [[[[{"n": 1.0}]]]]},
    {1.5: "a float key"},
    [math.nan],
    {"n": {"m": [0, math.inf]}},
    {"k": -math.inf},
    (1, 2, {"z": math.nan}),
    SemanticPayload(subject="s", predicate="p", object={"v": math.nan}),
    SemanticPayload(subject="s", predicate="p", object={"v": 1.25}),
    {"after_the_deepest_walked": _nested(MAX_WALKED + 2, math.nan)},
    {"set": {1.0, 2.0}},
]


@pytest.mark.parametrize("value", FINITE_CASES)
def test_finite_check_by_encoding_agrees_with_the_walk(value: Any) -> None:
    """The encoded check answers as the walk does, or leaves the answer to it."""
    walked = validation._all_finite(value, 0)
    encoded = validation._finite_by_encoding(value)
    assert not encoded or walked  # it never passes what the walk refuses
    if walked:
        validation.check_finite("value", value)
    else:
        with pytest.raises(ValidationError, match="must be a finite number"):
            validation.check_finite("value", value)

"""Trust on by-id reads and history (spec §3.1, §3.6; T2 of §10.1).

A by-id read returns the full record or nothing: one level above the caller's trust is
denied, not redacted; so is a record outside the caller's scopes. Unknown ids are
NotFound before access is considered.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from membrane_es import (
    AccessDeniedError,
    Membrane,
    MemoryRecord,
    NotFoundError,
    Sensitivity,
    TrustContext,
    ValidationError,
)
from tests.unit.builders import semantic
from tests.unit.conftest import START, ManualTime

LEVELS = list(Sensitivity)
ALPHA = "project:alpha"
BETA = "project:beta"


def trust(level: str = "low", *scopes: str) -> TrustContext:
    return TrustContext(max_sensitivity=Sensitivity(level), scopes=list(scopes))


def fact(memory: Membrane, sensitivity: str = "low", scope: str = "") -> MemoryRecord:
    return memory.create_record(semantic(sensitivity=sensitivity, scope=scope))


# --- sensitivity ------------------------------------------------------------------------------


@pytest.mark.parametrize("record_level", LEVELS, ids=str)
@pytest.mark.parametrize("trust_level", LEVELS, ids=str)
def test_by_id_read_allows_exactly_levels_at_or_below_trust(
    memory: Membrane, trust_level: Sensitivity, record_level: Sensitivity
) -> None:
    record = fact(memory, record_level)

    if record_level.level <= trust_level.level:
        assert memory.retrieve_by_id(record.id, trust=trust(trust_level)).id == record.id
    else:
        with pytest.raises(AccessDeniedError):
            memory.retrieve_by_id(record.id, trust=trust(trust_level))


def test_one_level_above_is_denied_not_redacted(memory: Membrane) -> None:
    record = fact(memory, "medium")

    with pytest.raises(AccessDeniedError, match="access denied by trust context") as info:
        memory.retrieve_by_id(record.id, trust=trust("low"))

    assert info.value.record_id == record.id


def test_allowed_record_comes_back_in_full(memory: Membrane) -> None:
    record = fact(memory, "high", ALPHA)

    read = memory.retrieve_by_id(record.id, trust=trust("high", ALPHA))

    assert read.payload == record.payload
    assert read.audit_log == record.audit_log


def test_default_trust_is_least_privilege(memory: Membrane) -> None:
    low, medium = fact(memory, "low"), fact(memory, "medium")

    assert memory.retrieve_by_id(low.id).id == low.id
    with pytest.raises(AccessDeniedError):
        memory.retrieve_by_id(medium.id)


# --- scope ------------------------------------------------------------------------------------


def test_out_of_scope_record_is_denied(memory: Membrane) -> None:
    record = fact(memory, "low", BETA)

    with pytest.raises(AccessDeniedError):
        memory.retrieve_by_id(record.id, trust=trust("hyper", ALPHA))


def test_in_scope_record_is_allowed(memory: Membrane) -> None:
    record = fact(memory, "low", ALPHA)

    assert memory.retrieve_by_id(record.id, trust=trust("low", BETA, ALPHA)).scope == ALPHA


def test_unscoped_record_is_visible_to_a_scoped_caller(memory: Membrane) -> None:
    record = fact(memory, "low", "")

    assert memory.retrieve_by_id(record.id, trust=trust("low", ALPHA)).id == record.id


def test_caller_without_scopes_sees_every_scope(memory: Membrane) -> None:
    record = fact(memory, "low", BETA)

    assert memory.retrieve_by_id(record.id, trust=trust("low")).scope == BETA


def test_scope_match_is_exact(memory: Membrane) -> None:
    record = fact(memory, "low", "project:alpha/sub")

    with pytest.raises(AccessDeniedError):
        memory.retrieve_by_id(record.id, trust=trust("low", ALPHA))


def test_in_scope_but_one_level_above_is_denied(memory: Membrane) -> None:
    record = fact(memory, "medium", ALPHA)

    with pytest.raises(AccessDeniedError):
        memory.retrieve_by_id(record.id, trust=trust("low", ALPHA))


# --- not found first; trust required ----------------------------------------------------------


def test_unknown_id_is_not_found_even_with_least_trust(memory: Membrane) -> None:
    with pytest.raises(NotFoundError):
        memory.retrieve_by_id("no-such-id", trust=trust("public", ALPHA))


def test_record_read_before_its_creation_is_not_found(memory: Membrane, time: ManualTime) -> None:
    time.advance(hours=1)
    record = fact(memory, "hyper", BETA)

    with pytest.raises(NotFoundError):
        memory.retrieve_by_id(record.id, trust=trust("public", ALPHA), as_of=START)


def test_as_of_read_applies_the_same_rule(memory: Membrane, time: ManualTime) -> None:
    record = fact(memory, "medium")
    time.advance(hours=1)

    with pytest.raises(AccessDeniedError):
        memory.retrieve_by_id(record.id, trust=trust("low"), as_of=START + timedelta(minutes=1))


def test_trust_none_is_a_validation_error(memory: Membrane) -> None:
    record = fact(memory)

    with pytest.raises(ValidationError, match="trust context is required") as info:
        memory.retrieve_by_id(record.id, trust=None)

    assert info.value.field == "trust"


def test_trust_none_is_rejected_before_the_id_is_looked_up(memory: Membrane) -> None:
    with pytest.raises(ValidationError):
        memory.retrieve_by_id("no-such-id", trust=None)


def test_unknown_trust_level_is_a_validation_error(memory: Membrane) -> None:
    record = fact(memory)
    bogus: Any = TrustContext(max_sensitivity="secret")  # type: ignore[arg-type]

    with pytest.raises(ValidationError) as info:
        memory.retrieve_by_id(record.id, trust=bogus)

    assert info.value.field == "trust.max_sensitivity"


def test_trust_given_as_a_dict_is_accepted(memory: Membrane) -> None:
    record = fact(memory, "high")
    as_dict: Any = {"max_sensitivity": "high", "scopes": []}

    assert memory.retrieve_by_id(record.id, trust=as_dict).id == record.id


# --- history ----------------------------------------------------------------------------------


def test_history_is_returned_to_an_allowed_caller(memory: Membrane) -> None:
    record = fact(memory, "medium", ALPHA)
    memory.reinforce(record.id, "agent", "useful")

    entries = memory.history(record.id, trust=trust("medium", ALPHA))

    assert [(e.version, e.event, e.action) for e in entries] == [
        (1, "Created", "create"),
        (2, "Reinforced", "reinforce"),
    ]


def test_history_one_level_above_is_denied(memory: Membrane) -> None:
    record = fact(memory, "medium")

    with pytest.raises(AccessDeniedError):
        memory.history(record.id, trust=trust("low"))


def test_history_out_of_scope_is_denied(memory: Membrane) -> None:
    record = fact(memory, "low", BETA)

    with pytest.raises(AccessDeniedError):
        memory.history(record.id, trust=trust("hyper", ALPHA))


def test_history_of_an_unscoped_record_is_visible_to_a_scoped_caller(memory: Membrane) -> None:
    record = fact(memory, "low")

    assert len(memory.history(record.id, trust=trust("low", ALPHA))) == 1


def test_history_of_an_unknown_id_is_not_found(memory: Membrane) -> None:
    with pytest.raises(NotFoundError):
        memory.history("no-such-id", trust=trust("public", ALPHA))


def test_history_requires_trust(memory: Membrane) -> None:
    record = fact(memory)

    with pytest.raises(ValidationError, match="trust context is required"):
        memory.history(record.id, trust=None)


def test_history_default_trust_is_least_privilege(memory: Membrane) -> None:
    record = fact(memory, "medium")

    with pytest.raises(AccessDeniedError):
        memory.history(record.id)

"""Revisions never widen who can read a record (hypothesis), and trust contexts refuse a
string where the list of scopes belongs."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_es import Membrane, MembraneError, TrustContext, ValidationError
from membrane_es.schema.enums import Sensitivity
from tests.unit.builders import semantic

SCOPES = ("", "user:dana", "user:bob")
LEVELS = [s.value for s in Sensitivity]
# Every reader worth telling apart: each level, with no scope filter or any set of scopes.
READERS = [
    TrustContext(max_sensitivity=Sensitivity(level), scopes=list(scopes))
    for level in LEVELS
    for size in range(3)
    for scopes in combinations(SCOPES[1:], size)
]

records = st.tuples(st.sampled_from(SCOPES), st.sampled_from(LEVELS))
revisions = st.tuples(
    st.sampled_from(["supersede", "fork", "merge"]),
    st.lists(records, min_size=1, max_size=3),
    records,
)


def readable(memory: Membrane, record_id: str, trust: TrustContext) -> bool:
    """Whether ``trust`` reads the record in full (not denied, not redacted)."""
    try:
        return memory.retrieve_by_id(record_id, trust=trust).payload is not None
    except MembraneError:
        return False


def revise(memory: Membrane, op: str, ids: list[str], new: dict[str, Any]) -> str:
    if op == "supersede":
        return memory.supersede(ids[0], new, "t", "revised").id
    if op == "fork":
        return memory.fork(ids[0], new, "t", "variant").id
    return memory.merge(ids, new, "t", "combined").id


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(revisions)
def test_no_revision_is_readable_by_a_reader_of_none_of_what_it_revised(
    revision: tuple[str, list[tuple[str, str]], tuple[str, str]],
) -> None:
    op, sources, (scope, level) = revision
    memory = Membrane.in_memory(embedder=None, resolve_writes=False)
    try:
        ids = [
            memory.create_record(semantic(f"thing {i}", scope=s, sensitivity=lv)).id
            for i, (s, lv) in enumerate(sources)
        ]
        new = semantic("revised", evidence=True, scope=scope, sensitivity=level)
        try:
            revised = revise(memory, op, ids, new)
        except ValidationError as refused:
            assert refused.field.endswith(".scope")
            return
        revised_ids = ids if op == "merge" else ids[:1]
        for trust in READERS:
            if readable(memory, revised, trust):
                # a retracted source is still read by id, as trust allows
                assert all(readable(memory, i, trust) for i in revised_ids), (trust, sources)
    finally:
        memory.close()


def test_a_revision_without_a_scope_takes_the_one_it_revises() -> None:
    memory = Membrane.in_memory(embedder=None)
    try:
        fact = memory.create_record(semantic("Dana", scope="user:dana", sensitivity="medium"))
        new = memory.supersede(fact.id, semantic("Dana", "city", "Faro", evidence=True), "t", "r")
        assert (new.scope, new.sensitivity) == ("user:dana", Sensitivity.MEDIUM)
        bob = TrustContext(max_sensitivity=Sensitivity.HYPER, scopes=["user:bob"])
        assert not readable(memory, new.id, bob)
        variant = memory.fork(new.id, semantic("Dana", "city", "Faro", evidence=True), "t", "r")
        assert variant.scope == "user:dana"
        other = memory.create_record(semantic("Bob", scope="user:bob"))
        with pytest.raises(ValidationError, match="different scopes") as refused:
            memory.merge([variant.id, other.id], semantic("both", evidence=True), "t", "r")
        assert refused.value.field == "merged_record.scope"
        with pytest.raises(ValidationError, match="widen"):
            memory.supersede(variant.id, semantic("x", evidence=True, scope="team"), "t", "r")
        wide = memory.supersede(variant.id, semantic("x", evidence=True), "t", "r", widen=True)
        assert wide.scope == ""  # the explicit choice: readable by every scope
    finally:
        memory.close()


@pytest.mark.parametrize("scopes", ["user:dana", b"user:dana", None, ["user:dana", 7]])
def test_a_trust_context_refuses_scopes_that_are_not_a_list_of_text(scopes: Any) -> None:
    with pytest.raises(ValidationError, match=r"trust\.scopes"):
        TrustContext(scopes=scopes)


def test_a_tuple_of_scopes_is_read_as_a_list() -> None:
    assert TrustContext(scopes=("a", "b")).scopes == ["a", "b"]

"""The change feed: log order, operations, field diffs, trust, erasure, paging, following."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from membrane_es import Change, Membrane, TrustContext, ValidationError
from membrane_es.queries.changes import _viewed_refs
from membrane_es.queries.field_diff import record_refs
from tests.unit.builders import FULL_TRUST, episodic, semantic

SECRET = "the vault code is 4417"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Membrane]:
    engine = Membrane.open(tmp_path / "store")
    yield engine
    engine.close()


def history(memory: Membrane) -> dict[str, str]:
    low = memory.create_record(semantic(obj="port 8080", sensitivity="low")).id
    high = memory.create_record(semantic(subject="vault", obj=SECRET, sensitivity="high")).id
    memory.reinforce(low, actor="ops", rationale="it answered")
    memory.pin(low, actor="ops", rationale="keep")
    memory.forget(high, actor="dpo", rationale="erasure request")
    return {"low": low, "high": high}


def test_every_event_in_log_order_named_by_its_class(memory: Membrane) -> None:
    ids = history(memory)
    changes = list(memory.changes(trust=FULL_TRUST))
    assert [c.position for c in changes] == list(range(1, memory.event_count() + 1))
    assert [(c.record_id, c.operation) for c in changes] == [
        (ids["low"], "created"),
        (ids["high"], "created"),
        (ids["low"], "reinforced"),
        (ids["low"], "pinned"),
        (ids["high"], "forgotten"),
    ]
    pinned = changes[3]
    assert (pinned.actor, pinned.rationale, pinned.action) == ("ops", "keep", "pin")
    assert [(f.path, f.kind, f.before, f.after) for f in pinned.fields] == [
        ("pinned", "changed", "false", "true")
    ]
    created = changes[0]
    assert ("payload.object", "added", "port 8080") in [
        (f.path, f.kind, f.after) for f in created.fields
    ]
    assert created.event_time == created.record.created_at
    assert created.log_time <= changes[-1].log_time


def test_erased_content_appears_in_no_change(memory: Membrane) -> None:
    ids = history(memory)
    changes = [c for c in memory.changes(trust=FULL_TRUST) if c.record_id == ids["high"]]
    assert [c.erased for c in changes] == [True, True]
    assert changes[-1].operation == "forgotten"
    assert SECRET not in repr(changes)


def test_trust_redacts_one_level_above_and_hides_higher(memory: Membrane) -> None:
    ids = history(memory)
    medium = list(memory.changes(trust=TrustContext(max_sensitivity="medium")))
    high = [c for c in medium if c.record_id == ids["high"]]
    assert high and all(c.redacted and not c.fields and not c.actor for c in high)
    assert all(c.record.payload is None for c in high)
    low = list(memory.changes(trust=TrustContext(max_sensitivity="low")))
    assert {c.record_id for c in low} == {ids["low"]}
    scoped = memory.create_record(semantic(obj="scoped", scope="team-a")).id
    other = list(memory.changes(trust=TrustContext(max_sensitivity="hyper", scopes=["team-b"])))
    assert scoped not in {c.record_id for c in other}


def test_resuming_after_a_position_neither_skips_nor_repeats(memory: Membrane) -> None:
    history(memory)
    whole = list(memory.changes(trust=FULL_TRUST))
    seen: list[Change] = []
    after = 0
    while True:
        page = memory.changes_page(after=after, limit=2, trust=FULL_TRUST)
        seen.extend(page.changes)
        if page.next_after == page.head and len(page.changes) < 2:
            break
        after = page.next_after
    assert seen == whole
    # a consumer met mid-way rebuilds the record from the store, diff included
    assert list(memory.changes(after=3, trust=FULL_TRUST)) == whole[3:]


def test_a_page_steps_past_changes_the_reader_cannot_see(memory: Membrane) -> None:
    history(memory)
    page = memory.changes_page(after=4, limit=10, trust=TrustContext(max_sensitivity="low"))
    assert page.changes == [] and page.next_after == page.head == 5


def test_follow_hands_over_writes_as_they_commit(memory: Membrane) -> None:
    history(memory)
    got: list[Change] = []
    with memory.changes(after=5, follow=True, timeout=5, trust=FULL_TRUST) as feed:

        def write() -> None:
            time.sleep(0.2)
            memory.create_record(semantic(obj="later"))

        writer = threading.Thread(target=write)
        writer.start()
        got.append(next(feed))
        writer.join()
    assert got[0].position == 6 and got[0].operation == "created"


def test_follow_ends_after_its_timeout_with_nothing_new(memory: Membrane) -> None:
    history(memory)
    started = time.monotonic()
    assert list(memory.changes(after=5, follow=True, timeout=0.3, trust=FULL_TRUST)) == []
    assert time.monotonic() - started >= 0.3


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("after", {"after": -1}),
        ("after", {"after": "3"}),
        ("after", {"after": True}),
        ("limit", {"limit": -5}),
        ("timeout", {"timeout": float("nan")}),
        ("timeout", {"timeout": -1}),
        ("follow", {"follow": "yes"}),
    ],
)
def test_bad_arguments_name_their_field(
    memory: Membrane, field: str, kwargs: dict[str, object]
) -> None:
    with pytest.raises(ValidationError, match=field):
        memory.changes(trust=FULL_TRUST, **kwargs)


def test_a_page_is_bounded(memory: Membrane) -> None:
    for limit in (0, 10_001):
        with pytest.raises(ValidationError, match="limit"):
            memory.changes_page(limit=limit, trust=FULL_TRUST)


def test_every_read_answers_as_of_a_position(memory: Membrane) -> None:
    ids = history(memory)
    changes = list(memory.changes(trust=FULL_TRUST))
    for change in changes:
        n, at = change.position, change.log_time
        assert memory.record_ids(trust=FULL_TRUST, as_of_position=n) == memory.record_ids(
            trust=FULL_TRUST, as_of=at
        )
        assert memory.get_metrics(as_of_position=n) == memory.get_metrics(as_of=at)
        by_position = memory.retrieve("port", trust=FULL_TRUST, as_of_position=n)
        assert by_position == memory.retrieve("port", trust=FULL_TRUST, as_of=at)
        graph = memory.retrieve_graph("port", trust=FULL_TRUST, as_of_position=n)
        assert graph == memory.retrieve_graph("port", trust=FULL_TRUST, as_of=at)
        context = memory.context("port", trust=FULL_TRUST, as_of_position=n)
        assert context == memory.context("port", trust=FULL_TRUST, as_of=at)
    assert memory.record_ids(trust=FULL_TRUST, as_of_position=0) == []
    pinned = memory.retrieve_by_id(ids["low"], trust=FULL_TRUST, as_of_position=4)
    assert pinned.lifecycle.pinned
    assert not memory.retrieve_by_id(
        ids["low"], trust=FULL_TRUST, as_of_position=3
    ).lifecycle.pinned


@pytest.mark.parametrize("position", [-1, "2", 1.5, True, 99])
def test_a_bad_position_names_its_field(memory: Membrane, position: object) -> None:
    history(memory)
    with pytest.raises(ValidationError, match="as_of_position"):
        memory.retrieve(trust=FULL_TRUST, as_of_position=position)  # type: ignore[arg-type]


def test_as_of_and_a_position_are_not_both_given(memory: Membrane) -> None:
    history(memory)
    with pytest.raises(ValidationError, match="as_of_position"):
        memory.get_metrics(as_of=datetime.now(UTC), as_of_position=1)


def test_a_version_compared_without_viewing_it_whole_is_what_its_view_shows(
    memory: Membrane,
) -> None:
    """The feed diffs an event against the fields of the record's previous version taken
    from its state (``_viewed_refs``); they must be the fields its full view has, whatever
    the events before it changed (status, outcome, provenance, relations, pin, salience)."""
    fact = memory.create_record(semantic("api", "runs_on", "port 8080")).id
    other = memory.create_record(semantic("api", "runs_on", "port 9090")).id
    episode = memory.create_record(episodic()).id
    memory.reinforce(fact, "ops", "confirmed")
    memory.penalize(fact, 0.2, "ops", "doubtful")
    memory.contest(fact, other, "ops", "conflicts")
    memory.pin(fact, actor="ops")
    memory.add_relation(fact, "supports", other, actor="ops")
    memory.record_outcome(episode, "success", actor="ops")
    moved = semantic(
        "api",
        "runs_on",
        "port 9191",
        provenance={"sources": [{"kind": "observation", "ref": "o1"}]},
    )
    memory.supersede(other, moved, "ops", "moved")
    app = memory.application
    for record_id in (fact, other, episode):
        aggregate = app.load(record_id)
        view = aggregate.view(aggregate.modified_on)
        assert _viewed_refs(aggregate) == record_refs(view)

"""The engine with its log in PostgreSQL (eventsourcing.postgres): the same behaviour as on
LMDB, on a database made for each test. Skipped without ``MEMBRANE_TEST_POSTGRES_DSN``
(failed under ``CI=true``), see ``tests/integration/conftest.py``."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from membrane_es import ConflictError, Membrane, NotFoundError
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections.read_model import ReadModel
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import FULL_TRUST, semantic
from tests.unit.conftest import ManualTime
from tests.views_support import assert_same_views, random_history

pytestmark = pytest.mark.postgres

OpenStore = Callable[..., Membrane]
ORCHID_FACT = {"subject": "Orchid", "predicate": "deploy_target_for", "object": "staging"}


@pytest.fixture
def open_store(postgres_dsn: str, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens engines on this test's database (views in ``tmp_path/views`` unless told);
    closes whatever is still open at the end."""
    engines: list[Membrane] = []

    def open_store(**options: Any) -> Membrane:
        options.setdefault("views_dir", tmp_path / "views")
        engine = Membrane.open_postgres(postgres_dsn, **options)
        engines.append(engine)
        return engine

    yield open_store
    for engine in engines:
        engine.close()  # idempotent


def _count_events(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn) as connection:
        query = f'SELECT count(*) FROM "{schema}".memory_events'
        row = connection.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def test_revisions_history_and_as_of(open_store: OpenStore) -> None:
    time = ManualTime()
    memory = open_store(clock=MonotonicClock(time))
    fact = memory.create_record(semantic("api", "listens_on", "port 8080"))
    before = time.advance(hours=1)
    time.advance(hours=1)
    newer = memory.supersede(
        fact.id, semantic("api", "listens_on", "port 9090", evidence=True), "ops", "moved"
    )
    memory.reinforce(newer.id, "agent", "it helped")
    time.advance(hours=1)
    memory.retract(newer.id, "ops", "gone")

    old_now = memory.retrieve_by_id(fact.id, trust=FULL_TRUST)
    assert old_now.salience == 0.0  # superseded: retracted, kept
    then = memory.retrieve_by_id(fact.id, trust=FULL_TRUST, as_of=before)
    assert then.salience > 0.0 and [a.action for a in then.audit_log] == ["create"]
    with pytest.raises(NotFoundError):
        memory.retrieve_by_id(newer.id, trust=FULL_TRUST, as_of=before)
    assert [h.action for h in memory.history(newer.id, trust=FULL_TRUST)] == [
        "create",
        "reinforce",
        "delete",
    ]
    assert [r.id for r in memory.retrieve("api", trust=FULL_TRUST).records] == []
    past = memory.retrieve("api", trust=FULL_TRUST, as_of=before).records
    assert [r.id for r in past] == [fact.id]
    assert memory.get_metrics()["total_records"] == 2
    assert memory.get_metrics(as_of=before)["total_records"] == 1


def test_capture_graph_and_metrics(open_store: OpenStore) -> None:
    memory = open_store()
    result = memory.capture_memory(ORCHID_FACT, source_kind="observation")
    person, fact = result.created_records
    again = memory.capture_memory(
        {"subject": "Orchid", "predicate": "owner", "object": "platform"},
        source_kind="observation",
    )
    assert person.id not in {r.id for r in again.created_records}  # the entity is reused

    graph = memory.retrieve_graph("Orchid", trust=FULL_TRUST, node_limit=100)
    ids = {node.record.id for node in graph.nodes}
    assert {person.id, fact.id, result.primary_record.id} <= ids
    metrics = memory.get_metrics()
    assert metrics["total_records"] == 1 + 2 + 2  # two events, one entity, two facts
    assert metrics["records_by_type"] == {"episodic": 2, "entity": 1, "semantic": 2}


def test_a_failed_batch_writes_nothing(open_store: OpenStore, postgres_dsn: str) -> None:
    memory = open_store()
    memory.create_record(semantic(id="kept"))
    with pytest.raises(RuntimeError), memory.batch():
        memory.create_record(semantic(id="lost-1"))
        memory.create_record(semantic(id="lost-2"))
        raise RuntimeError("abandon the batch")
    assert _count_events(postgres_dsn, "public") == 1
    with memory.batch():
        memory.create_record(semantic(id="one"))
        memory.create_record(semantic(id="two"))
    assert _count_events(postgres_dsn, "public") == 3
    assert memory.retrieve_by_id("two", trust=FULL_TRUST).id == "two"


def test_a_restart_resumes_from_the_views_checkpoint(open_store: OpenStore, tmp_path: Path) -> None:
    rng = random.Random(7)
    with open_store(embedder=HashingEmbedder(32)) as memory:
        random_history(memory, rng, 40)
        written = memory.application.recorder.max_notification_id()
    with open_store(embedder=HashingEmbedder(32), views_dir=None) as reader:
        saved = ReadModel.load(tmp_path / "views", reader.application)
    assert saved is not None and saved.position == written

    # writes by a process that never checkpointed, then a restart that replays only those
    with open_store(embedder=HashingEmbedder(32), views_dir=None) as other:
        random_history(other, rng, 25)
    with open_store(embedder=HashingEmbedder(32)) as memory:
        assert memory.views.position > saved.position
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))


def test_views_of_another_log_are_not_resumed(open_store: OpenStore, tmp_path: Path) -> None:
    """A Postgres store's views live apart from it: pointing the same directory at another
    log (here a longer one, so the checkpoint is not simply ahead of it) must rebuild, not
    resume from a checkpoint of a different log."""
    with open_store(schema="first") as memory:
        random_history(memory, random.Random(1), 10)
    with open_store(schema="second", views_dir=None) as memory:
        random_history(memory, random.Random(2), 40)
    with open_store(schema="second") as memory:
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))


def test_schemas_are_separate_stores(open_store: OpenStore, postgres_dsn: str) -> None:
    acme = open_store(schema="tenant_acme", views_dir=None)
    globex = open_store(schema="tenant_globex", views_dir=None)
    acme.create_record(semantic(id="acme-fact"))
    globex.create_record(semantic(id="globex-fact"))
    assert [r.id for r in acme.retrieve(trust=FULL_TRUST).records] == ["acme-fact"]
    with pytest.raises(NotFoundError):
        globex.retrieve_by_id("acme-fact", trust=FULL_TRUST)
    assert acme.get_metrics()["total_records"] == globex.get_metrics()["total_records"] == 1
    assert _count_events(postgres_dsn, "tenant_acme") == 1


def test_two_engines_share_one_log(open_store: OpenStore) -> None:
    """Two processes (here: engines) on one database see each other's writes; racing
    revisions of one record are never lost or doubled: a lost race is retried from a fresh
    load, and one that keeps losing is reported (ConflictError), never half-written."""
    first = open_store(views_dir=None)
    second = open_store(views_dir=None)
    fact = first.create_record(semantic(id="shared"))
    for engine in (second, first, second):  # each write starts from the other's last one
        engine.reinforce(fact.id, "agent", "useful")
    assert second.retrieve_by_id(fact.id, trust=FULL_TRUST).audit_log[-1].action == "reinforce"

    landed: list[int] = []

    def reinforce(engine: Membrane) -> None:
        done = 0
        for _ in range(5):
            try:
                engine.reinforce(fact.id, "agent", "useful")
                done += 1
            except ConflictError:
                pass  # the other engine kept winning; nothing of this call was written
        landed.append(done)

    threads = [threading.Thread(target=reinforce, args=(e,)) for e in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    history = first.history(fact.id, trust=FULL_TRUST)
    assert sum(landed) >= 5  # every race has a winner
    assert [h.action for h in history].count("reinforce") == 3 + sum(landed)
    assert [h.version for h in history] == list(range(1, len(history) + 1))
    times = [h.timestamp for h in history]
    assert times == sorted(times) and len(set(times)) == len(times)  # two clocks, one order
    newest = max(first.application.recorder.max_notification_id() or 0, 0)
    assert second.get_metrics(min_position=newest)["total_audit_entries"] == len(history)

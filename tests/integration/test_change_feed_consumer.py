"""The SQLite consumer of ``docs/change_feed.md``, run as the page prints it: its table
equals ``retrieve_by_id(as_of_position=N)`` at every position N it reaches, across restarts
of the consumer and of the store; and on PostgreSQL, following two writer processes."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from membrane_es import (
    AccessDeniedError,
    Membrane,
    MemoryRecord,
    NotFoundError,
    TrustContext,
)
from tests.unit.builders import FULL_TRUST, semantic

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "change_feed.md"
READER = TrustContext(max_sensitivity="medium")


def consumer() -> Callable[..., int]:
    """``follow_into_sqlite`` from the page's last Python block."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    namespace: dict[str, Any] = {}
    exec(compile(blocks[-1], str(PAGE), "exec"), namespace)  # noqa: S102 - the page's own code
    follow: Callable[..., int] = namespace["follow_into_sqlite"]
    return follow


def table(database: Path) -> dict[str, MemoryRecord]:
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT id, record FROM records").fetchall()
    return {record_id: msgspec.json.decode(text, type=MemoryRecord) for record_id, text in rows}


def without_salience(record: MemoryRecord) -> MemoryRecord:
    return msgspec.structs.replace(record, salience=0.0)


def assert_table_is_the_store(memory: Membrane, database: Path, position: int) -> None:
    """Every record the reader may read in full at ``position`` is in the table as it was
    then; the table holds nothing else but records it sees redacted."""
    kept = table(database)
    for record_id in memory.record_ids(trust=FULL_TRUST, include_retracted=True):
        try:
            then = memory.retrieve_by_id(record_id, trust=READER, as_of_position=position)
        except NotFoundError:
            assert record_id not in kept
            continue
        except AccessDeniedError:
            continue  # above the reader: redacted in the table, or absent
        assert without_salience(kept[record_id]) == without_salience(then)


def write_some(memory: Membrane, n: int, start: int = 0) -> list[str]:
    ids = []
    for i in range(start, start + n):
        sensitivity = ("low", "medium", "high", "hyper")[i % 4]
        ids.append(memory.create_record(semantic(obj=f"fact {i}", sensitivity=sensitivity)).id)
    return ids


def test_the_table_follows_through_restarts_of_consumer_and_store(tmp_path: Path) -> None:
    follow_into_sqlite = consumer()
    store, database = tmp_path / "store", tmp_path / "feed.db"
    memory = Membrane.open(store)
    ids = write_some(memory, 6)
    memory.reinforce(ids[0], actor="ops", rationale="used")
    memory.supersede(ids[1], semantic(obj="newer", evidence=True), actor="ops", rationale="moved")
    position = 0
    while position < memory.event_count():  # a consumer restarted after every two changes
        position = follow_into_sqlite(memory, str(database), READER, limit=2)
        assert_table_is_the_store(memory, database, position)
    memory.close()

    memory = Membrane.open(store)  # the store restarted
    memory.forget(ids[0], actor="dpo", rationale="erasure request")
    write_some(memory, 3, start=6)
    position = follow_into_sqlite(memory, str(database), READER)
    assert position == memory.event_count()
    assert_table_is_the_store(memory, database, position)
    erased = table(database)[ids[0]]
    assert erased.payload is None
    memory.close()


WRITER = """
import sys
from membrane_es import Membrane
from tests.unit.builders import semantic
memory = Membrane.open_postgres(sys.argv[1])
for i in range(int(sys.argv[3])):
    level = ("low", "medium", "high")[i % 3]
    record = memory.create_record(semantic(obj=f"{sys.argv[2]} {i}", sensitivity=level))
    if i % 5 == 4:
        memory.reinforce(record.id, actor=sys.argv[2], rationale="again")
memory.close()
"""


@pytest.mark.postgres
def test_the_table_follows_two_writer_processes_on_postgres(
    postgres_dsn: str, tmp_path: Path
) -> None:
    follow_into_sqlite = consumer()
    database = tmp_path / "feed.db"
    memory = Membrane.open_postgres(postgres_dsn)
    write_some(memory, 2)
    reached: list[int] = []
    done = threading.Event()
    last_visible: list[int] = []

    def consume() -> None:
        """Follow, and start again each time a follow times out (a consumer restarted),
        until the writers are done and the last change this reader sees is in the table."""
        while True:
            reached.append(
                follow_into_sqlite(memory, str(database), READER, follow=True, timeout=1.0)
            )
            if done.is_set() and reached[-1] >= last_visible[0]:
                return

    following = threading.Thread(target=consume)
    following.start()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, postgres_dsn, name, "30"], cwd=ROOT, env=env
        )
        for name in ("first", "second")
    ]
    assert [writer.wait(timeout=300) for writer in writers] == [0, 0]
    head = memory.application.recorder.max_notification_id()
    changes = list(memory.changes(trust=READER))
    last_visible.append(changes[-1].position)
    done.set()
    following.join(timeout=120)
    assert not following.is_alive()
    assert reached[-1] == changes[-1].position and len(changes) > 40
    assert reached == sorted(reached)
    assert_table_is_the_store(memory, database, head)
    # a consumer restarted from nothing reaches the same table
    again = tmp_path / "again.db"
    follow_into_sqlite(memory, str(again), READER)
    assert table(again) == table(database)
    memory.close()

"""A deleted *latest* event: no later version shows the gap, so the store keeps each record's
latest logged version beside the log. A write never takes the deleted version's number again
(which would hide the deletion), and ``verify()`` calls a store where that already happened
a missing event, not a reordering."""

from __future__ import annotations

from pathlib import Path

import pytest
from eventsourcing.persistence import StoredEvent

from membrane_es import IntegrityError, Membrane, TrustContext
from membrane_es.aggregates.identity import record_key
from membrane_es.stores.chain import ChainFault
from tests.faults.tamper_support import delete_event, drop_head, event_key_of, unindex_heads
from tests.faults.test_tampering import _make_store, _record

FULL = TrustContext(max_sensitivity="hyper")
LATEST = 5  # record a's Penalized, its third and last event


def test_a_write_never_reuses_the_deleted_version(tmp_path: Path) -> None:
    owner = _make_store(tmp_path)
    delete_event(tmp_path, LATEST)
    with Membrane.open(tmp_path) as memory:  # the views' checkpoint predates the edit
        recorder = memory.application.recorder
        head = recorder.max_notification_id()
        with pytest.raises(IntegrityError) as raised:
            memory.reinforce(owner[LATEST], "t", "helped")
        assert raised.value.notification_id == LATEST
        # Below the engine's read (as a write from a cached record would be): refused too.
        stolen = StoredEvent(record_key(owner[LATEST]), 3, "Reinforced", b"{}")
        with pytest.raises(IntegrityError) as raised:
            recorder.insert_events([stolen])
        assert raised.value.notification_id == LATEST
        assert recorder.max_notification_id() == head
        # Other records still take writes.
        memory.reinforce(owner[4], "t", "helped")
        assert recorder.max_notification_id() == head + 1
    report = Membrane.verify_store(tmp_path)
    assert (report.fault, report.notification_id) == (ChainFault.MISSING, LATEST)


def test_verify_calls_a_reused_version_a_missing_event(tmp_path: Path) -> None:
    """A store where the deleted version was written again (its heads entry deleted too, or
    written by a version that kept none) reads without error; the walk names the loss."""
    owner = _make_store(tmp_path)
    delete_event(tmp_path, LATEST)
    drop_head(tmp_path, LATEST)
    with Membrane.open(tmp_path) as memory:
        memory.reinforce(owner[LATEST], "t", "helped")
        reused = memory.application.recorder.max_notification_id()
    assert event_key_of(tmp_path, reused) == event_key_of(tmp_path, LATEST)
    report = Membrane.verify_store(tmp_path)
    assert (report.fault, report.notification_id) == (ChainFault.MISSING, LATEST)
    assert f"written again by notification {reused}" in report.detail


def test_a_log_from_before_the_heads_is_indexed_at_its_next_write(tmp_path: Path) -> None:
    owner = _make_store(tmp_path)
    unindex_heads(tmp_path)
    delete_event(tmp_path, LATEST)
    with Membrane.open(tmp_path) as memory:
        memory.create_record(_record("d"))  # the first write indexes the whole log once
        with pytest.raises(IntegrityError) as raised:
            memory.retrieve_by_id(owner[LATEST], trust=FULL)
        assert raised.value.notification_id == LATEST
        assert memory.retrieve_by_id(owner[4], trust=FULL).id == owner[4]

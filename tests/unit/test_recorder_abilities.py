"""What a recorder offers beyond eventsourcing's interface is checked once, where the
application makes it: a recorder that lacks an ability opens, and the engine does without it
(or says clearly that it cannot); one that offers half of an ability is refused there."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.utils import get_topic

from membrane_es import Membrane, MembraneError
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections.read_model import ReadModel
from membrane_es.stores.abilities import Abilities, abilities_of
from membrane_es.stores.chain import Chain
from membrane_es.stores.lmdb.recorders import LMDBApplicationRecorder
from membrane_es.wiring.application import MemoryApplication
from tests.views_support import assert_same_views, random_history


class WithoutVerify(LMDBApplicationRecorder):
    verify = None  # type: ignore[assignment]


class WithoutHashAt(LMDBApplicationRecorder):
    hash_at = None  # type: ignore[assignment]


class WithoutRepack(LMDBApplicationRecorder):
    repack = None  # type: ignore[assignment]


class WithoutLogRows(LMDBApplicationRecorder):
    read_log_rows = None  # type: ignore[assignment]


class WithoutSelectStates(LMDBApplicationRecorder):
    select_states = None  # type: ignore[assignment]


class WithoutKeyStoreRecord(LMDBApplicationRecorder):
    bind_key_store = None  # type: ignore[assignment]


class ObservingEventTime(LMDBApplicationRecorder):
    observed: list[datetime] = []

    def observe_event_time(self, moment: datetime) -> None:
        self.observed.append(moment)


class ChainOnly:
    chain = Chain()


class HashAtOnly:
    def hash_at(self, notification_id: int) -> bytes:
        return bytes(32)


class KeyStoreIdentityOnly:
    def key_store_identity(self) -> bytes | None:
        return None


class KeyStoreRecordOnly:
    def bind_key_store(self, identity: bytes) -> None:
        pass


def open_with(path: Path, recorder: type[LMDBApplicationRecorder], **options: Any) -> Membrane:
    env = {"APPLICATION_RECORDER_TOPIC": get_topic(recorder)}
    return Membrane.open(path, sync=False, embedder=None, env=env, **options)


def test_the_backends_declare_what_they_offer(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        recorder = memory.application.recorder
        lmdb = memory.application.abilities
        assert lmdb == Abilities(
            chained=recorder,
            verifier=recorder,
            packer=recorder,
            row_reader=recorder,
            state_reader=recorder,
            key_binder=recorder,
            syncer=recorder,
            import_marker=recorder,
        )
    with Membrane.in_memory(embedder=None) as memory:
        assert memory.application.abilities == Abilities()


# Verifies the chain -------------------------------------------------------------------------


def test_a_log_without_verify_opens_and_says_it_cannot_be_verified(tmp_path: Path) -> None:
    with open_with(tmp_path, WithoutVerify, verify_on_open=True) as memory:
        assert memory.application.abilities.verifier is None
        memory.create_record(random_fact())
        with pytest.raises(MembraneError, match="keeps no hash chain"):
            memory.verify()


# A hash chain: the chain, and its hashes read back -------------------------------------------


def test_a_chain_without_its_hashes_is_refused_where_the_recorder_is_made(tmp_path: Path) -> None:
    with pytest.raises(MembraneError, match="a hash chain by half: it has chain but no hash_at"):
        open_with(tmp_path, WithoutHashAt)
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:  # nothing left held
        assert memory.application.abilities.chained is memory.application.recorder


def test_hashes_without_a_chain_are_refused() -> None:
    with pytest.raises(MembraneError, match="HashAtOnly offers a hash chain by half"):
        abilities_of(HashAtOnly())
    with pytest.raises(MembraneError, match="it has chain but no hash_at"):
        abilities_of(ChainOnly())


# Repacks ------------------------------------------------------------------------------------


def test_a_log_that_does_not_repack_checkpoints_without_it(tmp_path: Path) -> None:
    with open_with(tmp_path, WithoutRepack) as memory:
        assert memory.application.abilities.packer is None
        random_history(memory, random.Random(1), 15)
    with open_with(tmp_path, WithoutRepack) as memory:
        assert_same_views(memory.views, ReadModel.rebuild(memory.application))


# Observes the event time --------------------------------------------------------------------


def test_the_newest_event_time_is_given_to_a_log_that_observes_it(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=None) as memory:
        assert memory.application.abilities.time_keeper is None  # LMDB's head keeps it
        memory.create_record(random_fact())
        newest = memory.application.last_event_time()
    ObservingEventTime.observed.clear()
    with open_with(tmp_path, ObservingEventTime) as memory:
        assert memory.application.abilities.time_keeper is memory.application.recorder
    assert ObservingEventTime.observed == [newest]


# Reads the log as rows ----------------------------------------------------------------------


def test_a_log_without_row_reads_is_replayed_from_its_notifications(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(16)) as memory:
        random_history(memory, random.Random(2), 25)
        by_rows = ReadModel.rebuild(memory.application)
    app = MemoryApplication(
        {
            "PERSISTENCE_MODULE": "membrane_es.stores.lmdb",
            "LMDB_PATH": str(tmp_path),
            "APPLICATION_RECORDER_TOPIC": get_topic(WithoutLogRows),
        }
    )
    try:
        assert app.abilities.row_reader is None
        assert_same_views(ReadModel.rebuild(app), by_rows)
    finally:
        app.close()


# Selects states by key ----------------------------------------------------------------------


def test_vectors_are_restored_by_scanning_a_log_without_reads_by_key(tmp_path: Path) -> None:
    embedder = HashingEmbedder(16)
    with Membrane.open(tmp_path, sync=False, embedder=embedder) as memory:
        random_history(memory, random.Random(3), 30)
    env = {"APPLICATION_RECORDER_TOPIC": get_topic(WithoutSelectStates)}
    with Membrane.open(tmp_path, sync=False, embedder=embedder, env=env) as memory:
        assert memory.application.abilities.state_reader is None
        saved = ReadModel.load(tmp_path / "views", memory.application)
        assert saved is not None
        assert_same_views(saved, ReadModel.rebuild(memory.application))


# Binds the key store ------------------------------------------------------------------------


def test_a_key_store_identity_that_cannot_be_recorded_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        MembraneError,
        match="a key store binding by half: it has key_store_identity but no bind_key_store",
    ):
        open_with(tmp_path, WithoutKeyStoreRecord)


def test_a_half_key_store_binding_is_refused_either_way() -> None:
    with pytest.raises(MembraneError, match="it has bind_key_store but no key_store_identity"):
        abilities_of(KeyStoreRecordOnly())
    with pytest.raises(MembraneError, match="it has key_store_identity but no bind_key_store"):
        abilities_of(KeyStoreIdentityOnly())


def test_a_log_that_keeps_no_binding_is_left_alone() -> None:
    """eventsourcing's in-memory recorder offers none of the abilities, and opens."""
    assert abilities_of(POPOApplicationRecorder()) == Abilities()
    with Membrane.in_memory(embedder=None) as memory:
        assert memory.application.abilities.key_binder is None
        memory.create_record(random_fact())


def random_fact() -> dict[str, Any]:
    return {
        "type": "semantic",
        "scope": "project:a",
        "payload": {"kind": "semantic", "subject": "s", "predicate": "is", "object": "o"},
        "provenance": {"sources": [{"kind": "observation", "ref": "o"}]},
    }

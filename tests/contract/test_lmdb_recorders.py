"""eventsourcing's shipped persistence, application and projection suites, run on LMDB."""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from typing import TYPE_CHECKING, Any
from unittest import TestCase, mock
from uuid import uuid4

import pytest
from eventsourcing.persistence import (
    InfrastructureFactory,
    ProgrammingError,
    StoredEvent,
    Tracking,
)
from eventsourcing.tests.application import ApplicationTestCase, ExampleApplicationTestCase
from eventsourcing.tests.persistence import (
    AggregateRecorderTestCase,
    ApplicationRecorderTestCase,
    InfrastructureFactoryTestCase,
    NonInterleavingNotificationIDsBaseCase,
    ProcessRecorderTestCase,
    TrackingRecorderTestCase,
)
from eventsourcing.tests.projection import (
    AggregateEventCountersProjectionTestCase,
    EventCountersView,
    EventCountersViewTestCase,
    EventSourcedProjectionTestCase,
    TaggedDecisionCountersProjectionTestCase,
)
from eventsourcing.utils import Environment, get_topic

from membrane_es.stores.lmdb.recorders import (
    LMDBAggregateRecorder,
    LMDBApplicationRecorder,
    LMDBFactory,
    LMDBProcessRecorder,
    LMDBTrackingRecorder,
    open_environment,
)

if TYPE_CHECKING:
    from membrane_es.stores.lmdb.environment import Txn

MODULE = "membrane_es.stores.lmdb"
_COUNT = struct.Struct(">Q")


class TempDirMixin(TestCase):
    """Gives each test its own LMDB directory, removed after the test's recorders close."""

    sync = True

    def setUp(self) -> None:
        self.lmdb_path = tempfile.mkdtemp(prefix="lmdb-contract-")
        self.addCleanup(shutil.rmtree, self.lmdb_path, ignore_errors=True)
        super().setUp()

    def open_recorder(self, cls: type[Any], *args: Any) -> Any:
        store = open_environment(self.lmdb_path, sync=self.sync)
        try:
            recorder = cls(store, *args)
        finally:
            store.release()  # the recorder holds its own share
        recorder.create_table()
        self.addCleanup(recorder.close)
        return recorder


# Recorders ---------------------------------------------------------------------------


class TestLMDBAggregateRecorder(TempDirMixin, AggregateRecorderTestCase):
    def create_recorder(self) -> LMDBAggregateRecorder:
        return self.open_recorder(LMDBAggregateRecorder, "app", "events")


class TestLMDBSnapshotRecorder(TempDirMixin, AggregateRecorderTestCase):
    def create_recorder(self) -> LMDBAggregateRecorder:
        return self.open_recorder(LMDBAggregateRecorder, "app", "snapshots")


class TestLMDBAggregateRecorderStrIDs(TestLMDBAggregateRecorder):
    def new_originator_id(self) -> str:
        return f"memory-{uuid4()}"


class TestLMDBApplicationRecorder(
    TempDirMixin, ApplicationRecorderTestCase[LMDBApplicationRecorder]
):
    def create_recorder(self) -> LMDBApplicationRecorder:
        return self.open_recorder(LMDBApplicationRecorder, "app")

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestLMDBApplicationRecorderStrIDs(TestLMDBApplicationRecorder):
    def new_originator_id(self) -> str:
        return f"memory-{uuid4()}"


class TestLMDBApplicationRecorderNoSync(TestLMDBApplicationRecorder):
    """The same suite with unsynced commits, for comparison of the printed figures."""

    sync = False


class TestLMDBTrackingRecorder(TempDirMixin, TrackingRecorderTestCase):
    def create_recorder(self) -> LMDBTrackingRecorder:
        return self.open_recorder(LMDBTrackingRecorder, "view")


class TestLMDBProcessRecorder(TempDirMixin, ProcessRecorderTestCase):
    def create_recorder(self) -> LMDBProcessRecorder:
        return self.open_recorder(LMDBProcessRecorder, "app")


class TestLMDBNonInterleavingNotificationIDs(TempDirMixin, NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> LMDBApplicationRecorder:
        return self.open_recorder(LMDBApplicationRecorder, "app")


# Factory -----------------------------------------------------------------------------


class LMDBTrackingRecorderSubclass(LMDBTrackingRecorder):
    pass


class LMDBApplicationRecorderSubclass(LMDBApplicationRecorder):
    pass


class LMDBProcessRecorderSubclass(LMDBProcessRecorder):
    pass


class TestLMDBInfrastructureFactory(InfrastructureFactoryTestCase[LMDBFactory]):
    def setUp(self) -> None:
        self.lmdb_path = tempfile.mkdtemp(prefix="lmdb-factory-")
        self.addCleanup(shutil.rmtree, self.lmdb_path, ignore_errors=True)
        # The upstream setUp constructs the factory from self.env.
        self.env = Environment(
            "TestCase", {"PERSISTENCE_MODULE": MODULE, "LMDB_PATH": self.lmdb_path}
        )
        super().setUp()

    def expected_factory_class(self) -> type[LMDBFactory]:
        return LMDBFactory

    def expected_aggregate_recorder_class(self) -> type[LMDBAggregateRecorder]:
        return LMDBAggregateRecorder

    def expected_application_recorder_class(self) -> type[LMDBApplicationRecorder]:
        return LMDBApplicationRecorder

    def expected_tracking_recorder_class(self) -> type[LMDBTrackingRecorder]:
        return LMDBTrackingRecorder

    def tracking_recorder_subclass(self) -> type[LMDBTrackingRecorder]:
        return LMDBTrackingRecorderSubclass

    def expected_process_recorder_class(self) -> type[LMDBProcessRecorder]:
        return LMDBProcessRecorder

    def test_recorder_classes_chosen_by_topic(self) -> None:
        self.env["APPLICATION_RECORDER_TOPIC"] = get_topic(LMDBApplicationRecorderSubclass)
        self.env["PROCESS_RECORDER_TOPIC"] = get_topic(LMDBProcessRecorderSubclass)
        self.assertIs(type(self.factory.application_recorder()), LMDBApplicationRecorderSubclass)
        self.assertIs(type(self.factory.process_recorder()), LMDBProcessRecorderSubclass)

    def test_missing_path_is_an_environment_error(self) -> None:
        with self.assertRaises(OSError):
            InfrastructureFactory.construct({"PERSISTENCE_MODULE": MODULE})

    def test_create_table_off_reads_empty_and_refuses_writes(self) -> None:
        self.env.name = "Untouched"
        self.env["CREATE_TABLE"] = "f"
        recorder = self.factory.application_recorder()
        self.assertIsNone(recorder.max_notification_id())
        self.assertEqual(recorder.select_notifications(None, 10), [])
        with self.assertRaises(ProgrammingError):
            recorder.insert_events([StoredEvent(uuid4(), 1, "t", b"s")])

    def test_applications_share_one_environment(self) -> None:
        other = InfrastructureFactory.construct(Environment("Other", dict(self.env)))
        assert isinstance(other, LMDBFactory)
        self.assertIs(other.store, self.factory.store)
        recorder = other.application_recorder()
        other.close()
        # Closing one factory leaves the shared environment open for the other.
        self.assertFalse(self.factory.store.closed)
        self.assertIsNone(self.factory.application_recorder().max_notification_id())
        del recorder


# Applications ------------------------------------------------------------------------


class LMDBEnvironMixin(TempDirMixin):
    """Selects the LMDB module through os.environ, restored exactly after each test."""

    def setUp(self) -> None:
        super().setUp()
        patcher = mock.patch.dict(
            os.environ, {"PERSISTENCE_MODULE": MODULE, "LMDB_PATH": self.lmdb_path}
        )
        patcher.start()
        self.addCleanup(patcher.stop)


# pyproject ignores DeprecationWarning, but test_application_log records one.
@pytest.mark.filterwarnings("always::DeprecationWarning")
class TestApplicationWithLMDB(LMDBEnvironMixin, ApplicationTestCase):
    pass


class TestExampleApplicationWithLMDB(LMDBEnvironMixin, ExampleApplicationTestCase):
    expected_factory_topic = "membrane_es.stores.lmdb.recorders:LMDBFactory"


# Projections -------------------------------------------------------------------------


class LMDBEventCounters(LMDBTrackingRecorder, EventCountersView):
    """The upstream event-counters view, kept in an LMDB sub-database."""

    view_tables = ("counters",)

    def get_created_event_counter(self) -> int:
        return self._get(b"created")

    def get_subsequent_event_counter(self) -> int:
        return self._get(b"subsequent")

    def incr_created_event_counter(self, tracking: Tracking) -> None:
        self._incr(b"created", tracking)

    def incr_subsequent_event_counter(self, tracking: Tracking) -> None:
        self._incr(b"subsequent", tracking)

    def _get(self, key: bytes) -> int:
        db = self.view_db("counters")
        value = self.read(lambda txn: txn.get(key, db=db))
        return 0 if value is None else int(_COUNT.unpack(value)[0])

    def _incr(self, key: bytes, tracking: Tracking) -> None:
        db = self.view_db("counters")

        def update(txn: Txn) -> None:
            value = txn.get(key, db=db)
            count = 0 if value is None else _COUNT.unpack(value)[0]
            txn.put(key, _COUNT.pack(count + 1), db=db)

        self.write_tracked(tracking, update)


class TestLMDBEventCountersView(TempDirMixin, EventCountersViewTestCase):
    def construct_event_counters_view(self) -> EventCountersView:
        factory = InfrastructureFactory.construct(
            Environment(
                "eventcounters", {"PERSISTENCE_MODULE": MODULE, "LMDB_PATH": self.lmdb_path}
            )
        )
        self.addCleanup(factory.close)
        return factory.tracking_recorder(LMDBEventCounters)


class TestLMDBAggregateEventCountersProjection(
    TempDirMixin, AggregateEventCountersProjectionTestCase
):
    view_class = LMDBEventCounters

    def setUp(self) -> None:
        super().setUp()
        self.env = {"PERSISTENCE_MODULE": MODULE, "LMDB_PATH": self.lmdb_path}


class TestLMDBTaggedDecisionCountersProjection(
    TempDirMixin, TaggedDecisionCountersProjectionTestCase
):
    """The DCB application stays in memory (this module has no DCB recorder); the
    projection's view, named 'eventcounters', is on LMDB."""

    view_class = LMDBEventCounters

    def setUp(self) -> None:
        super().setUp()
        self.env = {
            "PERSISTENCE_MODULE": "eventsourcing.dcb.popo:InMemoryDCBFactory",
            "MAPPER_TOPIC": "eventsourcing.dcb.msgpack:MessagePackMapper",
            "EVENTCOUNTERS_PERSISTENCE_MODULE": MODULE,
            "EVENTCOUNTERS_LMDB_PATH": self.lmdb_path,
        }


class TestLMDBEventSourcedProjection(TempDirMixin, EventSourcedProjectionTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.env = {"PERSISTENCE_MODULE": MODULE, "LMDB_PATH": self.lmdb_path}


# Keep pytest from collecting the abstract upstream bases imported above.
del AggregateRecorderTestCase
del ApplicationRecorderTestCase
del TrackingRecorderTestCase
del ProcessRecorderTestCase
del NonInterleavingNotificationIDsBaseCase
del InfrastructureFactoryTestCase
del ApplicationTestCase
del ExampleApplicationTestCase
del EventCountersViewTestCase
del AggregateEventCountersProjectionTestCase
del TaggedDecisionCountersProjectionTestCase
del EventSourcedProjectionTestCase

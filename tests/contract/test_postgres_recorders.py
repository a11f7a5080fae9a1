"""eventsourcing's shipped recorder, factory and application suites, run on the PostgreSQL
store (``membrane_es.stores.postgres``): its application recorder is this package's chained
one, the others are eventsourcing's own. Each test has a database of its own on the server
``MEMBRANE_TEST_POSTGRES_DSN`` names (``.ci/with-postgres`` starts one); without it they skip.
"""

from __future__ import annotations

import os
from unittest import TestCase, mock
from uuid import uuid4

import pytest
from eventsourcing.persistence import InfrastructureFactory, StoredEvent
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresProcessRecorder,
    PostgresTrackingRecorder,
)
from eventsourcing.tests.application import ApplicationTestCase, ExampleApplicationTestCase
from eventsourcing.tests.persistence import (
    ApplicationRecorderTestCase,
    InfrastructureFactoryTestCase,
    NonInterleavingNotificationIDsBaseCase,
)
from eventsourcing.utils import Environment

from membrane_es.stores.abilities import Abilities, abilities_of
from membrane_es.stores.postgres.database import postgres_settings
from membrane_es.stores.postgres.recorders import (
    ChainedApplicationRecorder,
    ChainedPostgresFactory,
)


class PostgresDatabaseMixin(TestCase):
    """Gives each test the settings of an empty database of its own."""

    settings: dict[str, str]

    @pytest.fixture(autouse=True)
    def _database(self, postgres_dsn: str) -> None:
        self.settings = postgres_settings(postgres_dsn)

    def factory(self, name: str = "app") -> ChainedPostgresFactory:
        factory = InfrastructureFactory.construct(Environment(name, self.settings))
        assert isinstance(factory, ChainedPostgresFactory)
        self.addCleanup(factory.close)
        return factory


# Recorders ---------------------------------------------------------------------------


class TestChainedApplicationRecorder(
    PostgresDatabaseMixin, ApplicationRecorderTestCase[ChainedApplicationRecorder]
):
    def create_recorder(self) -> ChainedApplicationRecorder:
        return self.factory().application_recorder()

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestChainedApplicationRecorderStrIDs(TestChainedApplicationRecorder):
    def setUp(self) -> None:
        self.settings = {**self.settings, "ORIGINATOR_ID_TYPE": "text"}
        super().setUp()

    def new_originator_id(self) -> str:
        return f"memory-{uuid4()}"


class TestChainedNonInterleavingNotificationIDs(
    PostgresDatabaseMixin, NonInterleavingNotificationIDsBaseCase
):
    def create_recorder(self) -> ChainedApplicationRecorder:
        return self.factory().application_recorder()


class TestChainedRecorderAbilities(PostgresDatabaseMixin):
    def test_the_chained_recorder_declares_what_it_offers(self) -> None:
        recorder = self.factory().application_recorder()
        self.assertEqual(
            abilities_of(recorder),
            Abilities(
                chained=recorder,
                verifier=recorder,
                time_keeper=recorder,
                row_reader=recorder,
                import_marker=recorder,
            ),
        )

    def test_log_rows_are_the_notifications_read_leaner(self) -> None:
        recorder = self.factory().application_recorder()
        recorder.create_table()
        events = [
            StoredEvent(uuid4(), 1, f"topic-{i % 3}", f"state {i}".encode()) for i in range(7)
        ]
        for event in events:
            recorder.insert_events([event])
        notifications = recorder.select_notifications(1, 100)
        for start, limit, stop in [(1, 100, None), (0, 3, None), (3, 2, None), (2, 100, 5)]:
            rows = recorder.read_log_rows(start, limit, stop)
            wanted = [n for n in notifications if n.id >= start and (stop is None or n.id <= stop)][
                :limit
            ]
            self.assertEqual(rows.ids, [n.id for n in wanted])
            self.assertEqual(rows.topics, [n.topic for n in wanted])
            self.assertEqual(rows.states, [n.state for n in wanted])
            self.assertEqual(len(rows), len(wanted))
            for index, notification in enumerate(wanted):
                self.assertEqual(rows.originator_id(index), notification.originator_id)
                self.assertEqual(rows.originator_version(index), notification.originator_version)
        self.assertEqual(len(recorder.read_log_rows(1, 0)), 0)
        self.assertEqual(len(recorder.read_log_rows(100, 10)), 0)


# Factory -----------------------------------------------------------------------------


class PostgresTrackingRecorderSubclass(PostgresTrackingRecorder):
    pass


class TestChainedPostgresFactory(
    PostgresDatabaseMixin, InfrastructureFactoryTestCase[ChainedPostgresFactory]
):
    def setUp(self) -> None:
        # The upstream setUp constructs the factory from self.env.
        self.env = Environment("TestCase", self.settings)
        super().setUp()

    def expected_factory_class(self) -> type[ChainedPostgresFactory]:
        return ChainedPostgresFactory

    def expected_aggregate_recorder_class(self) -> type[PostgresAggregateRecorder]:
        return PostgresAggregateRecorder

    def expected_application_recorder_class(self) -> type[ChainedApplicationRecorder]:
        return ChainedApplicationRecorder

    def expected_tracking_recorder_class(self) -> type[PostgresTrackingRecorder]:
        return PostgresTrackingRecorder

    def tracking_recorder_subclass(self) -> type[PostgresTrackingRecorder]:
        return PostgresTrackingRecorderSubclass

    def expected_process_recorder_class(self) -> type[PostgresProcessRecorder]:
        return PostgresProcessRecorder


# Applications ------------------------------------------------------------------------


class PostgresEnvironMixin(PostgresDatabaseMixin):
    """Selects the PostgreSQL module through os.environ, restored exactly after each test."""

    def setUp(self) -> None:
        patcher = mock.patch.dict(os.environ, self.settings)
        patcher.start()
        self.addCleanup(patcher.stop)
        super().setUp()


# pyproject ignores DeprecationWarning, but test_application_log records one.
@pytest.mark.filterwarnings("always::DeprecationWarning")
class TestApplicationWithPostgres(PostgresEnvironMixin, ApplicationTestCase):
    pass


class TestExampleApplicationWithPostgres(PostgresEnvironMixin, ExampleApplicationTestCase):
    expected_factory_topic = "membrane_es.stores.postgres.recorders:ChainedPostgresFactory"


# Keep pytest from collecting the abstract upstream bases imported above.
del ApplicationRecorderTestCase
del NonInterleavingNotificationIDsBaseCase
del InfrastructureFactoryTestCase
del ApplicationTestCase
del ExampleApplicationTestCase

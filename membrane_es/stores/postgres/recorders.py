"""The PostgreSQL log with the guarantees of the LMDB one: a hash chain, and event times in
log order across every process that writes to it.

eventsourcing's ``PostgresApplicationRecorder`` already serialises writers: each insert takes
an ``EXCLUSIVE`` lock on the events table, so notification ids are handed out in commit
order. :class:`ChainedApplicationRecorder` does two more things under that same lock, in the
same transaction as the events (so both are total across writers, and a rolled-back insert
leaves neither behind):

* it appends each event's chain hash to ``<app>_chain`` (notification id → hash) and moves the
  log's head (``<app>_log_head``: last id, its hash, the newest event time);
* it refuses a write whose first event is not later than the newest one in the log
  (:class:`EventTimeBehind`, a concurrent write: eventsourcing's ``IntegrityError``): a
  writer whose clock is behind another's then retries with its clock moved past the log's
  time, so event times never go backwards along the log, and ``as_of(T)`` always sees a
  prefix of it. Events written with the times they already had (an import:
  ``LogStamp.imported_time``) move the log's time up to the newest of them; a log chained
  after the fact gets its newest event's time from the engine that opens it
  (:meth:`ChainedApplicationRecorder.observe_event_time`), which decodes it.

While an import fills the log, a row in ``<app>_import`` marks it (see
:mod:`membrane_es.stores.transfer`): a log an import left part-written is told from a whole
one, and :meth:`ChainedApplicationRecorder.discard_log` empties it for the import to start
over.

The chain hash is every store's (:class:`membrane_es.stores.chain.Chain`: plain, or keyed
with ``POSTGRES_CHAIN_KEY``) over the same fields; PostgreSQL's ids may have gaps (a
rolled-back insert consumes them), so each hash links to the previous notification that
exists. :meth:`ChainedApplicationRecorder.verify`
walks the chain and reports the first altered, missing or unlogged event.

Selected with ``PERSISTENCE_MODULE=membrane_es.stores.postgres.recorders:ChainedPostgresFactory``
(the settings of :func:`membrane_es.stores.postgres.database.postgres_settings`); every other
setting is eventsourcing's PostgreSQL module's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import (
    AggregateRecorder,
    InterfaceError,
    OperationalError,
    ProcessRecorder,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.postgres import (
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresFactory,
    TPostgresTrackingRecorder,
)
from eventsourcing.utils import retry, strtobool
from psycopg.errors import DuplicateObject
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier, Literal

from membrane_es.errors import IntegrityError, MembraneError, StoreNotFoundError
from membrane_es.stores.chain import (
    GENESIS,
    Chain,
    ChainFault,
    ChainReport,
    check_span,
    originator_key,
    span_of,
    version_suffix,
)
from membrane_es.stores.event_times import EventTimeBehind
from membrane_es.stores.log_stamp import stamp_of
from membrane_es.stores.postgres.database import (
    MUST_EXIST,
    ensure_schema,
    has_store,
    store_location,
)
from membrane_es.stores.record_numbers import INITIAL_VERSION, check_numbers, creations

if TYPE_CHECKING:
    from eventsourcing.utils import Environment, EnvType
    from psycopg import Connection, Cursor
    from psycopg.rows import DictRow

VERIFY_CHUNK = 1000
# A store's connection pool: its worker threads, and how long a connection above the pool's
# size may stay idle before it is closed.
POOL_WORKERS = 1
POOL_IDLE_SECONDS = 60.0
# Marks (as the events table's comment) a store whose tables are made as this version makes
# them: an open that finds it runs no DDL. Change it with any statement added to the tables'
# creation, so stores made before run the creation (all IF NOT EXISTS) once more.
TABLES_VERSION = "membrane_es tables 1"


class ChainedDatastore(PostgresDatastore):
    """eventsourcing's datastore, looking its composite types up only for recorders that
    use them: the chained recorder inserts events as arrays of plain types. eventsourcing
    looks the type up when any recorder is made (a catalogue query on a new connection, tens
    of milliseconds at every open), and every store is in a schema of its own, with a type
    of its own. Its other recorders (snapshots, tracking) set :attr:`composite_types`."""

    composite_types = False

    def register_type_adapters(self) -> None:
        if self.composite_types:
            super().register_type_adapters()


class ChainedApplicationRecorder(PostgresApplicationRecorder):
    """eventsourcing's PostgreSQL application recorder, plus the hash chain and the check
    that event times follow log order."""

    def __init__(
        self,
        datastore: PostgresDatastore,
        *,
        events_table_name: str = "stored_events",
        chain: Chain | None = None,
    ):
        super().__init__(datastore, events_table_name=events_table_name)
        self.chain = chain or Chain()
        prefix = events_table_name.removesuffix("_events")
        self.chain_table_name = f"{prefix}_chain"
        self.head_table_name = f"{prefix}_log_head"
        self.import_table_name = f"{prefix}_import"
        for name in (self.chain_table_name, self.head_table_name, self.import_table_name):
            self.check_identifier_length(name)
        schema = Identifier(self.datastore.schema)
        chain_table = Identifier(self.chain_table_name)
        head = Identifier(self.head_table_name)
        import_table = Identifier(self.import_table_name)
        self.sql_create_statements += [
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{chain} ("
                "notification_id bigint PRIMARY KEY, hash bytea NOT NULL)"
            ).format(schema=schema, chain=chain_table),
            # One row: the chain's head, and the newest event time in the log.
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{head} ("
                "one boolean PRIMARY KEY DEFAULT true CHECK (one), "
                "notification_id bigint NOT NULL, hash bytea NOT NULL, "
                "event_time timestamptz)"
            ).format(schema=schema, head=head),
            # How the chain links (plain, or keyed and the key's fingerprint), as on LMDB.
            SQL("ALTER TABLE {schema}.{head} ADD COLUMN IF NOT EXISTS chain_mode bytea").format(
                schema=schema, head=head
            ),
            # How many records the log holds (null: not counted yet, a log from before).
            SQL("ALTER TABLE {schema}.{head} ADD COLUMN IF NOT EXISTS records bigint").format(
                schema=schema, head=head
            ),
            # One row while an import fills the log.
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{marker} ("
                "one boolean PRIMARY KEY DEFAULT true CHECK (one))"
            ).format(schema=schema, marker=import_table),
        ]
        id_type = SQL(self.datastore.originator_id_type)  # "uuid" or "text", checked by it
        self._insert_columns = SQL(
            "INSERT INTO {schema}.{events} (originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest(%s::{id_type}[], %s::bigint[], %s::text[], %s::bytea[]) "
            "RETURNING notification_id"
        ).format(schema=schema, events=Identifier(self.events_table_name), id_type=id_type)
        self._tables_version = SQL(
            "SELECT obj_description(r, 'pg_class') AS v, r::oid AS oid"
            " FROM (SELECT to_regclass(%s) AS r) AS t"
        )
        # The events table's OID, once an open found the tables made (None until then).
        self.log_oid: int | None = None
        self._events_table_name = f'"{self.datastore.schema}"."{self.events_table_name}"'
        self._mark_tables = SQL("COMMENT ON TABLE {schema}.{events} IS {version}").format(
            schema=schema,
            events=Identifier(self.events_table_name),
            version=Literal(TABLES_VERSION),
        )
        self._tables_lock_key = f"membrane_es tables {self.datastore.schema}"
        # A store whose tables were made before the mark existed, read without making any
        # (verify), has no such table: no import is under way in it.
        self._import_table_exists = SQL("SELECT to_regclass(%s) IS NOT NULL AS present")
        self._import_table_name = f'"{self.datastore.schema}"."{self.import_table_name}"'
        self._select_import = SQL("SELECT one FROM {schema}.{marker}").format(
            schema=schema, marker=import_table
        )
        self._mark_import = SQL(
            "INSERT INTO {schema}.{marker} DEFAULT VALUES ON CONFLICT DO NOTHING"
        ).format(schema=schema, marker=import_table)
        self._unmark_import = SQL("DELETE FROM {schema}.{marker}").format(
            schema=schema, marker=import_table
        )
        # The ids start at 1 again, as in a new log.
        self._empty_log = SQL(
            "TRUNCATE {schema}.{events}, {schema}.{chain}, {schema}.{head}, {schema}.{marker} "
            "RESTART IDENTITY"
        ).format(
            schema=schema,
            events=Identifier(self.events_table_name),
            chain=chain_table,
            head=head,
            marker=import_table,
        )
        self._select_head = SQL(
            "SELECT notification_id, hash, event_time, chain_mode, records FROM {schema}.{head}"
        ).format(schema=schema, head=head)
        # Only ever forwards: a concurrent writer's newer time is never replaced by an older one.
        self._raise_time = SQL(
            "UPDATE {schema}.{head} SET event_time = %s WHERE event_time IS NULL OR event_time < %s"
        ).format(schema=schema, head=head)
        self._set_records = SQL("UPDATE {schema}.{head} SET records = %s").format(
            schema=schema, head=head
        )
        self._select_hash = SQL(
            "SELECT hash FROM {schema}.{chain} WHERE notification_id = %s"
        ).format(schema=schema, chain=chain_table)
        # The link a range of the log follows on from: the last one before it.
        self._select_hash_before = SQL(
            "SELECT hash FROM {schema}.{chain} WHERE notification_id < %s "
            "ORDER BY notification_id DESC LIMIT 1"
        ).format(schema=schema, chain=chain_table)
        self._insert_chain = SQL(
            "INSERT INTO {schema}.{chain} (notification_id, hash) "
            "SELECT * FROM unnest(%s::bigint[], %s::bytea[])"
        ).format(schema=schema, chain=chain_table)
        self._upsert_head = SQL(
            "INSERT INTO {schema}.{head} (one, notification_id, hash, event_time, chain_mode) "
            "VALUES (true, %s, %s, %s, %s) ON CONFLICT (one) DO UPDATE SET "
            "notification_id = EXCLUDED.notification_id, hash = EXCLUDED.hash, "
            "event_time = GREATEST(EXCLUDED.event_time, {head}.event_time), "
            "chain_mode = EXCLUDED.chain_mode"
        ).format(schema=schema, head=head)
        events = Identifier(self.events_table_name)
        # Events and chain rows side by side, so a row missing on either side shows.
        self._select_chained = SQL(
            "SELECT notification_id, e.originator_id, e.originator_version, e.topic, "
            "e.state, c.hash FROM {schema}.{events} e "
            "FULL JOIN {schema}.{chain} c USING (notification_id) "
            "WHERE notification_id > %s AND notification_id <= %s "
            "ORDER BY notification_id LIMIT %s"
        ).format(schema=schema, events=events, chain=chain_table)
        self._select_unchained = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state "
            "FROM {schema}.{events} WHERE notification_id > %s "
            "ORDER BY notification_id LIMIT %s"
        ).format(schema=schema, events=events)
        self._count_records = SQL(
            "SELECT count(*) AS n FROM {schema}.{events} WHERE originator_version = %s"
        ).format(schema=schema, events=events)
        # Wakes the log's subscribers (eventsourcing's, which LISTEN on this channel).
        self._wake_subscribers = SQL("NOTIFY {channel}").format(
            channel=Identifier(self.channel_name)
        )
        self._count_after = SQL(
            "SELECT count(*) AS n FROM {schema}.{events} WHERE notification_id > %s"
        ).format(schema=schema, events=events)
        # The log as raw columns (what a bulk replay and the change feed decode), as tuples
        # with the originator as text — no Notification, UUID or dict per row, which cost
        # about as much as decoding the event.
        self._select_rows = SQL(
            "SELECT notification_id, topic, state, originator_id::text, originator_version "
            "FROM {schema}.{events} "
            "WHERE notification_id >= %s AND notification_id <= %s "
            "ORDER BY notification_id LIMIT %s"
        ).format(schema=schema, events=events)

    def create_table(self, *, must_exist: bool = False, location: str = "") -> None:
        """Make the store's tables (and its schema), unless they are made as this version
        makes them (the usual open of an existing store: one catalogue query, no DDL); then
        chain a log written without a chain, and check the chain's key. With
        ``must_exist``, a schema holding no log is a StoreNotFoundError (``location``
        names it) and nothing is made."""
        if not self._tables_made():
            if must_exist and not self._log_exists():
                raise StoreNotFoundError(location or self._events_table_name)
            self._make_tables()
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._select_head)
            head = curs.fetchone()
        if head is not None and head["notification_id"]:
            self._check_mode(head)  # chained already (the usual case): the head read once
            return
        self._chain_unchained_log()
        self.check_chain_mode()

    def _log_exists(self) -> bool:
        with self.datastore.get_connection() as conn:
            return has_store(
                conn, {"POSTGRES_SCHEMA": self.datastore.schema}, self.events_table_name
            )

    def _tables_made(self) -> bool:
        """Whether the tables carry this version's mark; notes the events table's OID
        (:attr:`log_oid`, part of the store's identity) when they do."""
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._tables_version, (self._events_table_name,))
            row = curs.fetchone()
        made = row is not None and row["v"] == TABLES_VERSION
        if made:
            assert row is not None
            self.log_oid = int(row["oid"])
        return made

    def _make_tables(self) -> None:
        """The tables' creation, under a lock (an advisory one, per schema): processes
        opening a new store at the same moment would otherwise run eventsourcing's ``CREATE
        OR REPLACE FUNCTION`` at once, and PostgreSQL refuses one of them ("tuple
        concurrently updated"). The one that waited finds the tables made."""
        with self.datastore.get_connection() as conn:
            conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (self._tables_lock_key,))
            try:
                if not self._tables_made():
                    # The schema first (eventsourcing makes tables, not schemas), on this
                    # connection: an open makes no connection of its own for it.
                    ensure_schema(conn, self.datastore.schema)
                    self._create_tables(conn)
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (self._tables_lock_key,))

    def check_chain_mode(self) -> None:
        """Refuse a chain key the log was not chained with (or a missing one)."""
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._select_head)
            row = curs.fetchone()
        if row is not None:
            self._check_mode(row)

    def _check_mode(self, head: DictRow) -> None:
        mode = head["chain_mode"]
        self.chain.check_mode(None if mode is None else bytes(mode))

    def hash_at(self, notification_id: int) -> bytes:
        """The chain hash notification ``notification_id`` holds (the genesis value for 0),
        which a read-view checkpoint taken there is tied to;
        :class:`~membrane_es.errors.IntegrityError` if the chain has no such link."""
        if notification_id == 0:
            return GENESIS
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._select_hash, (notification_id,))
            row = curs.fetchone()
        if row is None:
            raise IntegrityError(
                f"notification {notification_id} is missing from the hash chain", notification_id
            )
        return bytes(row["hash"])

    def import_unfinished(self) -> bool:
        """Whether an import began filling this log and did not end."""
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._import_table_exists, (self._import_table_name,))
            row = curs.fetchone()
            if row is None or not row["present"]:
                return False
            curs.execute(self._select_import)
            return curs.fetchone() is not None

    def mark_import(self, unfinished: bool) -> None:
        """Mark the log as being filled by an import, or no longer."""
        statement = self._mark_import if unfinished else self._unmark_import
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            curs.execute(statement)

    def discard_log(self) -> None:
        """Empty the log (events, chain, head) and its import mark in one transaction, under
        the writers' lock."""
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            self._lock_log(curs)
            curs.execute(self._empty_log)

    def _create_tables(self, conn: Connection[DictRow]) -> None:
        """eventsourcing's ``create_table`` on the connection holding the lock (not others
        from the pool, which may have no more to give), and the mark, with the tables."""
        for statement in self.sql_create_statements:
            if "CREATE TYPE" in statement.as_string():
                # A transaction of its own: a type has no IF NOT EXISTS.
                with contextlib.suppress(DuplicateObject), conn.transaction():
                    conn.execute(statement, prepare=False)
        with conn.transaction(), conn.cursor() as curs:
            for statement in self.sql_create_statements:
                if "CREATE TYPE" not in statement.as_string():
                    curs.execute(statement, prepare=False)
            curs.execute(self._mark_tables)
        self.datastore.register_type_adapters()

    def _chain_unchained_log(self) -> None:
        """A log written before it had a chain (by eventsourcing's own recorder) gets one, in
        log order, once: under the writers' lock, so no write slips in meanwhile. Its events
        keep the times they have; the newest of them, which only the application can decode,
        is given to the head by :meth:`observe_event_time` when an engine opens the log."""
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            if self._read_head(curs)[0] or not self._has_events(curs):
                return  # chained already, or nothing to chain (the usual cases)
        with (
            self.datastore.get_connection() as conn,
            conn.transaction(),
            conn.cursor() as curs,
        ):
            self._lock_log(curs)
            if self._read_head(curs)[0] or not self._has_events(curs):
                return  # another process chained it first, or there is nothing to chain
            previous, after = GENESIS, 0
            while True:
                curs.execute(self._select_unchained, (after, VERIFY_CHUNK))
                rows = curs.fetchall()
                if not rows:
                    break
                ids, hashes = [], []
                for row in rows:
                    previous = self._link(previous, row["notification_id"], _stored(row))
                    ids.append(row["notification_id"])
                    hashes.append(previous)
                curs.execute(self._insert_chain, (ids, hashes))
                after = ids[-1]
            curs.execute(self._upsert_head, (after, previous, None, self.chain.mode))

    def _has_events(self, curs: Cursor[DictRow]) -> bool:
        curs.execute(self._select_unchained, (0, 1))
        return curs.fetchone() is not None

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int]:
        if not stored_events:
            return []
        stamp = stamp_of(kwargs)
        times = stamp.event_times
        columns = (
            [event.originator_id for event in stored_events],
            [event.originator_version for event in stored_events],
            [event.topic for event in stored_events],
            [event.state for event in stored_events],
        )
        with (
            self.datastore.get_connection() as conn,
            conn.transaction(),
            conn.cursor() as curs,
        ):
            self._lock_log(curs)  # from here to commit, this is the only writer
            _, previous, log_time = self._read_head(curs)
            if times is not None and log_time is not None and times[0] <= log_time:
                raise EventTimeBehind(log_time)  # rolls the transaction back
            records = self._records_after(curs, stored_events, stamp.record_numbers)
            curs.execute(self._wake_subscribers)
            curs.execute(self._insert_columns, columns)
            ids = [int(row["notification_id"]) for row in curs.fetchall()]
            if len(ids) != len(stored_events):
                raise ProgrammingError(
                    f"the log returned {len(ids)} notification ids for {len(stored_events)} events"
                )
            hashes = []
            for notification_id, event in zip(ids, stored_events, strict=True):
                previous = self._link(previous, notification_id, event)
                hashes.append(previous)
            curs.execute(self._insert_chain, (ids, hashes))
            # Imported events keep their times unchecked, but the next write must follow them.
            new_time = stamp.imported_time if times is None else times[1]
            curs.execute(self._upsert_head, (ids[-1], previous, new_time, self.chain.mode))
            curs.execute(self._set_records, (records,))
        return ids

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def read_log_rows(self, start: int, limit: int, stop: int | None = None) -> PostgresLogRows:
        """Up to ``limit`` rows of the log with ``start <= id <= stop``, in log order, as
        columns (:class:`~membrane_es.stores.abilities.LogRows`): the same events
        ``select_notifications`` gives, read leaner."""
        uuids = self.datastore.originator_id_type == "uuid"
        rows = PostgresLogRows([], [], [], [], [], uuids)
        if limit <= 0:
            return rows
        last = _MAX_ID if stop is None else stop
        with (
            self.datastore.get_connection() as conn,
            conn.cursor(row_factory=tuple_row) as curs,
        ):
            curs.execute(self._select_rows, (max(start, 1), last, limit), prepare=True)
            found = curs.fetchall()
        if found:
            columns = map(list, zip(*found, strict=True))
            rows.ids[:], rows.topics[:], rows.states[:], rows.originators[:], rows.versions[:] = (
                columns
            )
        return rows

    def _lock_log(self, curs: Cursor[DictRow]) -> None:
        """Take the writers' lock: the ``EXCLUSIVE`` lock on the events table that
        eventsourcing's recorder takes for each insert (its ``lock_table_statements``), so
        notification ids are handed out in commit order; held until the transaction ends."""
        for statement in self.lock_table_statements:
            curs.execute(statement, prepare=True)

    def _records_after(
        self,
        curs: Cursor[DictRow],
        events: Sequence[StoredEvent],
        numbers: tuple[int, int] | None,
    ) -> int:
        """The log's record count after these events, checking the save's record numbers
        against the count before them (a log from before record numbers is counted here,
        under the writers' lock, once)."""
        curs.execute(self._select_head, prepare=True)
        row = curs.fetchone()
        count = None if row is None else row["records"]
        if count is None:
            curs.execute(self._count_records, (INITIAL_VERSION,))
            counted = curs.fetchone()
            count = 0 if counted is None else int(counted["n"])
        created = creations(event.originator_version for event in events)
        return check_numbers(int(count), numbers, created)

    def _link(self, previous: bytes, notification_id: int, event: StoredEvent) -> bytes:
        key = originator_key(event.originator_id) + version_suffix(event.originator_version)
        topic = event.topic.encode("utf-8")
        return self.chain.link(previous, notification_id, key, topic, event.state)

    def _read_head(self, curs: Cursor[DictRow]) -> tuple[int, bytes, datetime | None]:
        curs.execute(self._select_head, prepare=True)
        row = curs.fetchone()
        if row is None:
            return 0, GENESIS, None
        return int(row["notification_id"]), bytes(row["hash"]), row["event_time"]

    def last_event_time(self) -> datetime | None:
        """The newest event time any writer has put in the log (None for an empty log)."""
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            return self._read_head(curs)[2]

    def observe_event_time(self, moment: datetime) -> None:
        """Make the log's newest event time at least ``moment`` (the newest event's own time,
        decoded by the caller): a head that lacks it (a log chained after the fact) would let
        a writer whose clock is behind put earlier times after those events. Under the
        writers' lock, and only when the head is behind, so an open usually writes nothing."""
        held = self.last_event_time()
        if held is not None and held >= moment:
            return  # the usual case: every write since the log began recorded its times
        with (
            self.datastore.get_connection() as conn,
            conn.transaction(),
            conn.cursor() as curs,
        ):
            self._lock_log(curs)
            curs.execute(self._raise_time, (moment, moment))

    def verify(
        self,
        chunk_size: int = VERIFY_CHUNK,
        *,
        first: int | None = None,
        last: int | None = None,
    ) -> ChainReport:
        """Walk the log up to its head against the hash chain; the report names the first
        altered, missing or unlogged event. ``first``/``last``: the positions from ``first``
        to ``last`` only, the first linked to the hash of the last one before it (positions
        are notification ids, which a rolled back write may leave unused)."""
        check_span(first, last)
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            head_id, head_hash, _ = self._read_head(curs)
            start, end = span_of(first, last, head_id)
            previous = GENESIS
            if start > 1:
                curs.execute(self._select_hash_before, (start,))
                before = curs.fetchone()
                previous = GENESIS if before is None else bytes(before["hash"])
        if first is not None or last is not None:
            return self._verify_span(start, end, head_id, head_hash, previous, chunk_size)
        checked, after = 0, 0
        while after < head_id:
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(self._select_chained, (after, head_id, chunk_size))
                rows = curs.fetchall()
            if not rows:
                break
            for row in rows:
                notification_id = int(row["notification_id"])
                if row["hash"] is None:
                    detail = "an event row has no place in the hash chain"
                    return ChainReport(checked, ChainFault.UNLOGGED, notification_id, detail)
                if row["state"] is None:
                    detail = "the event row it refers to is missing"
                    return ChainReport(checked, ChainFault.MISSING, notification_id, detail)
                expected = self._link(previous, notification_id, _stored(row))
                if expected != bytes(row["hash"]):
                    detail = "content does not match the hash chain"
                    return ChainReport(checked, ChainFault.ALTERED, notification_id, detail)
                previous, checked, after = expected, checked + 1, notification_id
        if previous != head_hash:
            return ChainReport(checked, ChainFault.ALTERED, head_id, "log head does not match")
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            # Rows past the head that no writer chained (a writer commits both or neither).
            head_now, _, _ = self._read_head(curs)
            curs.execute(self._count_after, (head_now,))
            counted = curs.fetchone()
        unlogged = 0 if counted is None else int(counted["n"])
        if unlogged:
            detail = f"{unlogged} event rows are not in the hash chain"
            return ChainReport(checked, ChainFault.UNLOGGED, None, detail)
        return ChainReport(checked, head=previous.hex())

    def _verify_span(
        self, start: int, end: int, head_id: int, head_hash: bytes, previous: bytes, chunk: int
    ) -> ChainReport:
        """:meth:`verify` of the positions from ``start`` to ``end``: each link, and the head
        when the range ends there (rows outside the chain are a fact of the whole log)."""
        checked, after = 0, start - 1
        while after < end:
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(self._select_chained, (after, end, chunk))
                rows = curs.fetchall()
            if not rows:
                break
            for row in rows:
                notification_id = int(row["notification_id"])
                fault: tuple[ChainFault, str] | None = None
                if row["hash"] is None:
                    fault = ChainFault.UNLOGGED, "an event row has no place in the hash chain"
                elif row["state"] is None:
                    fault = ChainFault.MISSING, "the event row it refers to is missing"
                else:
                    expected = self._link(previous, notification_id, _stored(row))
                    if expected != bytes(row["hash"]):
                        fault = ChainFault.ALTERED, "content does not match the hash chain"
                if fault is not None:
                    return ChainReport(
                        checked, fault[0], notification_id, fault[1], first=start, last=end
                    )
                previous, checked, after = expected, checked + 1, notification_id
        if end == head_id and previous != head_hash:
            detail = "log head does not match"
            return ChainReport(checked, ChainFault.ALTERED, head_id, detail, first=start, last=end)
        head = previous.hex() if end == head_id else ""
        return ChainReport(checked, head=head, first=start, last=end)


# The largest id a bigint holds: "no upper bound" in a prepared statement's parameter.
_MAX_ID = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class PostgresLogRows:
    """Rows of the log, column by column (:class:`~membrane_es.stores.abilities.LogRows`).
    Each row's originator is rarely wanted (only where an event is decoded through the
    mapper's own path): it is read as text, made a ``UUID`` when asked for."""

    ids: list[int]
    topics: list[str]
    states: list[bytes]
    originators: list[str]
    versions: list[int]
    uuids: bool  # the store's originator ids are UUIDs (else texts)

    def __len__(self) -> int:
        return len(self.ids)

    def originator_id(self, index: int) -> UUID | str:
        text = self.originators[index]
        return UUID(text) if self.uuids else text

    def originator_version(self, index: int) -> int:
        return self.versions[index]


def _stored(row: DictRow) -> StoredEvent:
    return StoredEvent(
        originator_id=row["originator_id"],
        originator_version=row["originator_version"],
        topic=row["topic"],
        state=bytes(row["state"]),
    )


class _FirstConnection:
    """Makes a store pool's connections (its ``connection_class``), the first one made at
    once, when the store is opened, and handed to the pool when it asks for one."""

    def __init__(self, pool: Any, env: Environment) -> None:
        self._makes = pool.connection_class
        self._lock = threading.Lock()
        kwargs = dict(pool.kwargs)
        kwargs.setdefault("connect_timeout", int(env.get("POSTGRES_CONNECT_TIMEOUT") or "10"))
        where = f"{kwargs.get('host')}:{kwargs.get('port')}"
        try:
            self._made: Any = self._makes.connect(pool.conninfo, **kwargs)
        except psycopg.Error as error:
            raise MembraneError(f"postgres: cannot connect to {where}: {error}") from None

    def connect(self, conninfo: str = "", **kwargs: Any) -> Any:
        with self._lock:
            made, self._made = self._made, None
        if made is not None and not made.closed:
            return made
        return self._makes.connect(conninfo, **kwargs)

    def discard(self) -> None:
        with self._lock:
            made, self._made = self._made, None
        if made is not None:
            made.close()


class ChainedPostgresFactory(PostgresFactory):
    """eventsourcing's PostgreSQL factory, making :class:`ChainedApplicationRecorder`s; the
    setting ``POSTGRES_CHAIN_KEY`` (hex) keys the chain (a MAC, as an LMDB store's with a
    chain key: nobody without the key can recompute it)."""

    POSTGRES_CHAIN_KEY = "POSTGRES_CHAIN_KEY"

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        self.datastore.__class__ = ChainedDatastore  # no type lookup (see its docstring)
        # Set before the pool opens (it opens on first use). psycopg_pool's defaults suit one
        # long-lived pool a process; a daemon opens and closes one per tenant store, so
        # each keeps a single worker thread (not 3: fewer threads started at every open)
        # and gives back a connection a burst added after POOL_IDLE_SECONDS (not 10 min).
        pool = self.datastore.pool
        pool.num_workers = POOL_WORKERS
        pool.max_idle = POOL_IDLE_SECONDS
        # The pool's first connection is made here, at once: an unreachable server or a
        # refused login fails the open now with the server's reason (the pool would retry
        # until its timeout), and the open's queries run on it, with no connection apart.
        self._first = _FirstConnection(pool, self.env)
        pool.connection_class = self._first  # type: ignore[assignment]

    def close(self) -> None:
        try:
            self._first.discard()  # if the pool never took it
        finally:
            super().close()

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        self._use_composite_types()
        return super().aggregate_recorder(purpose)

    def tracking_recorder(
        self, tracking_recorder_class: type[TPostgresTrackingRecorder] | None = None
    ) -> TPostgresTrackingRecorder:
        self._use_composite_types()
        return super().tracking_recorder(tracking_recorder_class)

    def process_recorder(self) -> ProcessRecorder:
        self._use_composite_types()
        return super().process_recorder()

    def _use_composite_types(self) -> None:
        """eventsourcing's own recorders insert through its composite type."""
        assert isinstance(self.datastore, ChainedDatastore)
        self.datastore.composite_types = True

    def application_recorder(self) -> ChainedApplicationRecorder:
        prefix = self.env.name.lower() or "stored"
        recorder = ChainedApplicationRecorder(
            self.datastore, events_table_name=f"{prefix}_events", chain=Chain(self._chain_key())
        )
        if self.env_create_table():
            must_exist = strtobool(self.env.get(MUST_EXIST) or "no")
            recorder.create_table(must_exist=must_exist, location=self._location())
        return recorder

    def _location(self) -> str:
        names = ("POSTGRES_HOST", "POSTGRES_PORT", "POSTGRES_DBNAME", "POSTGRES_SCHEMA")
        return store_location({name: self.env.get(name) or "" for name in names})

    def _chain_key(self) -> bytes | None:
        value = self.env.get(self.POSTGRES_CHAIN_KEY)
        if not value:
            return None
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise MembraneError(f"{self.POSTGRES_CHAIN_KEY} is not hex") from None

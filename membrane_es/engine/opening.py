"""Opening and closing the engine: open a store by its address (LMDB, PostgreSQL or in
memory; a new backend is one more branch of :meth:`Opening.connect`), close it, checkpoint
or rebuild the read side (the state an engine holds is made by
:class:`~membrane_es.engine.core.EngineCore`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Self, Unpack

from membrane_es.engine.addresses import IN_MEMORY, StoreAddress, holds_store
from membrane_es.engine.core import EngineCore
from membrane_es.engine.follower import LogFollower
from membrane_es.engine.options import (
    EngineOptions,
    OptionChoices,
    approximate_from,
    options_of,
)
from membrane_es.engine.store_check import verify_store
from membrane_es.errors import MembraneError, ReadOnlyError, StoreNotFoundError, ValidationError
from membrane_es.projections.read_model import ReadModel
from membrane_es.schema.validation import check_flag, check_path
from membrane_es.stores.chain import ChainReport
from membrane_es.stores.postgres.database import (
    DEFAULT_SCHEMA,
    MUST_EXIST,
    identity_of,
    postgres_settings,
    store_identity,
    stored_bytes,
)
from membrane_es.timekeeping.scheduler import PeriodicTask
from membrane_es.wiring.application import EVENTS_TABLE, MemoryApplication

log = logging.getLogger("membrane_es")

# How often a PostgreSQL process saves its read views (when they moved), in seconds.
DEFAULT_CHECKPOINT_INTERVAL = 60.0


class Opening(EngineCore):
    """Open a store (:meth:`connect` by its address; :meth:`open`, :meth:`open_postgres`,
    :meth:`in_memory` by its kind), close it, checkpoint or rebuild its views."""

    # --- construction -------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        address: str | os.PathLike[str] | StoreAddress,
        options: EngineOptions | None = None,
        *,
        create: bool = True,
        read_only: bool = False,
        follow: bool = True,
        discard_unfinished_import: bool = False,
        create_parents: bool = False,
        **choices: Unpack[OptionChoices],
    ) -> Self:
        """The store at ``address``: a directory (LMDB, :meth:`open`), a PostgreSQL URL
        ``postgresql://user:pw@host/db`` with ``#schema`` after it for a store in another
        schema (:meth:`open_postgres`), or ``:memory:`` (:meth:`in_memory`); or a
        :class:`~membrane_es.engine.addresses.StoreAddress`.

        :param options: what the engine is opened with
            (:class:`~membrane_es.engine.options.EngineOptions`); keyword arguments
            (``embedder=None``…) are put over them.
        :param create: with ``False``, an address that holds no store raises
            :class:`~membrane_es.errors.StoreNotFoundError` and nothing is created there
            (a store in memory never exists before it is opened).
        :param read_only: writes raise :class:`~membrane_es.errors.ReadOnlyError`, nothing
            is checkpointed, and a damaged log opens for forensics (``damage`` says where).
            Not for a store in memory, which starts empty.
        :param follow: (PostgreSQL) apply other processes' writes to this one's views as
            they commit; without it, every read first catches up with the log. Other stores
            catch up at every read.
        :param discard_unfinished_import: a store an import did not finish (it holds part of
            a file: opening it otherwise raises :class:`~membrane_es.errors.IntegrityError`)
            is emptied first — the events and keys that import wrote — so
            :meth:`import_log` can load a file into it again. Any other store opens as it
            is. Not with ``read_only``.
        :param create_parents: (a directory) make the directories a new store's path needs,
            as :meth:`open`'s.
        """
        where = StoreAddress.parse(address)
        options = options_of(options, choices)
        check_flag("create", create)
        check_flag("read_only", read_only)
        check_flag("follow", follow)
        check_flag("discard_unfinished_import", discard_unfinished_import)
        check_flag("create_parents", create_parents)
        if where.path is not None:
            return cls.open(
                where.path,
                options,
                create=create,
                read_only=read_only,
                discard_unfinished_import=discard_unfinished_import,
                create_parents=create_parents,
            )
        if where.dsn is not None:
            return cls.open_postgres(
                where.dsn,
                options,
                schema=where.schema,
                views_dir=where.views_dir,
                follow=follow,
                create=create,
                read_only=read_only,
                discard_unfinished_import=discard_unfinished_import,
            )
        if not create:
            raise StoreNotFoundError(IN_MEMORY)
        if read_only:
            raise ValidationError("read_only", "a store in memory starts empty: it is written")
        return cls.in_memory(options)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        options: EngineOptions | None = None,
        *,
        sync: bool = True,
        read_only: bool = False,
        verify_on_open: bool = False,
        create: bool = True,
        discard_unfinished_import: bool = False,
        create_parents: bool = False,
        **choices: Unpack[OptionChoices],
    ) -> Self:
        """A durable store in directory ``path`` (created if missing, inside a directory that
        exists), backed by LMDB.

        :param options: what the engine is opened with (embedder, clock, chain key,
            eventsourcing settings…: :class:`~membrane_es.engine.options.EngineOptions`);
            keyword arguments (``embedder=None``, ``chain_key=key``…) are put over them.
        :param create: with ``False``, a path that holds no store raises
            :class:`~membrane_es.errors.StoreNotFoundError` and nothing is created there
            (what a read on a mistyped path wants).
        :param sync: fsync every commit (durable); ``False`` trades the last few commits on
            power loss for speed, never consistency.
        :param read_only: open for forensics: a damaged log opens (``damage`` says where;
            the views hold what comes before it), reads of damaged records raise
            :class:`~membrane_es.errors.IntegrityError`, writes raise
            :class:`~membrane_es.errors.ReadOnlyError`.
        :param verify_on_open: walk the whole hash chain before opening (linear in the log;
            by default an open checks what it replays: every event after the views'
            checkpoint, and the checkpoint's tie to the log).
        :param discard_unfinished_import: empty a store an import did not finish, as
            :meth:`connect`'s.
        :param create_parents: make the missing directories above a new store's ``path``;
            without it a path whose parent directory does not exist raises
            :class:`~membrane_es.errors.ValidationError` naming it, and nothing is created
            (a mistyped ``./memroy/x`` is not silently a new, empty store).

        Opening a store whose log fails the chain check raises
        :class:`~membrane_es.errors.IntegrityError` naming the first bad notification.
        """
        options = options_of(options, choices)  # before opening
        chain_key = options.chain_key
        directory = check_path("path", path)
        for name, flag in (("sync", sync), ("read_only", read_only), ("create", create)):
            check_flag(name, flag)
        check_flag("verify_on_open", verify_on_open)
        check_flag("discard_unfinished_import", discard_unfinished_import)
        check_flag("create_parents", create_parents)
        if not create and not holds_store(directory):
            raise StoreNotFoundError(str(path))
        if directory.exists() and not directory.is_dir():
            raise ValidationError("path", f"{path} is a file: a store is kept in a directory")
        parent = Path(os.path.abspath(directory)).parent
        if not create_parents and not parent.is_dir():
            raise ValidationError(
                "path",
                f"no directory {parent} to make the store {path} in (pass create_parents=True "
                "to make it)",
            )
        directory.mkdir(parents=create_parents, exist_ok=True)
        settings = {
            "PERSISTENCE_MODULE": "membrane_es.stores.lmdb",
            "LMDB_PATH": str(directory),
            "LMDB_SYNC": "y" if sync else "n",
            **({"LMDB_CHAIN_KEY": chain_key.hex()} if chain_key else {}),
            **(options.env or {}),
        }
        engine = cls(
            MemoryApplication(settings, read_only=read_only),
            options,
            views_dir=directory / "views",
            read_only=read_only,
            verify_on_open=verify_on_open,
            discard_unfinished_import=discard_unfinished_import,
        )
        engine._measure = partial(_directory_bytes, directory)
        return engine

    @classmethod
    def open_postgres(
        cls,
        dsn: str,
        options: EngineOptions | None = None,
        *,
        views_dir: str | os.PathLike[str] | None = None,
        schema: str = DEFAULT_SCHEMA,
        follow: bool = True,
        checkpoint_interval: float | None = DEFAULT_CHECKPOINT_INTERVAL,
        create: bool = True,
        read_only: bool = False,
        discard_unfinished_import: bool = False,
        **choices: Unpack[OptionChoices],
    ) -> Self:
        """A durable store in PostgreSQL, through eventsourcing's ``eventsourcing.postgres``
        (needs the ``postgres`` extra). The schema and its tables are created if missing.

        Any number of processes may open the same store, each writing to the one log and
        keeping read views of its own: with ``follow`` (the default) a background
        subscription (``LISTEN``/``NOTIFY``) applies the others' writes to this process's
        views as they commit, and reads answer from the views as they stand; a read that
        must include a given write passes its position as ``min_position`` (see
        :attr:`last_position`). Without ``follow``, every read first catches up with the log.

        :param dsn: a libpq connection string or URL (``postgresql://user:pw@host:5432/db``);
            see :mod:`membrane_es.stores.postgres.database` for the parameters it may carry.
        :param options: what the engine is opened with, as for :meth:`open` (``env`` may
            carry ``POSTGRES_POOL_SIZE``; every process writing the log must be given the
            same ``chain_key``); keyword arguments are put over them.
        :param views_dir: where the read views are checkpointed (created if missing), so a
            restart replays only what follows; None replays the whole log at every open.
        :param schema: the PostgreSQL schema holding this store (one store per schema).
        :param checkpoint_interval: with ``views_dir``, save the views every so many seconds
            when they moved (None: only at close), so a process that is killed resumes from
            a recent checkpoint rather than replaying the log from the start.
        :param create: with ``False``, a schema that holds no store raises
            :class:`~membrane_es.errors.StoreNotFoundError` and nothing is created there.
        :param read_only: this engine refuses writes (what the database lets the DSN's user
            do is its own affair), checkpoints nothing, and opens a damaged log for
            forensics, as :meth:`open`'s.
        :param discard_unfinished_import: empty a store an import did not finish, as
            :meth:`connect`'s.
        :param create_parents: make the missing directories above a new store's ``path``;
            without it a path whose parent directory does not exist raises
            :class:`~membrane_es.errors.ValidationError` naming it, and nothing is created
            (a mistyped ``./memroy/x`` is not silently a new, empty store).

        The log is hash chained as an LMDB store's is (:meth:`verify`), across every writer.
        """
        options = options_of(options, choices)
        chain_key = options.chain_key
        check_flag("create", create)
        check_flag("read_only", read_only)
        check_flag("discard_unfinished_import", discard_unfinished_import)
        settings = {
            **postgres_settings(dsn, schema),
            **({"POSTGRES_CHAIN_KEY": chain_key.hex()} if chain_key else {}),
            **(options.env or {}),
            # Without ``create``, a schema holding no store raises StoreNotFoundError.
            **({} if create else {MUST_EXIST: "y"}),
        }
        # Every query of the open goes through the store's pool (its first connection):
        # whether the tables are made (creating the schema and them when not), the chain,
        # the log's identity. No connection is made apart for them.
        app = MemoryApplication(settings, read_only=read_only)
        try:
            # Read with the tables' mark when they were found made (the usual open).
            oid = getattr(app.recorder, "log_oid", None)
            if oid is not None:
                identity = identity_of(settings, EVENTS_TABLE, oid)
            else:
                with app.factory.datastore.get_connection() as connection:  # type: ignore[attr-defined]
                    identity = store_identity(connection, settings, EVENTS_TABLE)
        except BaseException:
            app.close()
            raise
        directory = None if views_dir is None else Path(views_dir)
        try:
            if directory is not None:
                _claim_views(directory, identity)
            engine = cls(
                app,
                options,
                views_dir=directory,
                read_only=read_only,
                discard_unfinished_import=discard_unfinished_import,
            )
        except BaseException:
            app.close()  # its connection pool's threads would outlive a failed open
            raise
        engine._measure = partial(stored_bytes, settings)
        if follow:
            engine._follow_log()
        if directory is not None and checkpoint_interval is not None and not read_only:
            engine._checkpoint_every(checkpoint_interval)
        return engine

    @classmethod
    def in_memory(
        cls, options: EngineOptions | None = None, **choices: Unpack[OptionChoices]
    ) -> Self:
        """A store that lives in this process only (eventsourcing's in-memory recorders).
        ``options`` and keyword arguments as for :meth:`open`; it keeps no hash chain, so
        a ``chain_key`` is refused."""
        options = options_of(options, choices)
        if options.chain_key is not None:
            raise ValidationError("chain_key", "a store in memory keeps no hash chain to key")
        settings = {"PERSISTENCE_MODULE": "eventsourcing.popo", **(options.env or {})}
        return cls(MemoryApplication(settings), options)

    @staticmethod
    def verify_store(
        address: str | os.PathLike[str] | StoreAddress,
        *,
        chain_key: bytes | None = None,
        key_store: str | os.PathLike[str] | None = None,
        from_position: int | None = None,
        to_position: int | None = None,
    ) -> ChainReport:
        """Walk the hash chain of the store at ``address`` without opening its views (see
        :func:`~membrane_es.engine.store_check.verify_store`)."""
        return verify_store(
            address,
            chain_key=chain_key,
            key_store=key_store,
            from_position=from_position,
            to_position=to_position,
        )

    def _follow_log(self) -> None:
        follower = LogFollower(self._app, lambda: self._views, self._views_moved)
        self._follower = follower
        follower.start()

    def _checkpoint_every(self, interval: float) -> None:
        task = PeriodicTask("membrane-checkpoint", interval, self._checkpoint_if_moved)
        self._checkpoint_task = task
        task.start()

    def _checkpoint_if_moved(self) -> None:
        if self._checkpoints is not None and self._view_state() != self._checkpointed:
            self._save_checkpoint()

    def _replay_after_checkpoint(self) -> int:
        """How many events an open from the checkpoint on disk would replay to reach the
        views as they stand (every one, with no checkpoint; a view built since the
        checkpoint replays the log from its start; an approximate index built since it
        counts as one: the next open would build it again)."""
        position, entries, built = self._view_state()
        if self._checkpointed is None:
            return max(position, entries, 1)
        saved_position, saved_entries, saved_built = self._checkpointed
        if (position, entries) == (saved_position, saved_entries):
            return int(built and not saved_built)
        entries_lag = entries - saved_entries if saved_entries >= 0 else entries
        return max(position - saved_position, entries_lag, 1)

    def _save_checkpoint(self) -> None:
        """Pack the large events written alone since the last checkpoint (where the store
        packs: LMDB), then save the read views."""
        assert self._checkpoints is not None
        # Taken first: views that move while they are saved are saved again next time.
        state = self._view_state()
        packer = self._app.abilities.packer
        if packer is not None:
            packer.repack()
        self._checkpoints.save(self._views)
        self._checkpointed = state

    def close(self, *, replay_allowance: int = 0) -> None:
        """Checkpoint the read side (durable stores: unless it is where the last checkpoint
        left it) and release the store.

        :param replay_allowance: skip the checkpoint when the next open would replay at most
            this many events after the last one (a store closed to make room for another:
            replaying a few events costs less than saving every view again).

        The store is released whatever happens: a checkpoint that cannot be written (a full
        disk) is logged and skipped, the last good one staying in place, and the next open
        catches up from it.
        """
        if isinstance(replay_allowance, bool) or not isinstance(replay_allowance, int):
            raise ValidationError("replay_allowance", "must be a whole number of events")
        if replay_allowance < 0:
            raise ValidationError("replay_allowance", "must be 0 or more")
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        try:
            if self._vector_reader is not None:
                self._vector_reader.join()  # stops after the scope it is reading
            if self._consolidation is not None:
                self._consolidation.stop()
            if self._checkpoint_task is not None:
                self._checkpoint_task.stop()
            if self._follower is not None:
                self._follower.stop()
                self._follower = None
            if self._checkpoints is not None and not self._read_only:
                try:
                    self._views.catch_up(self._app)
                    if self._replay_after_checkpoint() > replay_allowance:
                        self._save_checkpoint()
                except (OSError, MembraneError) as error:
                    # The last good checkpoint stays; the next open catches up from it.
                    log.warning("read views not checkpointed at close: %s", error)
        finally:
            try:
                self._views.close()
                self._close_parts()
            finally:
                self._app.close()

    def rebuild_views(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Replace the read side by one rebuilt from the whole log; ``progress(applied,
        total)`` is called after each page of the log."""
        rebuilt = ReadModel.rebuild(self._app, progress)
        rebuilt.embeddings.keep_approximate(approximate_from(self._options))
        with self._write_lock:
            old, self._views = self._views, rebuilt
            self._checkpointed = None  # the checkpoint on disk is of the views replaced
        with self._advanced:
            self._advanced.notify_all()
        old.close()

    def checkpoint(self) -> None:
        """Save the read side now (durable stores); a restart replays only what follows.

        Raises :class:`~membrane_es.errors.StorageFullError` when the disk is full (the last
        checkpoint then stays as it was)."""
        if self._read_only:
            raise ReadOnlyError("the store was opened read-only: no checkpoint is written")
        if self._checkpoints is not None:
            self._views.catch_up(self._app)
            self._save_checkpoint()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def application(self) -> MemoryApplication:
        """The underlying eventsourcing application (log, recorder, repository)."""
        return self._app


STORE_MARKER = "store"


def _claim_views(directory: Path, identity: str) -> None:
    """Keep the checkpoint in ``directory`` only if it was taken from the store ``identity``
    names. An LMDB store keeps its views inside itself; a Postgres store's live apart, so a
    directory reused against another database, or a log dropped and made again, must not
    resume from views of a different log."""
    marker = directory / STORE_MARKER
    try:
        known: str | None = marker.read_text()
    except OSError:
        known = None
    if known != identity:
        ReadModel.discard(directory)
        directory.mkdir(parents=True, exist_ok=True)
        marker.write_text(identity)


def _directory_bytes(directory: Path) -> int:
    """The size of the files under ``directory`` (an LMDB store: log, views, key store)."""
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())

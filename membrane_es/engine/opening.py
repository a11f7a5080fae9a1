"""Opening and closing the engine: open an LMDB, PostgreSQL or in-memory store, close it,
checkpoint or rebuild the read side (the state an engine holds is made by
:class:`~membrane_es.engine.core.EngineCore`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

from membrane_es.application import EVENTS_TABLE, MemoryApplication
from membrane_es.clock import MonotonicClock
from membrane_es.commands.interpreter import Interpreter
from membrane_es.embedding.default import AUTOMATIC, EmbedderChoice
from membrane_es.engine.core import (
    EngineCore,
    _check_default_sensitivity,
)
from membrane_es.engine.follower import LogFollower
from membrane_es.errors import MembraneError, ReadOnlyError, StoreNotFoundError
from membrane_es.projections.read_model import ReadModel
from membrane_es.queries.selector import DEFAULT_THRESHOLD
from membrane_es.scheduler import PeriodicTask
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.validation import (
    check_chain_key,
    check_flag,
    check_path,
    check_settings,
    check_unit_interval,
)
from membrane_es.stores.postgres.database import (
    DEFAULT_SCHEMA,
    connect,
    creating_tables,
    ensure_schema,
    has_store,
    postgres_settings,
    store_identity,
    store_location,
)

log = logging.getLogger("membrane_es")

# The file LMDB keeps a store's data in (beside lock.mdb): its presence is what makes a
# directory a store.
LMDB_DATA_FILE = "data.mdb"
# How often a PostgreSQL process saves its read views (when they moved), in seconds.
DEFAULT_CHECKPOINT_INTERVAL = 60.0


class Opening(EngineCore):
    """Open a store (:meth:`open`, :meth:`open_postgres`, :meth:`in_memory`), close it,
    checkpoint or rebuild its views."""

    # --- construction -------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        sync: bool = True,
        env: Mapping[str, str] | None = None,
        clock: MonotonicClock | None = None,
        embedder: EmbedderChoice = AUTOMATIC,
        selection_threshold: float = DEFAULT_THRESHOLD,
        interpreter: Interpreter | None = None,
        default_sensitivity: str = Sensitivity.LOW.value,
        chain_key: bytes | None = None,
        read_only: bool = False,
        verify_on_open: bool = False,
        create: bool = True,
    ) -> Self:
        """A durable store in directory ``path`` (created if missing), backed by LMDB.

        :param create: with ``False``, a path that holds no store raises
            :class:`~membrane_es.errors.StoreNotFoundError` and nothing is created there
            (what a read on a mistyped path wants).
        :param sync: fsync every commit (durable); ``False`` trades the last few commits on
            power loss for speed, never consistency.
        :param env: extra eventsourcing settings (e.g. ``COMPRESSOR_TOPIC``, ``CIPHER_KEY``).
        :param embedder: embeds each new record's search text; its vector is stored in the
            record's ``Created`` event (see :mod:`membrane_es.embedding`). By default the
            offline all-MiniLM-L6-v2 when the ``embeddings`` extra is installed (announced in
            the ``membrane_es`` log), else none; None: no embedder (words and salience only).
        :param chain_key: key of the log's hash chain (keep it outside the store): each link
            is then a MAC nobody without the key can recompute. A store's first write fixes
            whether its chain is keyed; opening it with another key, or none, is an error.
        :param read_only: open for forensics: a damaged log opens (``damage`` says where;
            the views hold what comes before it), reads of damaged records raise
            :class:`~membrane_es.errors.IntegrityError`, writes raise
            :class:`~membrane_es.errors.ReadOnlyError`.
        :param verify_on_open: walk the whole hash chain before opening (linear in the log;
            by default an open checks what it replays: every event after the views'
            checkpoint, and the checkpoint's tie to the log).

        Opening a store whose log fails the chain check raises
        :class:`~membrane_es.errors.IntegrityError` naming the first bad notification.
        """
        check_unit_interval("selection_threshold", selection_threshold)  # before opening
        _check_default_sensitivity(default_sensitivity)
        check_chain_key(chain_key)
        directory = check_path("path", path)
        extra = check_settings("env", env)
        for name, flag in (("sync", sync), ("read_only", read_only), ("create", create)):
            check_flag(name, flag)
        check_flag("verify_on_open", verify_on_open)
        if not create and not (directory / LMDB_DATA_FILE).is_file():
            raise StoreNotFoundError(str(path))
        directory.mkdir(parents=True, exist_ok=True)
        settings = {
            "PERSISTENCE_MODULE": "membrane_es.stores.lmdb",
            "LMDB_PATH": str(directory),
            "LMDB_SYNC": "y" if sync else "n",
            **({"LMDB_CHAIN_KEY": chain_key.hex()} if chain_key else {}),
            **extra,
        }
        return cls(
            MemoryApplication(settings, read_only=read_only),
            clock,
            embedder,
            views_dir=directory / "views",
            selection_threshold=selection_threshold,
            interpreter=interpreter,
            default_sensitivity=default_sensitivity,
            read_only=read_only,
            verify_on_open=verify_on_open,
        )

    @classmethod
    def open_postgres(
        cls,
        dsn: str,
        *,
        views_dir: str | os.PathLike[str] | None = None,
        schema: str = DEFAULT_SCHEMA,
        env: Mapping[str, str] | None = None,
        clock: MonotonicClock | None = None,
        embedder: EmbedderChoice = AUTOMATIC,
        selection_threshold: float = DEFAULT_THRESHOLD,
        interpreter: Interpreter | None = None,
        default_sensitivity: str = Sensitivity.LOW.value,
        follow: bool = True,
        checkpoint_interval: float | None = DEFAULT_CHECKPOINT_INTERVAL,
        chain_key: bytes | None = None,
        create: bool = True,
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
        :param views_dir: where the read views are checkpointed (created if missing), so a
            restart replays only what follows; None replays the whole log at every open.
        :param schema: the PostgreSQL schema holding this store (one store per schema).
        :param env: extra eventsourcing settings (e.g. ``POSTGRES_POOL_SIZE``, ``CIPHER_KEY``).
        :param checkpoint_interval: with ``views_dir``, save the views every so many seconds
            when they moved (None: only at close), so a process that is killed resumes from
            a recent checkpoint rather than replaying the log from the start.
        :param chain_key: key of the log's hash chain, as for :meth:`open`; every process
            writing the log must be given the same one.
        :param create: with ``False``, a schema that holds no store raises
            :class:`~membrane_es.errors.StoreNotFoundError` and nothing is created there.

        The log is hash chained as an LMDB store's is (:meth:`verify`), across every writer.
        """
        check_unit_interval("selection_threshold", selection_threshold)
        _check_default_sensitivity(default_sensitivity)
        check_chain_key(chain_key)
        settings = {
            **postgres_settings(dsn, schema),
            **({"POSTGRES_CHAIN_KEY": chain_key.hex()} if chain_key else {}),
            **(env or {}),
        }
        check_flag("create", create)
        with connect(settings) as connection:
            if not create and not has_store(connection, settings, EVENTS_TABLE):
                raise StoreNotFoundError(store_location(settings))
            ensure_schema(connection, settings["POSTGRES_SCHEMA"])
            with creating_tables(connection, settings["POSTGRES_SCHEMA"]):
                app = MemoryApplication(settings)  # creates the tables (CREATE_TABLE)
            try:
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
                clock,
                embedder,
                views_dir=directory,
                selection_threshold=selection_threshold,
                interpreter=interpreter,
                default_sensitivity=default_sensitivity,
            )
        except BaseException:
            app.close()  # its connection pool's threads would outlive a failed open
            raise
        if follow:
            engine._follow_log()
        if directory is not None and checkpoint_interval is not None:
            engine._checkpoint_every(checkpoint_interval)
        return engine

    @classmethod
    def in_memory(
        cls,
        *,
        env: Mapping[str, str] | None = None,
        clock: MonotonicClock | None = None,
        embedder: EmbedderChoice = AUTOMATIC,
        selection_threshold: float = DEFAULT_THRESHOLD,
        interpreter: Interpreter | None = None,
        default_sensitivity: str = Sensitivity.LOW.value,
    ) -> Self:
        """A store that lives in this process only (eventsourcing's in-memory recorders)."""
        check_unit_interval("selection_threshold", selection_threshold)
        _check_default_sensitivity(default_sensitivity)
        settings = {"PERSISTENCE_MODULE": "eventsourcing.popo", **check_settings("env", env)}
        return cls(
            MemoryApplication(settings),
            clock,
            embedder,
            selection_threshold=selection_threshold,
            interpreter=interpreter,
            default_sensitivity=default_sensitivity,
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
        if self._checkpoints is not None and self._views.position != self._checkpointed:
            position = self._views.position
            self._save_checkpoint()
            self._checkpointed = position

    def _save_checkpoint(self) -> None:
        """Pack the large events written alone since the last checkpoint (where the store
        packs: LMDB), then save the read views."""
        assert self._checkpoints is not None
        packer = self._app.abilities.packer
        if packer is not None:
            packer.repack()
        self._checkpoints.save(self._views)

    def close(self) -> None:
        """Checkpoint the read side (durable stores) and release the store.

        The store is released whatever happens: a checkpoint that cannot be written (a full
        disk) is logged and skipped, the last good one staying in place, and the next open
        catches up from it.
        """
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
        with self._write_lock:
            old, self._views = self._views, rebuilt
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

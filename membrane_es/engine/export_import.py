"""The facade's export and import of the whole event log
(see :mod:`membrane_es.stores.transfer`)."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

from membrane_es.engine.core import EngineCore
from membrane_es.errors import MembraneError, ValidationError
from membrane_es.schema.validation import check_path
from membrane_es.stores import transfer


class ExportImport(EngineCore):
    """The log out to JSON Lines, and back into an empty store."""

    if TYPE_CHECKING:

        def close(self) -> None: ...  # the facade's (Opening's): a failed import closes it

    def export_log(self, out: IO[bytes], progress: transfer.Progress | None = None) -> int:
        """Write every event (with its notification id, time and chain hash) to ``out`` as
        JSON Lines; returns how many. ``progress(done, total)`` is called after each page."""
        if not callable(getattr(out, "write", None)) or isinstance(out, io.TextIOBase):
            raise ValidationError("out", "must be a file opened for writing bytes")
        # The file carries the key of every record not forgotten, found in the key store as
        # it is now: not a key this process read before another destroyed it, nor one a
        # forget cut short has yet to destroy (withheld, or destroyed now).
        self._app.keys.drop_cache()
        with self._write_lock:  # not halfway through a forget of this process
            self._app.settle_erasures(finish=not self._read_only)
        return transfer.export_log(self._app, out, _check_progress(progress))

    def import_log(
        self, path: str | os.PathLike[str], progress: transfer.Progress | None = None
    ) -> int:
        """Load an export file into this store, which must hold no events; returns how many.

        The file is checked whole first: a malformed or tampered file raises
        :class:`~membrane_es.stores.transfer.TransferError` naming its first bad line, and nothing
        is written. Afterwards the store answers every read, at every moment, as the
        exported one did.

        It is written a batch at a time under a mark (on LMDB and PostgreSQL), so it is all
        or nothing: an import that fails part way (a full disk; or its process is killed)
        leaves the store marked as holding part of a file. This engine is then closed (it
        would serve, or add to, part of a log), and opening the store raises
        :class:`~membrane_es.errors.IntegrityError` until the import is run again into it:
        :meth:`connect` with ``discard_unfinished_import=True`` empties it for that (as
        ``membrane-es import`` does).
        """
        source, progress = check_path("path", path), _check_progress(progress)
        if not source.is_file():
            raise ValidationError("path", f"no file at {source}")

        def lines() -> Iterator[bytes]:
            with source.open("rb") as file:
                yield from file

        if getattr(self._batch, "uow", None) is not None:
            raise MembraneError("import_log cannot run inside a batch")
        with self._write_lock:
            try:
                count = transfer.import_log(self._app, lines, progress)
            except BaseException:
                if self._part_written():
                    # Part of the file was written: this engine must neither serve it nor
                    # write after it, and views of it are not worth a checkpoint.
                    self._checkpoints = None
                    self.close()
                raise
            self._views.catch_up(self._app)
            last = self._app.last_event_time()
            if last is not None:
                self._clock.observe(last)
        with self._advanced:  # readers waiting for a log position
            self._advanced.notify_all()
        return count

    def _part_written(self) -> bool:
        """After a failed import: whether the store may hold part of the file (when that
        cannot even be read, it may)."""
        try:
            return self._app.import_unfinished()
        except Exception:
            return True


def _check_progress(progress: transfer.Progress | None) -> transfer.Progress | None:
    if progress is not None and not callable(progress):
        raise ValidationError("progress", "must be a function of (done, total), or None")
    return progress

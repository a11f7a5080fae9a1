"""Commands that look after a store: verify, rebuild, export, import."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from membrane_es.cli import render
from membrane_es.cli.app import UsageProblem, command, on_interrupt
from membrane_es.cli.options import (
    Json,
    Store,
    StoreAddress,
    existing_store,
    open_store,
)
from membrane_es.engine import Membrane, verify_store
from membrane_es.errors import MembraneError

TAMPERED = 2  # verify's exit status when the chain is broken


@command("verify", "membrane-es verify ./memory --chain-key-file /etc/membrane/chain.key")
def verify(
    store: Store,
    chain_key_file: Annotated[
        Path | None,
        typer.Option(
            "--chain-key-file", metavar="FILE", help="file holding the key of a keyed chain"
        ),
    ] = None,
    key_store: Annotated[
        Path | None,
        typer.Option(
            "--key-store",
            metavar="FILE",
            help="the store's key store, when it is not keys.sqlite in DIR (KEY_STORE_PATH)",
        ),
    ] = None,
    from_position: Annotated[
        int | None,
        typer.Option(
            "--from",
            metavar="N",
            help="check the chain from log position N on (linked to the one before it)",
        ),
    ] = None,
    to_position: Annotated[
        int | None,
        typer.Option("--to", metavar="M", help="check the chain up to log position M"),
    ] = None,
    json: Json = False,
) -> None:
    """Walk the log's hash chain without opening the views; exits 2 naming the first altered,
    missing or reordered event (a report even for a store file too corrupt to read), when
    the key store is missing or lacks the keys of records that were never forgotten, or when
    a forget was cut short (naming its records, and how to finish it). With --from/--to,
    only the positions from N to M (both included) are checked."""
    key = chain_key_file.read_bytes() if chain_key_file is not None else None
    report = verify_store(
        store,
        chain_key=key,
        key_store=key_store,
        from_position=from_position,
        to_position=to_position,
    )
    if json:
        render.print_json(
            {
                "ok": report.ok,
                "checked": report.checked,
                "fault": None if report.fault is None else str(report.fault),
                "notification_id": report.notification_id,
                "detail": report.detail,
                "keyed": report.keyed,
                "head": report.head,
                "from": report.first or None,
                "to": report.last or None,
                "forgotten": report.forgotten,
                "unsealable": report.unsealable,
            }
        )
    else:
        render.say(report)
    if not report.ok:
        raise typer.Exit(TAMPERED)


@command("rebuild", "membrane-es rebuild ./memory")
def rebuild(store: Store) -> None:
    """Rebuild the read views (tables, text and vector indexes) from the whole log."""
    if not store.keeps_views:
        raise UsageProblem(
            "rebuild: a PostgreSQL store's read views live in each process that serves it "
            "(made from the log when it opens); restart those, or rebuild their views directory"
        )
    with existing_store(store) as memory, _bar("rebuilding") as advance:
        # The rebuilt views replace the old ones only once whole, and the log is only read.
        with on_interrupt(
            "the read views were not rebuilt: they stay as they were, and the log is "
            "untouched; run rebuild again to rebuild them"
        ):
            memory.rebuild_views(advance)
        memory.checkpoint()
    render.say("rebuilt the read views", err=True)


@command("export", "membrane-es export ./memory memory.jsonl")
def export(
    store: Store,
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE", help="the JSON Lines file to write, or - for standard output"
        ),
    ],
    force: Annotated[
        bool, typer.Option("--force", help="replace FILE if it exists (else that is an error)")
    ] = False,
) -> None:
    """Write the whole event log as JSON Lines: every event, its id, time and chain hash."""
    target = None if file == "-" else _writable(file, force)  # before the log is read
    with existing_store(store) as memory:
        if target is None:
            with on_interrupt(
                "the export on standard output is incomplete; the store is untouched"
            ):
                memory.export_log(sys.stdout.buffer)
            return
        try:
            # _write_beside removes its partial file: the target is as it was.
            kept = "is as it was" if target.exists() else "was not written"
            with on_interrupt(f"nothing exported: {file} {kept}; the store is untouched"):
                count = _write_beside(target, memory)
        except OSError as error:  # the partial file's name means nothing to the user
            raise ExportError(f"cannot write {file}: {error.strerror or error}") from None
    render.say(f"exported {count} events to {target}", err=True)


class ExportError(MembraneError):
    """The export file cannot be written."""


def _writable(file: str, force: bool) -> Path:
    """The export target, if it can be written: its directory exists and takes new files,
    it is not itself a directory, and an existing file there may be overwritten (``force``:
    an earlier export is never replaced by a slip of the keyboard)."""
    target = Path(file)
    directory = target.parent
    if not directory.is_dir():
        raise ExportError(f"cannot write {file}: no directory {directory}")
    if target.is_dir():
        raise ExportError(f"cannot write {file}: it is a directory")
    if target.exists() and not force:
        raise ExportError(f"{file} exists; add --force to replace it")
    # The file is written beside the target and renamed over it: the directory must let a
    # file be made there, and an existing target must be writable (a read-only one would
    # be replaced through the rename, which is not what its mode asks for).
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ExportError(f"cannot write {file}: permission denied in {directory}")
    if target.exists() and not os.access(target, os.W_OK):
        raise ExportError(f"cannot write {file}: permission denied")
    return target


def _write_beside(target: Path, memory: Membrane) -> int:
    """Export into a file beside ``target``, renamed over it when complete: a failed export
    never leaves half a file."""
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "wb") as out, _bar("exporting") as advance:
            count = memory.export_log(out, advance)
        os.replace(partial, target)
    except BaseException:
        os.unlink(partial)
        raise
    return count


@command("import", "membrane-es import ./restored memory.jsonl")
def import_(
    store: Store,
    file: Annotated[
        str, typer.Argument(metavar="FILE", help="an export file, or - for standard input")
    ],
    json: Json = False,
) -> None:
    """Load an export file into an empty store (created if missing); a tampered file is
    refused, naming its first bad line, and nothing is written. An import that stopped part
    way (killed, or a full disk) leaves a store that will not open; run it again into that
    store, which starts over."""
    new_store = store.path is not None and not store.path.exists()
    with on_interrupt(lambda: _import_stopped(store, file, new_store)):
        with _readable(file) as source, _removed_on_failure(store):
            # no announcement of a new store: the import says where it went, or removes it;
            # what an earlier import into it left unfinished is discarded first (it starts over)
            opened = open_store(store, create=True, announce=False, discard_unfinished_import=True)
            with opened as memory, _bar("importing") as bar:
                count = memory.import_log(source, bar)
                report = memory.verify()
    if json:
        render.print_json({"events": count, "verify": str(report)})
    else:
        render.say(f"imported {count} events into {store}; verify: {report}", err=True)


def _import_stopped(store: StoreAddress, file: str, new_store: bool) -> str:
    """What an interrupted import left: the file is only read; a store it made is removed,
    and one that was there holds the mark of an unfinished import until it runs again."""
    if new_store:
        return f"nothing imported: {store} was not created; {file} is untouched"
    return (
        f"the import into {store} did not finish; run the same import again, which starts "
        f"over (until then the store refuses to open); {file} is untouched"
    )


@contextmanager
def _readable(file: str) -> Iterator[Path]:
    """The file to import; standard input is copied to a temporary file first, since the
    file is read twice (checked whole, then imported)."""
    if file != "-":
        path = Path(file)
        if path.is_dir():
            raise IsADirectoryError(21, "Is a directory, not an export file", file)
        if not path.is_file():
            raise FileNotFoundError(2, "No such file", file)
        yield path
        return
    with tempfile.NamedTemporaryFile(prefix="membrane-es-import-") as spool:
        shutil.copyfileobj(sys.stdin.buffer, spool)
        spool.flush()
        yield Path(spool.name)


@contextmanager
def _removed_on_failure(store: StoreAddress) -> Iterator[None]:
    """A store directory this import creates is removed again if the import fails (a
    failed import into PostgreSQL leaves its tables empty: nothing is written)."""
    existed = store.path is None or store.path.exists()
    try:
        yield
    except BaseException:
        if not existed and store.path is not None:
            shutil.rmtree(store.path, ignore_errors=True)
        raise


@contextmanager
def _bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on standard error, advanced by ``(done, total)`` calls."""
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=render.errors,
        transient=True,
        disable=not render.errors.is_terminal,  # a bar is for people; logs get the summary
    ) as progress:
        task = progress.add_task(label, total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=max(total, done))

        yield advance

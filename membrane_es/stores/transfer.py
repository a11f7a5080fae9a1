"""Export and import of the event log as JSON Lines.

A file is a header line, one line per event in log order (each record's content key just
before the event that first uses it), and an end line::

    {"kind":"header","format":"membrane-es/log","version":1}
    {"kind":"key","key_id":"<base64>","key":"<base64>","hash":"<hex>"}
    {"kind":"event","id":1,"originator_id":"…","originator_version":1,"topic":"…",
     "time":"2026-11-22T10:00:00.000001Z","state":"<base64>","hash":"<hex>"}
    {"kind":"end","events":1,"hash":"<hex of the last line's hash>"}

``state`` is the event exactly as stored (so an encrypted or compressed store exports and
imports without being decoded); ``time`` is the event's own time, for people and tools
reading the file. A record's content is sealed under its own key (see
:mod:`membrane_es.stores.key_store`): the file carries the key of every record not forgotten, so it
is as sensitive as the store itself; a forgotten record's key is gone and is not in the file,
so its content stays unreadable there and in any store the file is imported into.

Each key and event line carries a chain hash: blake2b-256 over the previous line's hash and
this line's fields, so a changed, removed, added or reordered line breaks every hash from it
on, and the end line catches a file cut short. The chain is the file's own: it checks the
file without any key the store may hold.

Importing needs an empty store; the whole file is checked before anything is written, so a
tampered file is refused (naming its first bad line) and leaves the store as it was. Events
keep their order, their originators, versions, topics and stored bytes, so the imported store
has the same records, the same history, the same ``as_of`` answers at every moment, and
(on LMDB) the same hash chain. Each batch hands the store the newest of its events' times
(``LogStamp.imported_time``, see :mod:`membrane_es.stores.log_stamp`), so a write after
the import, from any process, is timed after the imported events.

An import is written a batch at a time (a file may hold more events than one transaction
should), so it is made all-or-nothing by a mark: a store whose log can keep one (LMDB,
PostgreSQL) is marked before the first key or event is written and unmarked after the last.
A store still marked — the import's process was killed, or its disk filled — holds part of
a file: it refuses to open and ``verify`` reports it (:func:`unfinished_import`) until the
import is run again into it, which first empties it, keys included
(:meth:`~membrane_es.wiring.application.MemoryApplication.discard_unfinished_import`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import IO, Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import StoredEvent

from membrane_es.errors import IntegrityError, MembraneError
from membrane_es.stores.log_stamp import LOG_STAMP, LogStamp

FORMAT = "membrane-es/log"
VERSION = 1
GENESIS = "0" * 64
IMPORT_BATCH = 1000  # events per write transaction on import

Progress = Callable[[int, int], None]  # (done, total)


class TransferError(MembraneError):
    """An export file that cannot be imported as it is, or a store that cannot take it."""


def unfinished_import(where: str = "this store") -> IntegrityError:
    """The error for a store an import did not finish (it holds part of a file)."""
    return IntegrityError(
        f"an import into {where} did not finish: it holds only part of the file, so it is not "
        "opened as a store. Run the import again into it (membrane-es import, or "
        "Membrane.connect(..., discard_unfinished_import=True) then import_log), which starts "
        "over, or import into a fresh store"
    )


class Header(msgspec.Struct, tag_field="kind", tag="header", forbid_unknown_fields=True):
    format: str
    version: int


class EventLine(msgspec.Struct, tag_field="kind", tag="event", forbid_unknown_fields=True):
    id: int
    originator_id: str
    originator_version: int
    topic: str
    time: datetime
    state: bytes
    hash: str
    # Ids are UUIDs unless this says the originator id was stored as text.
    text_id: bool = False


class KeyLine(msgspec.Struct, tag_field="kind", tag="key", forbid_unknown_fields=True):
    key_id: bytes
    key: bytes
    hash: str


class End(msgspec.Struct, tag_field="kind", tag="end", forbid_unknown_fields=True):
    events: int
    hash: str


Line = Header | KeyLine | EventLine | End

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Line)


def line_hash(previous: str, line: EventLine | KeyLine) -> str:
    """The chain hash of a line: over the previous line's hash and every other field."""
    fields: tuple[Any, ...]
    if isinstance(line, KeyLine):
        fields = (previous, "key", line.key_id, line.key)
    else:
        fields = (
            previous,
            line.id,
            line.originator_id,
            line.text_id,
            line.originator_version,
            line.topic,
            line.time,
            line.state,
        )
    return hashlib.blake2b(_encoder.encode(fields), digest_size=32).hexdigest()


def export_log(app: Any, out: IO[bytes], progress: Progress | None = None) -> int:
    """Write the whole log of ``app`` (an eventsourcing application) to ``out``; returns the
    number of events written. Streams: one page of the log in memory at a time."""
    recorder, mapper = app.recorder, app.mapper
    total = recorder.max_notification_id() or 0
    out.write(_encoder.encode(Header(format=FORMAT, version=VERSION)) + b"\n")
    previous, count, start = GENESIS, 0, 1

    def write(line: EventLine | KeyLine) -> None:
        nonlocal previous
        line.hash = previous = line_hash(previous, line)
        out.write(_encoder.encode(line) + b"\n")

    while True:
        page = recorder.select_notifications(start, IMPORT_BATCH)
        for notification in page:
            originator = notification.originator_id
            event = mapper.to_domain_event(notification)
            key_id = getattr(event, "key_id", b"") if getattr(event, "sealed", b"") else b""
            key = app.keys.get(key_id) if key_id else None
            if key is not None:  # None: never sealed, or forgotten (its key destroyed)
                write(KeyLine(key_id=key_id, key=key, hash=""))
            write(
                EventLine(
                    id=notification.id,
                    originator_id=str(originator),
                    originator_version=notification.originator_version,
                    topic=notification.topic,
                    time=_utc(event.timestamp),
                    state=bytes(notification.state),
                    hash="",
                    text_id=not isinstance(originator, UUID),
                )
            )
            count += 1
        if progress is not None:
            progress(count, total)
        if len(page) < IMPORT_BATCH:
            break
        start = page[-1].id + 1
    out.write(_encoder.encode(End(events=count, hash=previous)) + b"\n")
    return count


def check_file(lines: Iterator[bytes]) -> int:
    """Check an export file line by line; returns its number of events, or raises
    :class:`TransferError` naming the first line that is malformed or breaks the chain."""
    return sum(1 for _, line in _content_lines(lines) if isinstance(line, EventLine))


def import_log(
    app: Any, lines: Callable[[], Iterator[bytes]], progress: Progress | None = None
) -> int:
    """Append the events of an export file to the empty log of ``app``; returns how many.

    ``lines`` opens the file afresh each time it is called: the file is read once to be
    checked whole (nothing is written if any line is bad), then again to be imported. The
    store is marked as being imported into from before its first write to after its last
    (where its log keeps a mark), so an import that stops part way is never taken for a
    whole store.
    """
    recorder, marker = app.recorder, app.abilities.import_marker
    held = recorder.max_notification_id() or 0
    if held:
        raise TransferError(f"import needs an empty store; this one holds {held} events")
    total = check_file(lines())
    if marker is not None:
        marker.mark_import(True)
    done = 0
    batch: list[StoredEvent] = []
    keys: list[tuple[bytes, bytes]] = []
    newest: datetime | None = None  # of the events imported so far
    for _, line in _content_lines(lines()):
        if isinstance(line, KeyLine):
            keys.append((line.key_id, line.key))
            continue
        newest = line.time if newest is None else max(newest, line.time)
        batch.append(
            StoredEvent(
                originator_id=line.originator_id if line.text_id else UUID(line.originator_id),
                originator_version=line.originator_version,
                topic=line.topic,
                state=line.state,
            )
        )
        if len(batch) == IMPORT_BATCH:
            done += _append(app, keys, batch, newest, done, total, progress)
    if batch or keys:
        done += _append(app, keys, batch, newest, done, total, progress)
    elif progress is not None:
        progress(done, total)
    if marker is not None:
        marker.mark_import(False)  # only now is the store whole
    return done


def _append(
    app: Any,
    keys: list[tuple[bytes, bytes]],
    batch: list[StoredEvent],
    newest: datetime | None,
    done: int,
    total: int,
    progress: Progress | None,
) -> int:
    """Write a batch: the keys its events are sealed under first, then the events, with the
    newest event time imported so far (the log's time moves up to it)."""
    app.keys.adopt(keys)
    keys.clear()
    app.recorder.insert_events(batch, **{LOG_STAMP: LogStamp(imported_time=newest)})
    count = len(batch)
    batch.clear()
    if progress is not None:
        progress(done + count, total)
    return count


def _content_lines(lines: Iterator[bytes]) -> Iterator[tuple[int, EventLine | KeyLine]]:
    """The key and event lines of a file, each checked against the chain; raises on the
    first bad line (or a file whose header or end line is missing or wrong)."""
    previous, last_id, count, number = GENESIS, 0, 0, 0
    ended = False
    for number, raw in enumerate(lines, start=1):  # noqa: B007 - used after the loop
        if not raw.strip():
            raise TransferError(f"line {number}: empty")
        if ended:
            raise TransferError(f"line {number}: after the end line")
        try:
            line = _decoder.decode(raw)
        except msgspec.DecodeError as error:
            raise TransferError(f"line {number}: not an export line ({error})") from None
        if number == 1:
            if not isinstance(line, Header) or (line.format, line.version) != (FORMAT, VERSION):
                raise TransferError(f"line 1: not a {FORMAT} version {VERSION} header")
            continue
        if isinstance(line, Header):
            raise TransferError(f"line {number}: a second header")
        if isinstance(line, End):
            if line.events != count or line.hash != previous:
                raise TransferError(
                    f"line {number}: the end line does not match the {count} events before it"
                )
            ended = True
            continue
        if isinstance(line, EventLine) and line.id <= last_id:
            raise TransferError(f"line {number}: event {line.id} is out of order")
        if line_hash(previous, line) != line.hash:
            raise TransferError(
                f"line {number}: hash does not match (the line, or one before it, was changed)"
            )
        previous = line.hash
        if isinstance(line, EventLine):
            if not line.text_id:
                try:
                    UUID(line.originator_id)
                except ValueError:
                    raise TransferError(f"line {number}: originator_id is not a UUID") from None
            last_id = line.id
            count += 1
        yield number, line
    if number == 0:
        raise TransferError("line 1: the file is empty")
    if not ended:
        raise TransferError(f"line {number + 1}: missing end line (the file was cut short)")


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)

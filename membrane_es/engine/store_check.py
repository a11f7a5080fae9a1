"""Checking a store without opening it: :func:`verify_store` walks the hash chain of the store
at an address (LMDB, PostgreSQL) and reports what it finds, damage included.

Of an LMDB store it then checks what its key store holds of its records. The chain vouches
for the log; the key store is a file apart, and losing it (a partial backup, a copy of
``data.mdb`` alone) would leave every record readable only as its structure — the look of
records erased by ``forget``. The check counts the two apart: records forgotten (their keys
destroyed on purpose) and records whose keys are missing though they were never forgotten,
which is damage to report; and a key store whose log is gone (``data.mdb`` deleted or
emptied), which is not an empty store.

Of any store it reports an import that did not finish (the store holds part of a file).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from membrane_es.engine.addresses import IN_MEMORY, StoreAddress, holds_store
from membrane_es.errors import (
    IntegrityError,
    KeyStoreError,
    MembraneError,
    StoreNotFoundError,
    ValidationError,
)
from membrane_es.schema.validation import check_chain_key, check_path
from membrane_es.stores.chain import ChainFault, ChainReport, check_span
from membrane_es.stores.key_store import (
    KEY_STORE_FILE,
    KEY_STORE_PATH,
    PostgresKeyStore,
    lost_log,
    missing_key_store,
)
from membrane_es.stores.lmdb.recorders import verify_store as verify_lmdb_log
from membrane_es.stores.postgres.database import (
    connect,
    has_store,
    postgres_settings,
    store_location,
)
from membrane_es.stores.transfer import unfinished_import
from membrane_es.wiring.application import APPLICATION_NAME, EVENTS_TABLE, MemoryApplication
from membrane_es.wiring.key_binding import (
    check_log_not_lost,
    key_census,
    named,
    unfinished_erasures,
)


def verify_store(
    address: str | os.PathLike[str] | StoreAddress,
    *,
    chain_key: bytes | None = None,
    key_store: str | os.PathLike[str] | None = None,
    from_position: int | None = None,
    to_position: int | None = None,
) -> ChainReport:
    """Walk the hash chain of the store at ``address`` (as
    :meth:`~membrane_es.engine.Membrane.connect` takes it: a directory, ``postgresql://…``
    with ``#schema``) without opening its views, then, of an LMDB store, count the records
    forgotten and those whose keys are missing from its key store.

    Never raises for damage: an altered, missing or reordered event, and a store file too
    corrupt to read, are reported (``report.ok`` False, ``report.notification_id`` the first
    bad notification when known), as are a missing, foreign or unreadable key store, or one
    whose log is gone (fault ``keys``), records that were not forgotten but whose keys are
    gone (fault ``unsealable``; named, with what to do if a forget of them was cut short), a
    ``forget`` that was cut short (fault ``interrupted``: its records named, and how to finish
    it) and an import into the store that did not finish (fault ``import``).
    ``membrane-es verify`` prints this report. An address holding no store raises
    :class:`~membrane_es.errors.StoreNotFoundError` and nothing is created there.

    :param chain_key: the key of a keyed chain (the key is part of the check).
    :param key_store: an LMDB store's key store file, for a store opened with
        ``KEY_STORE_PATH`` elsewhere than ``keys.sqlite`` in its directory.
    :param from_position: check the chain from this log position on (linked to the hash
        the log keeps of the one before it) ...
    :param to_position: ... up to this one (both included; left out: the log's start and
        its head), as :meth:`~membrane_es.engine.Membrane.verify` does: a range checks
        that part of the chain only, not what the key store holds of every record (which
        reads the whole log). A bound below 1 or past the head, or a start after the end,
        raises :class:`~membrane_es.errors.ValidationError` naming it.
    """
    where = StoreAddress.parse(address)
    check_chain_key(chain_key)
    span = check_span(from_position, to_position)
    keys = None if key_store is None else check_path("key_store", key_store)
    if where.path is not None:
        if not holds_store(where.path):
            key_file = keys or where.path / KEY_STORE_FILE
            if key_file.is_file():  # a key store whose log was deleted
                detail = str(lost_log(key_file, str(where.path)))
                return ChainReport(0, ChainFault.KEYS, None, detail)
            raise StoreNotFoundError(str(where.path))
        return verify_lmdb_store(where.path, chain_key, keys, span)
    if keys is not None:
        raise ValidationError("key_store", "only an LMDB store keeps its keys in a file apart")
    if where.dsn is not None:
        return verify_postgres_store(where.dsn, where.schema, chain_key, span)
    raise MembraneError(f"verify: a store in memory ({IN_MEMORY}) keeps no hash chain")


Span = tuple[int | None, int | None]  # the first and last positions checked (None: the ends)
WHOLE: Span = (None, None)


def verify_postgres_store(
    dsn: str, schema: str, chain_key: bytes | None, span: Span = WHOLE
) -> ChainReport:
    """The chain's report of the PostgreSQL store in ``schema`` (its views, which replay the
    whole log, are not opened)."""
    settings = {
        **postgres_settings(dsn, schema),
        "CREATE_TABLE": "n",
        **({"POSTGRES_CHAIN_KEY": chain_key.hex()} if chain_key else {}),
    }
    with connect(settings) as connection:
        if not has_store(connection, settings, EVENTS_TABLE):
            raise StoreNotFoundError(store_location(settings))
    app = MemoryApplication(settings)
    try:
        verifier = app.abilities.verifier
        if verifier is None:  # the chained recorders always verify: a settings mistake
            raise MembraneError(f"verify: no hash chain in the store at {store_location(settings)}")
        report: ChainReport = verifier.verify(first=span[0], last=span[1])
        if span != WHOLE:
            return report
        if report.ok and app.import_unfinished():
            return _unfinished(report, store_location(settings))
        if report.ok:
            table = f"{settings['POSTGRES_SCHEMA']}.{PostgresKeyStore.TABLE}"
            report = _with_keys(report, app, f"the table {table}", table)
    finally:
        app.close()
    return report


def _unfinished(report: ChainReport, where: str) -> ChainReport:
    """The report of a store an import did not finish (its chain may well be whole)."""
    return dataclasses.replace(
        report, fault=ChainFault.IMPORT, detail=str(unfinished_import(where))
    )


def verify_lmdb_store(
    directory: Path, chain_key: bytes | None, key_store: Path | None = None, span: Span = WHOLE
) -> ChainReport:
    """The chain's report, with the records forgotten and those unsealable counted; records
    whose keys are missing (not forgotten) make it a fault (``unsealable``), as does a key
    store that is another store's (``keys``). ``key_store``: the key store's file when it is
    not ``keys.sqlite`` in the directory."""
    key_file = key_store or directory / KEY_STORE_FILE
    report = verify_lmdb_log(
        str(directory), APPLICATION_NAME, chain_key, key_file, first=span[0], last=span[1]
    )
    if not report.ok or span != WHOLE:
        return report
    settings = {
        "PERSISTENCE_MODULE": "membrane_es.stores.lmdb",
        "LMDB_PATH": str(directory),
        "CREATE_TABLE": "n",
        KEY_STORE_PATH: str(key_file),
        **({"LMDB_CHAIN_KEY": chain_key.hex()} if chain_key else {}),
    }
    if not key_file.is_file():  # (a log bound to it was reported by the chain's check)
        if not report.checked:
            return report  # an empty log seals nothing
        missing = str(missing_key_store(key_file, str(directory)))
        return dataclasses.replace(report, fault=ChainFault.KEYS, detail=missing)
    try:
        app = MemoryApplication(settings, check_keys=False)
    except IntegrityError as error:
        fault = ChainFault.KEYS if isinstance(error, KeyStoreError) else ChainFault.CORRUPTED
        return dataclasses.replace(report, fault=fault, detail=str(error))
    try:
        check_log_not_lost(app)
        if app.import_unfinished():
            return _unfinished(report, str(directory))
        return _with_keys(report, app, f"the key store {key_file}", key_file.name, str(directory))
    except IntegrityError as error:
        fault = ChainFault.KEYS if isinstance(error, KeyStoreError) else ChainFault.CORRUPTED
        return dataclasses.replace(report, fault=fault, detail=str(error))
    finally:
        app.close()


def _with_keys(
    report: ChainReport, app: MemoryApplication, key_store: str, backup: str, address: str = ""
) -> ChainReport:
    """``report`` with what the key store holds of the log's records: the records forgotten
    counted; a fault for keys that should be there and are not (``unsealable``) or should be
    gone and are not, or whose erasure never reached the log (``interrupted``). ``key_store``
    names the key store in a message, ``backup`` what a backup of it restores, ``address``
    the store's directory (for a command to show)."""
    census = key_census(app)
    unfinished = unfinished_erasures(app)
    counted = dataclasses.replace(report, forgotten=census.forgotten, unsealable=census.unsealable)
    details = []
    if census.unsealable:
        details.append(
            f"the content of {census.unsealable} records cannot be unsealed "
            f"({named(census.missing)}): {key_store} lacks their keys, and they were not "
            f"forgotten ({census.forgotten} records were). If a forget of them was cut short "
            "(a crash, a full disk, Ctrl-C) by a release that destroyed the keys before it "
            "saved the Forgotten events, their content is gone as asked: run forget again for "
            f"them to record it, and do not restore {backup} from a backup, which would bring "
            f"the content back. Otherwise their keys were lost: restore {backup} from the "
            "backup taken with the log"
        )
    saved = list(dict.fromkeys(doomed.record_id for doomed in unfinished.saved))
    if saved:
        details.append(
            "a forget was cut short after its Forgotten events were saved: every read shows "
            f"{named(saved)} redacted, but their keys are not yet destroyed for good in "
            f"{key_store}. Opening the store for writing destroys them (any membrane-es "
            "command that opens it does"
            + (f", e.g. `membrane-es stats {address}`)" if address else ")")
        )
    restored = [record_id for record_id in census.held if record_id not in saved]
    if restored:
        details.append(
            f"{key_store} holds the keys of forgotten records {named(restored)} (restored from "
            "a backup taken before they were forgotten?): run forget again for each to destroy "
            "them"
        )
    if unfinished.unsaved:
        asked = [doomed.erasure for doomed in unfinished.unsaved]
        details.append(
            f"a forget of {named(asked)} was cut short before its Forgotten events were saved: "
            "nothing was erased, and it reads as before; run forget again to erase it"
        )
    if not details:
        return counted
    fault = ChainFault.UNSEALABLE if census.unsealable else ChainFault.INTERRUPTED
    return dataclasses.replace(counted, fault=fault, detail="; ".join(details))

"""Checking a store without opening it: :func:`verify_store` walks the hash chain of the store
at an address (LMDB, PostgreSQL) and reports what it finds, damage included.

Of an LMDB store it then checks what its key store holds of its records. The chain vouches
for the log; the key store is a file apart, and losing it (a partial backup, a copy of
``data.mdb`` alone) would leave every record readable only as its structure — the look of
records erased by ``forget``. The check counts the two apart: records forgotten (their keys
destroyed on purpose) and records whose keys are missing though they were never forgotten,
which is damage to report.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from membrane_es.application import APPLICATION_NAME, EVENTS_TABLE, MemoryApplication
from membrane_es.engine.addresses import IN_MEMORY, StoreAddress, holds_store
from membrane_es.errors import (
    IntegrityError,
    KeyStoreError,
    MembraneError,
    StoreNotFoundError,
    ValidationError,
)
from membrane_es.key_binding import key_census
from membrane_es.schema.validation import check_chain_key, check_path
from membrane_es.stores.chain import ChainFault, ChainReport
from membrane_es.stores.key_store import KEY_STORE_FILE, KEY_STORE_PATH, missing_key_store
from membrane_es.stores.lmdb.recorders import verify_store as verify_lmdb_log
from membrane_es.stores.postgres.database import (
    connect,
    has_store,
    postgres_settings,
    store_location,
)


def verify_store(
    address: str | os.PathLike[str] | StoreAddress,
    *,
    chain_key: bytes | None = None,
    key_store: str | os.PathLike[str] | None = None,
) -> ChainReport:
    """Walk the hash chain of the store at ``address`` (as
    :meth:`~membrane_es.engine.Membrane.connect` takes it: a directory, ``postgresql://…``
    with ``#schema``) without opening its views, then, of an LMDB store, count the records
    forgotten and those whose keys are missing from its key store.

    Never raises for damage: an altered, missing or reordered event, and a store file too
    corrupt to read, are reported (``report.ok`` False, ``report.notification_id`` the first
    bad notification when known), as are a missing or foreign key store (fault ``keys``) and
    records that were not forgotten but whose keys are gone (fault ``unsealable``).
    ``membrane-es verify`` prints this report. An address holding no store raises
    :class:`~membrane_es.errors.StoreNotFoundError` and nothing is created there.

    :param chain_key: the key of a keyed chain (the key is part of the check).
    :param key_store: an LMDB store's key store file, for a store opened with
        ``KEY_STORE_PATH`` elsewhere than ``keys.sqlite`` in its directory.
    """
    where = StoreAddress.parse(address)
    check_chain_key(chain_key)
    keys = None if key_store is None else check_path("key_store", key_store)
    if where.path is not None:
        if not holds_store(where.path):
            raise StoreNotFoundError(str(where.path))
        return verify_lmdb_store(where.path, chain_key, keys)
    if keys is not None:
        raise ValidationError("key_store", "only an LMDB store keeps its keys in a file apart")
    if where.dsn is not None:
        return verify_postgres_store(where.dsn, where.schema, chain_key)
    raise MembraneError(f"verify: a store in memory ({IN_MEMORY}) keeps no hash chain")


def verify_postgres_store(dsn: str, schema: str, chain_key: bytes | None) -> ChainReport:
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
        report: ChainReport = verifier.verify()
    finally:
        app.close()
    return report


def verify_lmdb_store(
    directory: Path, chain_key: bytes | None, key_store: Path | None = None
) -> ChainReport:
    """The chain's report, with the records forgotten and those unsealable counted; records
    whose keys are missing (not forgotten) make it a fault (``unsealable``), as does a key
    store that is another store's (``keys``). ``key_store``: the key store's file when it is
    not ``keys.sqlite`` in the directory."""
    key_file = key_store or directory / KEY_STORE_FILE
    report = verify_lmdb_log(str(directory), APPLICATION_NAME, chain_key, key_file)
    if not report.ok:
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
        census = key_census(app)
    except IntegrityError as error:
        return dataclasses.replace(report, fault=ChainFault.CORRUPTED, detail=str(error))
    finally:
        app.close()
    counted = dataclasses.replace(report, forgotten=census.forgotten, unsealable=census.unsealable)
    if not census.unsealable:
        return counted
    return dataclasses.replace(
        counted,
        fault=ChainFault.UNSEALABLE,
        detail=f"the content of {census.unsealable} records cannot be unsealed: the key store "
        f"{key_file} lacks their keys, and they were not forgotten ({census.forgotten} records "
        f"were). Restore {key_file.name} from the backup taken with the log",
    )

"""``verify`` of an LMDB store: its hash chain, then what its key store holds of its records.

The chain vouches for the log; the key store is a file apart, and losing it (a partial backup,
a copy of ``data.mdb`` alone) would leave every record readable only as its structure — the
look of records erased by ``forget``. The check counts the two apart: records forgotten (their
keys destroyed on purpose) and records whose keys are missing though they were never
forgotten, which is damage to report.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from membrane_es.application import APPLICATION_NAME, MemoryApplication
from membrane_es.errors import IntegrityError
from membrane_es.key_binding import key_census
from membrane_es.keystore import KEY_STORE_FILE, SqliteKeyStore, foreign_key_store
from membrane_es.lmdb_store import ChainFault, ChainReport, verify_store


def verify_lmdb_store(directory: Path, chain_key: bytes | None) -> ChainReport:
    """The chain's report, with the records forgotten and those unsealable counted; records
    whose keys are missing (not forgotten) make it a fault (``unsealable``), as does a key
    store that is another store's (``keys``)."""
    report = verify_store(str(directory), APPLICATION_NAME, chain_key)
    if not report.ok:
        return report
    key_file = directory / KEY_STORE_FILE
    settings = {
        "PERSISTENCE_MODULE": "membrane_es.lmdb_store",
        "LMDB_PATH": str(directory),
        "CREATE_TABLE": "n",
        **({"LMDB_CHAIN_KEY": chain_key.hex()} if chain_key else {}),
    }
    # A lost key store is counted against an empty one, never made anew on disk.
    keys = None if key_file.is_file() else SqliteKeyStore(None)
    try:
        app = MemoryApplication(settings, keys=keys, check_keys=False)
    except IntegrityError as error:
        return dataclasses.replace(report, fault=ChainFault.CORRUPTED, detail=str(error))
    try:
        bound = getattr(app.recorder, "key_store_identity", lambda: None)()
        if keys is None and bound is not None and bound != app.keys.identity:
            foreign = str(foreign_key_store(key_file))
            return dataclasses.replace(report, fault=ChainFault.KEYS, detail=foreign)
        census = key_census(app)
    except IntegrityError as error:
        return dataclasses.replace(report, fault=ChainFault.CORRUPTED, detail=str(error))
    finally:
        app.close()
    counted = dataclasses.replace(report, forgotten=census.forgotten, unsealable=census.unsealable)
    if not census.unsealable:
        return counted
    state = "is missing" if keys is not None else "lacks their keys"
    return dataclasses.replace(
        counted,
        fault=ChainFault.UNSEALABLE,
        detail=f"the content of {census.unsealable} records cannot be unsealed: the key store "
        f"{key_file} {state}, and they were not forgotten ({census.forgotten} records were). "
        f"Restore {KEY_STORE_FILE} from the backup taken with the log",
    )

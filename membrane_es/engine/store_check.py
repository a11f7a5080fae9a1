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
from membrane_es.errors import IntegrityError, KeyStoreError
from membrane_es.key_binding import key_census
from membrane_es.stores.chain import ChainFault, ChainReport
from membrane_es.stores.key_store import KEY_STORE_FILE, KEY_STORE_PATH, missing_key_store
from membrane_es.stores.lmdb.recorders import verify_store


def verify_lmdb_store(
    directory: Path, chain_key: bytes | None, key_store: Path | None = None
) -> ChainReport:
    """The chain's report, with the records forgotten and those unsealable counted; records
    whose keys are missing (not forgotten) make it a fault (``unsealable``), as does a key
    store that is another store's (``keys``). ``key_store``: the key store's file when it is
    not ``keys.sqlite`` in the directory."""
    key_file = key_store or directory / KEY_STORE_FILE
    report = verify_store(str(directory), APPLICATION_NAME, chain_key, key_file)
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

"""The key store's part in a crash-safe erasure (see :mod:`membrane_es.commands.erasure`):
keys doomed durably before the events are saved, withheld from reads while they wait, and
their notes dropped only once the keys are destroyed for good."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane_es import StorageFullError
from membrane_es.stores.key_store import KEY_STORE_FILE, DoomedKey, SqliteKeyStore


def test_doomed_keys_are_noted_durably_until_destroyed_for_good(tmp_path: Path) -> None:
    path = tmp_path / KEY_STORE_FILE
    keys = SqliteKeyStore(path)
    (first, key), (second, _), (third, _) = (keys.issue() for _ in range(3))
    assert keys.doomed() == []  # no table made until an erasure needs one

    keys.doom("rec-1", {"rec-1": first, "rec-2": second})

    other = SqliteKeyStore(path)  # another process, or the next open
    assert other.doomed() == [
        DoomedKey(first, "rec-1", "rec-1"),
        DoomedKey(second, "rec-2", "rec-1"),
    ]
    assert other.get(first) == key  # doomed is not destroyed
    keys.doom("rec-3", {"rec-2": second})  # taken along by a later erasure
    noted = [(d.record_id, d.erasure) for d in other.doomed()]
    assert noted == [("rec-1", "rec-1"), ("rec-2", "rec-3")]

    keys.destroy([first, second])

    assert other.doomed() == [] and not other.holds(first) and other.holds(third)
    other.close()
    keys.close()


def test_a_key_withheld_is_not_handed_out_though_still_held(tmp_path: Path) -> None:
    keys = SqliteKeyStore(tmp_path / KEY_STORE_FILE)
    (key_id, key), (kept, _) = keys.issue(), keys.issue()
    other = SqliteKeyStore(tmp_path / KEY_STORE_FILE)
    assert other.get(key_id) == key  # cached there

    keys.withhold([key_id])

    assert keys.get(key_id) is None and keys.cipher(key_id) is None and keys.holds(key_id)
    assert keys.get(kept) is not None
    keys.destroy([key_id])
    assert other.get(key_id) == key  # another process's cache outlives the key ...
    other.drop_cache()
    assert other.get(key_id) is None  # ... until it asks the storage again
    other.close()
    keys.close()


def test_a_destroy_that_fails_withholds_and_keeps_the_notes(tmp_path: Path) -> None:
    keys = SqliteKeyStore(tmp_path / KEY_STORE_FILE)
    key_id, _ = keys.issue()
    keys.doom("rec-1", {"rec-1": key_id})

    def full(key_ids: object) -> None:
        raise StorageFullError(28, "disk full")

    keys._delete = full  # type: ignore[method-assign]
    with pytest.raises(StorageFullError):
        keys.destroy([key_id])

    assert keys.get(key_id) is None and keys.holds(key_id)
    assert [d.key_id for d in keys.doomed()] == [key_id]
    del keys._delete
    keys.destroy([key_id])
    assert not keys.holds(key_id) and keys.doomed() == []
    keys.close()

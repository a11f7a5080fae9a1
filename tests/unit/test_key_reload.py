"""A keys file's changes take effect without a restart: a new key works, a removed one is
refused, and a malformed file keeps the keys in force (the log says why)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest
import yaml

from membrane_es.access.key_reload import KeysFileWatcher
from membrane_es.access.keys import KeyRing


def _write(path: Path, keys: list[dict[str, str]]) -> None:
    """Written beside, then renamed over the file (as deploy tools do)."""
    fresh = path.with_suffix(".new")
    fresh.write_text(yaml.safe_dump({"keys": keys}))
    os.replace(fresh, path)


def _tenant(ring: KeyRing, key: str) -> str | None:
    caller = ring.caller_for(f"Bearer {key}")
    return None if caller is None else caller.tenant


def test_a_reload_adds_and_revokes_keys_at_once(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    _write(path, [{"key": "old-key", "tenant": "acme"}])
    ring = KeyRing.load("", path)
    watcher = KeysFileWatcher(ring, "", path)
    _write(path, [{"key": "new-key", "tenant": "globex"}])
    assert watcher.reload()
    assert _tenant(ring, "new-key") == "globex"
    assert _tenant(ring, "old-key") is None
    assert ring.tenants == {"globex"}


@pytest.mark.parametrize(
    "text",
    ["keys: [{key: k, tenant: 'bad name!'}]", "keys: [{key: k, colour: red}]", "keys: [oops"],
)
def test_a_malformed_file_keeps_the_old_keys_and_says_why(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.yaml"
    _write(path, [{"key": "old-key", "tenant": "acme"}])
    ring = KeyRing.load("", path)
    watcher = KeysFileWatcher(ring, "", path)
    path.write_text(text)
    with caplog.at_level(logging.ERROR, logger="membrane_es.keys"):
        assert not watcher.reload()
    assert _tenant(ring, "old-key") == "acme"
    assert watcher.refusals == 1
    assert "not reloaded, the previous keys stay" in caplog.text
    assert str(path) in caplog.text


def test_a_missing_file_keeps_the_old_keys(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    _write(path, [{"key": "old-key"}])
    ring = KeyRing.load("shared", path)
    watcher = KeysFileWatcher(ring, "shared", path)
    path.unlink()
    assert not watcher.reload()
    assert _tenant(ring, "old-key") == ""
    assert _tenant(ring, "shared") == ""


def test_the_watcher_notices_a_changed_file(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    _write(path, [{"key": "old-key", "tenant": "acme"}])
    ring = KeyRing.load("", path)
    watcher = KeysFileWatcher(ring, "", path, poll=0.05).start()
    try:
        _write(path, [{"key": "old-key", "tenant": "acme"}, {"key": "added", "tenant": "new"}])
        deadline = time.monotonic() + 10
        while _tenant(ring, "added") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _tenant(ring, "added") == "new"
        assert watcher.reloads == 1
    finally:
        watcher.stop()

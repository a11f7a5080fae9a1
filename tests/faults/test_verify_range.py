"""``verify`` over a range of log positions: each link in the range is checked, the first
against the hash the log keeps of the notification before it, the last against the head
when the range ends there; damage outside the range is not reported, damage inside it (or
in the link into it) is; bad ranges are refused naming the bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane_es import Membrane, ValidationError
from membrane_es.stores.chain import HASH_SIZE, U64
from tests.faults.tamper_support import change_a_byte, raw_store
from tests.faults.test_tampering import _make_store, _verify_cli


def _alter_stored_hash(path: Path, notification_id: int) -> None:
    """Change the hash the log keeps of one notification (its content untouched)."""
    with raw_store(path) as (env, txn):
        log = env.open_db(b"memory_notifications", txn=txn, create=False)
        entry = bytearray(txn.get(U64.pack(notification_id), db=log))
        entry[0] ^= 0x01
        txn.put(U64.pack(notification_id), bytes(entry), db=log)


def test_a_range_of_an_intact_log_checks_just_those_positions(tmp_path: Path) -> None:
    _make_store(tmp_path)  # six notifications
    with Membrane.open(tmp_path) as memory:
        whole = memory.verify()
        part = memory.verify(from_position=2, to_position=4)
        tail = memory.verify(from_position=5)
        head = memory.verify(to_position=6)
    assert whole.ok and whole.checked == 6 and (whole.first, whole.last) == (0, 0)
    assert part.ok and part.checked == 3 and (part.first, part.last) == (2, 4)
    assert "positions 2 to 4" in str(part)
    assert part.head == ""  # the range does not reach the head
    assert tail.ok and tail.checked == 2 and tail.head == whole.head
    assert head.ok and head.checked == 6 and head.head == whole.head
    report = Membrane.verify_store(tmp_path, from_position=3, to_position=3)
    assert report.ok and report.checked == 1


def test_damage_inside_the_range_is_found_outside_it_is_not(tmp_path: Path) -> None:
    _make_store(tmp_path)
    change_a_byte(tmp_path, 4)  # notification 4's content no longer matches its hash

    before = Membrane.verify_store(tmp_path, from_position=1, to_position=3)
    after = Membrane.verify_store(tmp_path, from_position=5, to_position=6)
    across = Membrane.verify_store(tmp_path, from_position=3, to_position=5)
    assert before.ok and after.ok  # 5 links to the hash 4 keeps, which is intact
    assert not across.ok and across.notification_id == 4 and across.checked == 1

    done = _verify_cli(tmp_path, "--from", "4", "--to", "6")
    assert done.returncode == 2, done.stderr
    assert "notification 4" in done.stdout
    done = _verify_cli(tmp_path, "--from", "5", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"from": 5' in done.stdout and '"to": 6' in done.stdout


def test_the_link_into_the_range_is_checked(tmp_path: Path) -> None:
    _make_store(tmp_path)
    _alter_stored_hash(tmp_path, 4)

    report = Membrane.verify_store(tmp_path, from_position=5, to_position=6)
    assert not report.ok
    assert report.notification_id == 5  # its link to the hash kept of 4 is broken
    assert Membrane.verify_store(tmp_path, from_position=1, to_position=3).ok


@pytest.mark.parametrize(
    ("bounds", "field", "words"),
    [
        ({"from_position": 0}, "from_position", "whole number >= 1"),
        ({"from_position": -3}, "from_position", "whole number >= 1"),
        ({"to_position": "5"}, "to_position", "whole number >= 1"),
        ({"to_position": True}, "to_position", "whole number >= 1"),
        ({"from_position": 2.5}, "from_position", "whole number >= 1"),
        ({"from_position": 5, "to_position": 2}, "from_position", "after to_position (2)"),
        ({"to_position": 7}, "to_position", "beyond the log's head (6)"),
        ({"from_position": 9}, "from_position", "beyond the log's head (6)"),
    ],
)
def test_bad_ranges_are_refused_naming_the_bound(
    tmp_path: Path, bounds: dict[str, object], field: str, words: str
) -> None:
    _make_store(tmp_path)
    with Membrane.open(tmp_path) as memory:
        with pytest.raises(ValidationError, match=field) as raised:
            memory.verify(**bounds)  # type: ignore[arg-type]
        assert words in str(raised.value)
    with pytest.raises(ValidationError, match=field) as raised:
        Membrane.verify_store(tmp_path, **bounds)  # type: ignore[arg-type]
    assert words in str(raised.value)


def test_the_command_refuses_a_bad_range(tmp_path: Path) -> None:
    _make_store(tmp_path)
    done = _verify_cli(tmp_path, "--from", "5", "--to", "2")
    assert done.returncode not in (0, 2)
    assert "from_position" in done.stderr and "Traceback" not in done.stderr
    done = _verify_cli(tmp_path, "--to", "40")
    assert done.returncode not in (0, 2)
    assert "beyond the log's head (6)" in done.stderr


def test_a_range_of_an_empty_log_is_past_its_head(tmp_path: Path) -> None:
    with Membrane.open(tmp_path) as memory:
        assert memory.verify().ok
        with pytest.raises(ValidationError, match="beyond the log's head"):
            memory.verify(from_position=1)


def test_the_hash_before_the_range_must_be_kept(tmp_path: Path) -> None:
    """A log entry before the range that is gone: the range has nothing to link to."""
    _make_store(tmp_path)
    with raw_store(tmp_path) as (env, txn):
        log = env.open_db(b"memory_notifications", txn=txn, create=False)
        assert len(txn.get(U64.pack(3), db=log)) > HASH_SIZE
        txn.delete(U64.pack(3), db=log)
    report = Membrane.verify_store(tmp_path, from_position=4)
    assert not report.ok and report.notification_id == 3
    assert "before the range" in report.detail

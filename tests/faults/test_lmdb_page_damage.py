"""A damaged LMDB page is reported as damage, whichever page it is.

Four bytes of a page header — the free-space bounds — are inverted in a copy of a small
store, once for every page that holds a copy of a record's event row (the live one, and the
older ones LMDB keeps for reuse). LMDB then answers ``MDB_CORRUPTED``, ``MDB_PAGE_NOTFOUND`` or
``MDB_BAD_TXN`` (a transaction a failed page read left unusable): each must reach the user as
the engine's :class:`IntegrityError` — ``membrane-es verify`` exits 2 with a ``corrupted``
report, ``Membrane.open`` and reads raise ``IntegrityError`` — and never as a storage error of
another kind. A page no longer in use may hold a stale copy: damaging it harms nothing.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import lmdb
import pytest

from membrane_es import IntegrityError, Membrane, TrustContext
from membrane_es.aggregates.identity import record_key
from membrane_es.cli import main
from membrane_es.stores.lmdb.environment import translate_error

PAGE = 4096  # LMDB's page size on the machines tested
BOUNDS = slice(12, 16)  # mp_lower, mp_upper: after the page number, padding and flags
FULL = TrustContext(max_sensitivity="hyper")


def _record(subject: str) -> dict[str, object]:
    return {
        "type": "semantic",
        "sensitivity": "low",
        "payload": {"kind": "semantic", "subject": subject, "predicate": "is", "object": "x"},
        "provenance": {"sources": [{"kind": "observation", "ref": "r"}]},
    }


def _pages_holding(data: bytes, needle: bytes) -> list[int]:
    found, start = set(), data.find(needle)
    while start != -1:
        found.add(start // PAGE)
        start = data.find(needle, start + 1)
    return sorted(found - {0, 1})  # not the meta pages


def _invert_bounds(store: Path, page: int) -> None:
    with (store / "data.mdb").open("r+b") as file:
        file.seek(page * PAGE + BOUNDS.start)
        header = file.read(BOUNDS.stop - BOUNDS.start)
        file.seek(page * PAGE + BOUNDS.start)
        file.write(bytes(byte ^ 0xFF for byte in header))


def _verify(store: Path) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["verify", str(store)])
    return code, out.getvalue()


def _read_all(store: Path, ids: list[str]) -> str:
    """``damaged`` if opening or a read raised IntegrityError, ``clean`` if all read."""
    try:
        with Membrane.open(store, embedder=None) as memory:
            for record_id in ids:
                memory.retrieve_by_id(record_id, trust=FULL)
    except IntegrityError as error:
        assert "verify" in str(error)  # says what to do
        return "damaged"
    return "clean"


def test_every_page_holding_an_event_row_damaged_is_reported_as_damage(tmp_path: Path) -> None:
    original = tmp_path / "original"
    with Membrane.open(original, embedder=None) as memory:
        ids = [memory.create_record(_record(subject)).id for subject in "abcdef"]
    needle = b"\x01" + record_key(ids[2]).bytes  # the start of the record's event keys
    pages = _pages_holding((original / "data.mdb").read_bytes(), needle)
    assert pages
    outcomes = []
    for page in pages:
        copy = tmp_path / f"page-{page}"
        shutil.copytree(original, copy)
        _invert_bounds(copy, page)
        code, report = _verify(copy)
        assert code in (0, 2), (page, code, report)  # never 1: an unexplained error
        if code == 2:
            assert report.startswith("corrupted"), report
        read = _read_all(copy, ids)
        outcomes.append((code, read))
    # The live page is among them: damage was reported, by verify and by the engine.
    assert any(code == 2 for code, _ in outcomes), outcomes
    assert any(read == "damaged" for _, read in outcomes), outcomes


@pytest.mark.parametrize(
    "error",
    [
        lmdb.CorruptedError("mdb_get: MDB_CORRUPTED: Located page was wrong type"),
        lmdb.PageNotFoundError("mdb_get: MDB_PAGE_NOTFOUND"),
        lmdb.BadTxnError("mdb_get: MDB_BAD_TXN: Transaction must abort"),
        lmdb.PanicError("mdb_txn_begin: MDB_PANIC"),
        lmdb.ProblemError("mdb_cursor_get: MDB_PROBLEM"),
        lmdb.PageFullError("mdb_put: MDB_PAGE_FULL"),
        lmdb.Error("mdb_get: Input/output error"),
    ],
    ids=type,
)
def test_every_fault_of_the_file_is_the_engines_integrity_error(error: lmdb.Error) -> None:
    translated = translate_error(error, "/srv/memory")
    assert isinstance(translated, IntegrityError)
    assert "membrane-es verify" in str(translated) and "backup" in str(translated)


@pytest.mark.parametrize(
    "error",
    [lmdb.Error("/srv/memory: Permission denied"), lmdb.MapFullError("mdb_put: MDB_MAP_FULL")],
    ids=["permission", "map full"],
)
def test_an_environment_problem_is_not_called_damage(error: lmdb.Error) -> None:
    assert not isinstance(translate_error(error, "/srv/memory"), IntegrityError)

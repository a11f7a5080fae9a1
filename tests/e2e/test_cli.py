"""The command line as a user runs it: a real process, a real LMDB store.

A process costs about a second to start, so each test walks one story through several
commands on one store rather than starting a store per check, and the processes that only
check an error run side by side.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import lmdb
import pytest

from membrane_es import Membrane
from membrane_es.cli import main

ROOT = Path(__file__).resolve().parents[2]
# The processes import this checkout's package whatever the working directory (an installed
# one may be another checkout's), and embed as the suite does: with nothing (conftest.py
# switches the default model off in this process; loading it costs seconds per process).
PROCESS_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    "MEMBRANE_EMBEDDER": "none",
}

# Each command runs as a real process the first time a test uses it; later calls of the same
# command (variations of options, the checks around it) run in this process through the same
# entry point, to keep the suite fast. test_every_command_fails_in_one_line_as_a_process runs
# each command's error path as a process too.
_RUN_AS_PROCESS: set[str] = set()


def run_process(
    *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``membrane-es ARGS`` as a real process (``env``: variables set for it alone)."""
    return subprocess.run(
        [sys.executable, "-m", "membrane_es", *args],
        capture_output=True,
        text=True,
        check=False,
        input=stdin,
        env={**PROCESS_ENV, **(env or {})},
    )


def membrane_es(
    *args: str, stdin: str | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    first_use = bool(args) and args[0] not in _RUN_AS_PROCESS
    if process or first_use or stdin is not None:
        _RUN_AS_PROCESS.add(args[0] if args else "")
        return run_process(*args, stdin=stdin)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exited:  # argparse's help
            status = int(exited.code or 0)
    return subprocess.CompletedProcess(list(args), status, out.getvalue(), err.getvalue())


def ok(*args: str, stdin: str | None = None) -> str:
    result = membrane_es(*args, stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def as_json(*args: str, stdin: str | None = None) -> Any:
    return json.loads(ok(*args, "--json", stdin=stdin))


def refused(*args: str, status: int = 1, process: bool = False) -> str:
    """The one-line error of a command that must fail."""
    result = membrane_es(*args, process=process)
    assert result.returncode == status, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def fact(subject: str, obj: str, **extra: Any) -> str:
    return json.dumps(
        {
            "type": "semantic",
            "scope": "project:orchid",
            "payload": {"kind": "semantic", "subject": subject, "predicate": "deploy_target"}
            | {"object": obj},
            "provenance": {"sources": [{"kind": "observation", "ref": "standup"}]},
            **extra,
        }
    )


def test_demo_writes_revises_and_prints_history(tmp_path: Path) -> None:
    output = ok("demo", "--path", str(tmp_path / "store"))
    assert "Superseded" in output
    assert "[retracted]" in output
    assert "as of before the move:" in output
    assert "verify: OK" in output


def test_writes_revisions_and_reads_on_one_store(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    first = as_json("create", store, fact("Orchid", "staging"), "--actor", "ops", "--why", "heard")
    before_move = first["updated_at"]
    moved = as_json("supersede", store, first["id"], fact("Orchid", "production"), "--why", "r42")
    variant_file = tmp_path / "variant.json"
    variant_file.write_text(fact("Orchid", "dev cluster"))
    variant = as_json("fork", store, moved["id"], f"@{variant_file}", "--why", "dev differs")
    ok("reinforce", store, moved["id"], "--actor", "agent", "--why", "it helped")
    ok("penalize", store, variant["id"], "0.25", "--why", "vague")
    ok("contest", store, moved["id"], "--by", variant["id"], "--why", "runbook disagrees")
    other = as_json("create", store, fact("Lily", "staging"))
    # the same fact again is reinforced, not stored twice; stored as given on request
    again = as_json("create", store, fact("Lily", "staging"))
    assert again["id"] == other["id"] and again["resolution"]["outcome"] == "reinforced"
    third = as_json("create", store, "-", "--no-resolve", stdin=fact("Lily", "staging"))
    assert third["id"] != other["id"]
    merged = as_json("merge", store, other["id"], third["id"], "--record", fact("Lily", "prod"))
    # one source is a merge too, as in the Python API (and Membrane): the help says so
    single = as_json("merge", store, merged["id"], "--record", fact("Lily", "production"))
    assert as_json("get", store, merged["id"])["payload"]["revision"]["status"] == "retracted"
    assert any(r["target_id"] == merged["id"] for r in single["relations"])
    captured = as_json(
        "capture",
        store,
        '{"text": "Orchid deploys on Fridays", "project": "Orchid"}',
        "--source-kind",
        "event",
        "--scope",
        "project:orchid",
        "--tag",
        "deploys",
    )
    assert captured["primary_record"]["type"] == "episodic"
    ok("retract", store, variant["id"], "--why", "wrong")
    # stored as given: a new deploy_target would otherwise supersede the current one
    doomed = as_json("create", store, fact("Orchid", "a secret host"), "--no-resolve")
    assert as_json("forget", store, doomed["id"], "--why", "asked to") == {
        "forgotten": [doomed["id"]]
    }
    assert "payload" not in as_json("get", store, doomed["id"])
    assert "--why" in refused("forget", store, doomed["id"], status=2)  # usage
    assert "forgotten" in refused("forget", store, doomed["id"], "--why", "again")

    # get: now and as of a past moment (the record as it stood then)
    assert as_json("get", store, first["id"])["payload"]["revision"]["status"] == "retracted"
    then = as_json("get", store, first["id"], "--as-of", before_move)
    assert then["payload"]["object"] == "staging" and "revision" not in then["payload"]
    assert f'"id": "{first["id"]}"' in ok("show", store, first["id"], "--json")
    assert first["id"] in ok("get", store, first["id"])  # the table form

    # history, whole and as of a moment
    events = [entry["event"] for entry in as_json("history", store, moved["id"])["entries"]]
    assert events[0] == "Created" and {"Reinforced", "Forked", "Contested"} <= set(events)
    assert "Reinforced" in ok("history", store, moved["id"])
    then_events = as_json("history", store, first["id"], "--as-of", before_move)["entries"]
    assert [e["event"] for e in then_events] == ["Created"]

    # list: browse with filters, now and as of the first write
    listed = as_json("list", store, "--type", "semantic")["records"]
    ids = {record["id"] for record in listed}
    assert set(listed[0]) <= {"id", "type", "who", "text", "at", "redacted"}  # compact
    assert moved["id"] in ids and single["id"] in ids
    assert first["id"] not in ids and merged["id"] not in ids
    assert {r["id"] for r in as_json("list", store, "--tag", "deploys")["records"]} == {
        captured["primary_record"]["id"]
    }
    assert [r["id"] for r in as_json("list", store, "--as-of", before_move)["records"]] == [
        first["id"]
    ]
    assert len(as_json("list", store, "--limit", "1")["records"]) == 1
    every = len(as_json("list", store)["records"])
    assert len(as_json("list", store, "--limit", "0")["records"]) == every  # 0: all
    assert "payload" in as_json("list", store, "--limit", "1", "--detail")["records"][0]
    assert "records" in ok("list", store, "--scope", "project:orchid")
    # trust narrows what a reader sees: a record above the ceiling is not listed in full
    secret = as_json("create", store, fact("Vault", "hidden", sensitivity="hyper"))
    low = {r["id"]: r for r in as_json("list", store, "--trust", "low", "--detail")["records"]}
    assert secret["id"] not in low or "payload" not in low[secret["id"]]

    # retrieve / search / graph
    found = as_json("retrieve", store, "where does Orchid deploy", "--limit", "3")
    assert found["records"] and all("Orchid" in json.dumps(r) for r in found["records"])
    assert (
        as_json("search", store, "Orchid", "--as-of", before_move)["records"][0]["id"]
        == (first["id"])
    )
    assert "Orchid" in ok("retrieve", store, "Orchid")
    explained = as_json("retrieve", store, "Orchid", "--limit", "2", "--explain")
    assert [e["record_id"] for e in explained["explanations"]] == [
        r["id"] for r in explained["records"]
    ]
    assert explained["explanations"][0]["lexical_score"] > 0
    assert "why" in ok("retrieve", store, "Orchid", "--explain")
    assert "why these roots" in ok("graph", store, "Orchid", "--explain")
    assert set(found["records"][0]) <= {"id", "type", "who", "text", "at", "score"}
    full = as_json("retrieve", store, "where does Orchid deploy", "--limit", "3", "--detail")
    assert [r["id"] for r in full["records"]] == [r["id"] for r in found["records"]]
    assert all("payload" in r for r in full["records"])
    graph = as_json("graph", store, "Orchid", "--max-hops", "1")
    assert graph["nodes"][0]["hop"] == 0 and "edges" in graph
    assert as_json("graph", store, "Orchid", "--detail")["root_ids"]
    assert "edges" in ok("graph", store, "Orchid")

    # context: the text a model reads, packed into a budget; as of a moment
    text = ok("context", store, "where does Orchid deploy", "--budget-tokens", "64")
    # the current fact, saying what it replaced
    assert "Orchid deploy_target: production (since " in text and "; was staging) [" in text
    packed = as_json("context", store, "Orchid", "--as-of", before_move)
    assert packed["ids"] == [first["id"]] and packed["tokens"] <= packed["budget_tokens"]

    # metrics, stats, consolidate
    assert as_json("metrics", store, "--as-of", before_move)["total_records"] == 1
    assert "total_records" in ok("metrics", store)
    stats = as_json("stats", store)
    assert stats["records"] == as_json("metrics", store)["total_records"]
    # as of a moment: the events the log then held, beside the records it then held
    then = as_json("stats", store, "--as-of", before_move)
    assert (then["events"], then["records"]) == (1, 1)
    assert then["events"] < stats["events"]
    assert as_json("stats", store, "--as-of", "2000-01-01T00:00:00Z")["events"] == 0
    assert set(as_json("consolidate", store)) >= {"episodic_compressed", "semantic_extracted"}

    # upkeep: rebuild keeps every answer; verify passes
    moment = as_json("metrics", store)["collected_at"]  # salience decays: compare at one moment
    before = as_json("list", store, "--include-retracted", "--as-of", moment)
    assert "rebuilt" in membrane_es("rebuild", store).stderr
    assert as_json("list", store, "--include-retracted", "--as-of", moment) == before
    assert "OK" in ok("verify", store)
    assert as_json("verify", store)["ok"] is True


def test_export_then_import_gives_the_same_store(tmp_path: Path) -> None:
    store, copy = str(tmp_path / "store"), str(tmp_path / "copy")
    ok("demo", "--path", store)
    erased = as_json("create", store, fact("Vault", "a secret host"))
    assert as_json("forget", store, erased["id"], "--why", "asked to") == {
        "forgotten": [erased["id"]]
    }
    exported = tmp_path / "log.jsonl"
    assert "exported" in membrane_es("export", store, str(exported)).stderr
    lines = exported.read_text().splitlines()
    kinds = [json.loads(line)["kind"] for line in lines]
    assert kinds[0] == "header" and kinds[-1] == "end" and kinds[1] == "key"
    events = [line for line, kind in zip(lines, kinds, strict=True) if kind == "event"]
    assert {"id", "time", "hash", "topic", "state"} <= set(json.loads(events[0]))
    assert membrane_es("export", store, "-", process=True).stdout == exported.read_text()

    summary = as_json("import", copy, str(exported))
    assert summary["events"] == len(events) and summary["verify"].startswith("OK")
    for moment in (_time_of(events[1]), _time_of(events[-1])):
        args = ("--include-retracted", "--as-of", moment)
        assert as_json("list", store, *args) == as_json("list", copy, *args)
        assert as_json("stats", copy, "--as-of", moment)["events"] == sum(
            _moment(_time_of(line)) <= _moment(moment) for line in events
        )
    # the forgotten record stays forgotten: its structure and history, not its content
    assert "payload" not in as_json("get", copy, erased["id"])
    assert as_json("history", copy, erased["id"]) == as_json("history", store, erased["id"])
    # a store holding events takes no import
    assert "empty store" in refused("import", copy, str(exported))

    # a changed line is refused, naming it; nothing is written, no store is left behind
    event = json.loads(lines[2])  # the first event, after its record's key
    event["originator_version"] += 1
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join([*lines[:2], json.dumps(event), *lines[3:]]) + "\n")
    assert "line 3" in refused("import", str(tmp_path / "fresh"), str(tampered))
    assert not (tmp_path / "fresh").exists()
    # from standard input, and a file cut short
    as_json_stdin = membrane_es("import", str(tmp_path / "piped"), "-", stdin=exported.read_text())
    assert as_json_stdin.returncode == 0, as_json_stdin.stderr
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-2]) + "\n")
    assert "cut short" in refused("import", str(tmp_path / "fresh"), str(cut))
    folder = tmp_path / "a-folder"
    folder.mkdir()
    assert "Is a directory, not an export file" in refused(
        "import", str(tmp_path / "fresh"), str(folder)
    )


def _time_of(line: str) -> str:
    return str(json.loads(line)["time"])


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_verify_exits_2_when_an_event_was_altered(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ok("demo", "--path", str(store))
    env = lmdb.open(str(store), max_dbs=16)
    events = env.open_db(b"memory_events")
    with env.begin(write=True) as txn:
        key, value = next(iter(txn.cursor(db=events)))
        txn.put(key, value[:-1] + bytes([value[-1] ^ 1]), db=events)
    env.close()

    result = membrane_es("verify", str(store))
    assert result.returncode == 2
    assert "altered" in result.stdout


def test_errors_are_one_line_and_create_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ok("demo", "--path", str(store))
    typo = tmp_path / "typo-dir"
    for read in ("verify", "list", "metrics", "stats", "rebuild", "consolidate"):
        assert f"no store at {typo}" in refused(read, str(typo))
    assert "no store" in refused("get", str(typo), "some-id")
    assert not typo.exists()

    assert "record not found: no-such-record" in refused("show", str(store), "no-such-record")
    assert "RFC 3339" in refused("list", str(store), "--as-of", "2026-W47-1")
    assert "RFC 3339" in refused("list", str(store), "--as-of", "2026-11-22T10:00:00")  # no offset
    assert "validation error for record" in refused("create", str(store), "{not json")
    assert "payload" in refused("create", str(store), '{"type": "semantic", "payload": 3}')
    assert "--trust" in refused("list", str(store), "--trust", "root", status=2)
    assert "No such command" in refused("frobnicate", status=2)
    assert "Missing argument 'RECORD_ID'" in refused("get", str(store), status=2)
    assert "No such option: --bogus" in refused("serve", "-bogus", status=2)


def test_bare_command_prints_the_help() -> None:
    result = run_process()
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == "Usage: membrane-es [OPTIONS] COMMAND [ARGS]..."
    assert "Commands:" in lines and any(line.split()[:1] == ["retrieve"] for line in lines)
    assert "MEMBRANE_EMBEDDER" in result.stdout


def _record_file(tmp_path: Path) -> str:
    path = tmp_path / "record.json"
    path.write_text(fact("Orchid", "staging"))
    return f"@{path}"


def test_every_command_fails_in_one_line_as_a_process(tmp_path: Path) -> None:
    """Each command's error path as a user meets it: a real process, one line, an exit
    status, nothing created. The processes run side by side (each takes about a second)."""
    store, typo = str(tmp_path / "store"), str(tmp_path / "typo-dir")
    with Membrane.open(store) as memory:
        record_id = memory.create_record(json.loads(fact("Orchid", "staging"))).id
    record = _record_file(tmp_path)
    cases: list[tuple[tuple[str, ...], int, str]] = [
        (("demo", "--embedder", "/no/such/model"), 1, "no model directory at /no/such/model"),
        (("capture", store, "{not json"), 1, "not JSON"),
        (("create", store, '{"type": "semantic", "payload": 3}'), 1, "payload"),
        (("supersede", store, "no-such-id", record, "--why", "x"), 1, "not found: no-such-id"),
        (("fork", store, "no-such-id", record, "--why", "x"), 1, "not found: no-such-id"),
        (("merge", store, "--record", record), 2, "Missing argument 'RECORD_ID'"),
        (("retract", store, "no-such-id", "--why", "x"), 1, "not found: no-such-id"),
        (("contest", store, record_id, "--by", "no-such-id", "--why", "x"), 1, "no-such-id"),
        (("reinforce", typo, record_id), 1, f"no store at {typo}"),
        (("penalize", store, record_id, "--", "-0.5"), 2, "'AMOUNT'"),
        (("forget", store, record_id), 2, "--why is required"),
        (("consolidate", typo), 1, f"no store at {typo}"),
        (("list", store, "--limit", "-3"), 2, "'--limit'"),
        (("retrieve", store, "Orchid", "--limit", "-1"), 2, "'--limit'"),
        (("search", store, "Orchid", "--as-of", "2026-W47-1"), 1, "RFC 3339"),
        (("graph", store, "Orchid", "--root-limit", "0"), 2, "'--root-limit'"),
        (("context", store, "Orchid", "--budget-tokens", "8"), 2, "'--budget-tokens'"),
        (("get", store), 2, "Missing argument 'RECORD_ID'"),
        (("history", store, "no-such-id"), 1, "not found: no-such-id"),
        (("metrics", store, "--trust", "low"), 1, "owner's trust"),
        (("stats", typo), 1, f"no store at {typo}"),
        (("verify", typo), 1, f"no store at {typo}"),
        (("rebuild", typo), 1, f"no store at {typo}"),
        (("export", store, "/nonexistent-dir/out.jsonl"), 1, "/nonexistent-dir/out.jsonl"),
        (("import", str(tmp_path / "copy"), str(tmp_path / "missing.jsonl")), 1, "missing.jsonl"),
        (("serve", "-bogus"), 2, "No such option: --bogus"),
        (("mcp", store, "--http", "127.0.0.1:99999"), 2, "--http"),
        (("ui", typo), 1, f"no store at {typo}"),
        (("frobnicate",), 2, "No such command"),
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda case: run_process(*case[0]), cases))
    for (args, status, fragment), result in zip(cases, results, strict=True):
        assert result.returncode == status, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr)
        assert fragment in lines[0], (args, lines[0])
    assert not Path(typo).exists() and not (tmp_path / "copy").exists()
    listed = {case[0][0] for case in cases}
    assert listed >= set(COMMANDS), set(COMMANDS) - listed


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("list", "--limit", "-1"), "'--limit'"),
        (("list", "--min-salience", "-0.5"), "'--min-salience'"),
        (("retrieve", "Orchid", "--limit", "-2"), "'--limit'"),
        (("retrieve", "Orchid", "--min-salience", "-1"), "'--min-salience'"),
        (("graph", "Orchid", "--node-limit", "0"), "'--node-limit'"),
        (("graph", "Orchid", "--edge-limit", "-1"), "'--edge-limit'"),
        (("graph", "Orchid", "--max-hops", "-1"), "'--max-hops'"),
        (("graph", "Orchid", "--min-salience", "-1"), "'--min-salience'"),
        (("penalize", "some-id", "--", "-1"), "'AMOUNT'"),
        (("penalize", "some-id", "nan"), "'AMOUNT'"),
        (("penalize", "some-id", "inf"), "'AMOUNT'"),
        (("list", "--min-salience", "nan"), "'--min-salience'"),
        (("retrieve", "Orchid", "--min-salience", "inf"), "'--min-salience'"),
        (("mcp", "--http", "localhost:70000"), "--http"),
    ],
)
def test_numeric_options_out_of_range_are_refused(
    tmp_path: Path, args: tuple[str, ...], option: str
) -> None:
    """Refused before the store is opened (nothing is created), naming the option."""
    store = str(tmp_path / "store")
    assert option in refused(args[0], store, *args[1:], status=2)
    assert not (tmp_path / "store").exists()


def test_export_checks_its_target_first_and_names_it(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    as_json("create", store, fact("Orchid", "staging"))
    folder = tmp_path / "folder"
    folder.mkdir()
    assert f"cannot write {folder}: it is a directory" in refused("export", store, str(folder))
    assert list(folder.iterdir()) == []  # nothing written beside it, not even a partial file
    missing = tmp_path / "no-dir" / "out.jsonl"
    message = refused("export", store, str(missing))
    assert message == f"error: cannot write {missing}: no directory {missing.parent}"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["folder", "store"]


COMMANDS = (
    "demo capture create supersede fork merge retract contest reinforce penalize forget "
    "consolidate list retrieve search graph context get history metrics stats verify rebuild "
    "export import serve mcp ui"
).split()
# A Python type in the help (``<str>``, ``<list[str]>``, ``<StoreAddress>``)
_TYPE_SHOWN = re.compile(r"<\w[\w\[\]|, ]*>")
# What a usage line may name after [OPTIONS]: upper-case metavars, optional ones in brackets.
_USAGE_ARGUMENT = re.compile(r"\[?[A-Z][A-Z_]*(\.\.\.)?\]?")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == 0
    help_text = capsys.readouterr().out
    assert f"Example: membrane-es {command}" in help_text
    assert not _TYPE_SHOWN.search(help_text), _TYPE_SHOWN.findall(help_text)
    usage = help_text.splitlines()[0].split()
    assert usage[:3] == ["Usage:", "membrane-es", command] and usage[3] == "[OPTIONS]"
    assert all(_USAGE_ARGUMENT.fullmatch(word) for word in usage[4:]), usage
    # each argument of the usage line is listed under that name, as errors name it
    for word in usage[4:]:
        assert f"\n  {word.strip('[]')}  " in help_text, word


@pytest.mark.parametrize("command", ["supersede", "fork", "merge"])
def test_revision_help_says_a_semantic_record_needs_evidence(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "must cite its evidence" in help_text
    example = help_text.split("Example: ")[1]
    assert '"provenance": {"sources": [{"kind": "observation"' in example
    if command == "merge":  # as many sources as the Python API takes: one or more
        assert "RECORD_ID... the records merged: one or more" in help_text


def test_serve_help_lists_membraneds_flags_as_every_command_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "-h"]) == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith("Usage: membrane-es serve [OPTIONS]\n")
    for flag in ("--db DIR", "--addr ADDR", "--config PATH", "--keys PATH", "--postgres-dsn DSN"):
        assert flag in help_text
    assert "Example: membrane-es serve" in help_text


def test_the_library_and_cli_import_without_the_optional_extras(tmp_path: Path) -> None:
    """The daemon's and the MCP server's dependencies are extras: without them the library
    works and the commands that need them name the extra to install."""
    blocked = "import sys; [sys.modules.__setitem__(m, None) for m in ('grpc', 'yaml', 'mcp')]; "
    script = (
        blocked
        + "import membrane_es; from membrane_es.cli import main; from membrane_es.cli.daemon "
        "import membraned; assert main(['list', '--help']) == 0; "
        f"assert main(['mcp', {str(tmp_path)!r}]) == 1; "
        "sys.exit(10 * main(['serve', '-db', ':memory:']) + membraned(['-version']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, env=PROCESS_ENV
    )
    assert result.returncode == 11, result.stderr
    assert "pip install 'membrane-es[server]'" in result.stderr
    assert "pip install 'membrane-es[mcp]'" in result.stderr
    assert "Traceback" not in result.stderr

"""The command line prints what was stored, literally: Rich markup, emoji codes, ANSI escapes
and control characters in stored or typed text never change what a table or a line shows
(nor fail the command); and the messages around it: plain text in from a pipe or a file,
Ctrl-C during the long commands, the JSON shapes, the notes a user needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from membrane_es import Membrane
from membrane_es.cli import main
from tests.e2e.test_cli import fact, membrane_es, ok, refused, run_process

# What a prompt template, a shell session or a pasted log may hold: markup Rich would read
# (an unmatched closing tag made a capture fail after storing), an emoji code, an ANSI
# colour, a carriage return (a space in a one-line summary), a bell and a bidi override.
HOSTILE = "[/INST] [bold]B[/bold] x[e] :smile: \x1b[31mR \r\x07\u202eZ"
# Each piece as a line or a cell shows it (a control character as its escape; inside a JSON
# value, as a record's nested fields are shown, JSON's own escape).
SHOWN = (
    ("[/INST]",),
    ("[bold]B[/bold]",),
    ("x[e]",),
    (":smile:",),
    ("\\x1b[31mR", "\\u001b[31mR"),
    ("\\x07", "\\u0007"),
    ("\\u202e",),
)
UNSHOWN = ("\x1b", "\r", "\x07", "\u202e", "😄")


def literal(output: str) -> None:
    for spellings in SHOWN:
        assert any(piece in output for piece in spellings), (spellings, output)
    for raw in UNSHOWN:
        assert raw not in output, (raw, output)


def as_json(*args: str, stdin: str | None = None) -> Any:
    return json.loads(ok(*args, "--json", stdin=stdin))


def semantic(obj: str) -> str:
    return fact("Orchid", obj)


def test_every_table_prints_stored_text_literally(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    # capture prints its line as a real process would: markup there once failed the command
    captured = run_process("capture", store, "--text", HOSTILE)
    assert captured.returncode == 0, captured.stderr
    literal(captured.stdout)
    turn = as_json("list", store)["records"][0]["id"]

    fact_record = json.dumps(
        {
            "type": "semantic",
            "payload": {"kind": "semantic", "subject": HOSTILE, "predicate": "is", "object": "x"},
            "provenance": {"sources": [{"kind": "observation", "ref": "r"}]},
        }
    )
    created = membrane_es("create", store, fact_record)
    assert created.returncode == 0, created.stderr
    literal(created.stdout)
    fact_id = as_json("list", store, "--type", "semantic")["records"][0]["id"]
    for revision in (
        ("reinforce", fact_id),
        ("penalize", fact_id, "0.1"),
        ("contest", fact_id, "--by", turn),
    ):
        assert membrane_es(*revision[:1], store, *revision[1:], "--why", HOSTILE).returncode == 0
    supersede = membrane_es("supersede", store, fact_id, fact_record, "--actor", HOSTILE)
    assert supersede.returncode == 0, supersede.stderr
    literal(supersede.stdout)

    for args in (
        ("list", store),
        ("retrieve", store, "INST"),
        ("search", store, "INST", "--explain"),
        ("graph", store, "INST", "--explain"),
        ("context", store, "INST"),
        ("get", store, turn),
        ("show", store, turn),
        ("get", store, fact_id),
        ("history", store, fact_id),
    ):
        result = membrane_es(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr
        literal(result.stdout)

    forgotten = membrane_es("forget", store, turn, "--why", HOSTILE)
    assert forgotten.returncode == 0, forgotten.stderr
    literal(membrane_es("get", store, turn).stdout)  # when, by whom and why it was forgotten
    for args in (("metrics", store), ("stats", store), ("verify", store), ("consolidate", store)):
        result = membrane_es(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert "\x1b" not in result.stdout


def test_stats_prints_the_extra_in_brackets(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ok("capture", store, "--text", "a note")
    # the table wraps its cells: read it as one line
    stats = " ".join(ok("stats", store).replace("│", " ").split())
    # whichever reason the search line gives, a bracketed extra or flag survives printing
    assert any(
        said in stats
        for said in ("membrane-es[embeddings]", "--embedder", "pip install --force-reinstall")
    ), stats


def test_errors_quote_what_was_given_literally(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ok("capture", store, "--text", "a note")
    said = refused("get", store, "\x1b[31mno-such")
    assert "\\x1b[31mno-such" in said and "\x1b" not in said


def test_capture_text_reads_standard_input_and_files(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    piped = as_json("capture", store, "--text", "-", stdin="from a pipe [x]\n")
    assert piped["primary_record"]["payload"]["timeline"][0]["summary"] == "from a pipe [x]"
    note = tmp_path / "note.txt"
    note.write_text("from a file\n")
    filed = as_json("capture", store, "--text", f"@{note}")
    assert filed["primary_record"]["payload"]["timeline"][0]["summary"] == "from a file"
    missing = refused("capture", store, "--text", "@nobody said this")
    assert "cannot read nobody said this" in missing and "standard input" in missing
    plain = refused("capture", store, "plain text")
    assert "not JSON" in plain and "add --text" in plain


def test_revisions_print_the_record_as_json(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    made = as_json("create", store, semantic("staging"))
    penalized = as_json("penalize", store, made["id"], "0.5", "--why", "vague")
    assert penalized["id"] == made["id"] and penalized["salience"] < made["salience"]
    reinforced = as_json("reinforce", store, made["id"], "--why", "helped")
    assert reinforced["salience"] > penalized["salience"]
    other = as_json("create", store, semantic("prod"))
    contested = as_json("contest", store, made["id"], "--by", other["id"], "--why", "disagrees")
    assert contested["id"] == made["id"]
    retracted = as_json("retract", store, made["id"], "--why", "wrong")
    assert retracted["payload"]["revision"]["status"] == "retracted"
    assert ok("retract", store, other["id"]) == f"retracted {other['id']}\n"


def test_every_json_answer_is_an_object(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    made = as_json("create", store, semantic("staging"))
    listed, found = as_json("list", store), as_json("retrieve", store, "Orchid")
    assert set(listed) == {"records"} and set(listed["records"][0]) <= set(found["records"][0]) | {
        "redacted"
    }
    assert set(as_json("history", store, made["id"])) == {"entries"}
    assert as_json("forget", store, made["id"], "--why", "asked") == {"forgotten": [made["id"]]}


def test_messages_count_in_words(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ok("capture", store, "--text", "Orchid deploys on Fridays")
    context = membrane_es("context", store, "Orchid")
    assert context.returncode == 0
    line = context.stderr.strip().splitlines()[-1]
    assert line.startswith("1 memory, ") and "((" not in line and "counted: " in line
    assert ok("list", store).rstrip().endswith("\n1 record")


def test_a_moment_in_the_future_is_answered_and_noted(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ok("capture", store, "--text", "a note")
    later = membrane_es("list", store, "--as-of", "2999-01-01T00:00:00Z", "--json")
    assert later.returncode == 0 and json.loads(later.stdout)["records"]
    assert "note: --as-of 2999-01-01T00:00:00Z is in the future" in later.stderr
    assert "projection" in later.stderr
    assert "future" not in membrane_es("list", store, "--as-of", "2020-01-01T00:00:00Z").stderr


@pytest.mark.parametrize(
    ("command", "method", "says"),
    [
        ("rebuild", "rebuild_views", "the read views were not rebuilt: they stay as they were"),
        ("consolidate", "consolidate", "what it wrote is kept"),
        ("export", "export_log", "nothing exported: "),
        ("import", "import_log", "nothing imported: "),
    ],
)
def test_ctrl_c_says_what_was_done_and_what_was_not(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    method: str,
    says: str,
) -> None:
    store = tmp_path / "store"
    with Membrane.open(store, embedder=None) as memory:
        kept = memory.create_record(json.loads(semantic("staging"))).id
        exported = tmp_path / "log.jsonl"
        with exported.open("wb") as out:
            memory.export_log(out)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Membrane, method, interrupted)
    args = {
        "rebuild": [str(store)],
        "consolidate": [str(store), "--embedder", "none"],
        "export": [str(store), str(tmp_path / "out.jsonl")],
        "import": [str(tmp_path / "copy"), str(exported)],
    }[command]
    assert main([command, *args]) == 130
    said = capsys.readouterr().err.strip()
    assert said.startswith("interrupted: ") and says in said, said
    monkeypatch.undo()
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "copy").exists()
    with Membrane.open(store, embedder=None) as memory:  # nothing lost
        assert memory.retrieve_by_id(kept).id == kept


def test_mcp_help_names_every_tool(capsys: pytest.CaptureFixture[str]) -> None:
    from membrane_es.access.ceiling import Caller
    from membrane_es.mcp_server.server import build_server

    assert main(["mcp", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    memory = Membrane.in_memory(embedder=None)
    try:
        tools = build_server(memory, Caller())._tool_manager.list_tools()
    finally:
        memory.close()
    listed = help_text.split("Its tools: ")[1].split(".")[0].replace(" and ", ", ").split(", ")
    assert sorted(listed) == sorted(tool.name for tool in tools)
    assert "default, as for every command, is hyper" in help_text

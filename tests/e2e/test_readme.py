"""Every command in the README runs, in document order, as a reader would type it.

The ``sh`` and ``python`` code blocks of README.md run one after another in one scratch
directory (the tour builds on what the block before it left there), with the project's
virtualenv first on ``PATH`` and reachable as ``.venv``, and the repository's ``bench``,
``tests``, ``docs`` and ``.ci`` beside them. A block preceded by ``<!-- not run: why -->`` is
skipped (say why there); blocks in other languages (``json``, ``yaml``) are configuration,
not commands.

Most lines run exactly as written. A few kinds cannot, and are checked this way instead:

* setup: ``python3 -m venv .venv`` and ``.venv/bin/pip install …`` are left out (CI's own
  ``.ci/run`` does exactly them on a fresh clone); the extras a pip line names must exist.
* ``… -m pytest …`` gets ``--collect-only -q``: the paths and options must be valid, but
  running the suite from inside itself would recurse.
* ``bash .ci/with-postgres CMD``: the script must parse (``bash -n``), then CMD is checked as
  above; the throwaway PostgreSQL server is CI's.
* benchmarks (``-m bench.NAME``) run with ``--help`` (full runs take minutes to hours), except
  ``bench.plot``, which draws its plot for real into the scratch directory (``--out``).
* servers (``membraned``, ``membrane-es serve``, ``membrane-es mcp --http``, ``membrane-es
  ui``) start on port 0 of 127.0.0.1, must say they listen, and are then stopped with SIGTERM.
* a block that calls ``curl`` runs against the HTTP entries API: ``membraned -http`` is
  started on port 0 for it (its own store, API key ``$KEY``), and ``127.0.0.1:8080`` in the
  block is that port.

A line these rules do not cover runs as written: a command added to the README must pass
here as it is, or gain a rule above saying how it is checked.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BESIDE = ("bench", "tests", "docs", ".ci", "membrane_es", "pyproject.toml")
_FENCE = re.compile(r"^\s*```(\w*)")
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->")

# Runs a server in the background until it says it listens, then stops it.
SERVE_BRIEFLY = r"""
serve_briefly() {
  "$@" 2> server.log &
  local pid=$!
  while ! grep -qE "listening on|running on|API on" server.log; do
    if ! kill -0 "$pid" 2> /dev/null; then cat server.log >&2; return 1; fi
    sleep 0.05
  done
  kill -TERM "$pid"
  wait "$pid" || true
}
"""


@dataclass(frozen=True)
class Block:
    language: str
    text: str
    line: int  # where the block starts in README.md
    not_run: str = ""  # why, when the README says it is not run


def blocks(markdown: str) -> list[Block]:
    found: list[Block] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        start = index
        skip = _NOT_RUN.search(lines[start - 1]) if start else None
        body: list[str] = []
        index += 1
        while index < len(lines) and not _FENCE.match(lines[index]):
            body.append(lines[index])
            index += 1
        indent = len(lines[start]) - len(lines[start].lstrip())
        text = "\n".join(line[indent:] for line in body) + "\n"
        found.append(Block(fence.group(1), text, start + 1, skip.group(1) if skip else ""))
        index += 1
    return found


def strip_comment(line: str) -> str:
    """The line without a trailing ``# comment`` (a ``#`` outside quotes, after a space)."""
    quote = ""
    for position, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (position == 0 or line[position - 1].isspace()):
            return line[:position].rstrip()
    return line.rstrip()


def extras_defined() -> set[str]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return set(tomllib.load(file)["project"]["optional-dependencies"])


def shell_line(line: str) -> str:
    """How one README command line is run (see the module's rules)."""
    steps = []
    for step in strip_comment(line).split(" && "):
        step = step.strip()
        if step == "python3 -m venv .venv":
            continue
        if step.startswith(".venv/bin/pip install "):
            for extras in re.findall(r"\.\[([\w,-]+)\]", step):
                missing = set(extras.split(",")) - extras_defined()
                assert not missing, f"README installs undefined extras {missing}: {step}"
            continue
        steps.append(_checked(step))
    return " && ".join(steps) if steps else "true"


def _checked(step: str) -> str:
    postgres = re.match(r"bash \.ci/with-postgres (.+)", step)
    if postgres:
        return f"bash -n .ci/with-postgres && {_checked(postgres.group(1))}"
    if re.search(r"-m pytest\b", step):
        return f"{step} --collect-only -q"
    if re.search(r"-m bench\.plot\b", step):
        return f"{step} --out plot.png"
    if re.search(r"-m bench\.\w+", step):
        return f"{step} --help"
    command = re.sub(r"^(\w+=\S+\s+)*", "", step)
    if (re.match(r"(\S*/)?membraned\s", command) and "-version" not in command) or re.match(
        r"(\S*/)?membrane-es (serve|mcp .*--http)\b", command
    ):
        return "serve_briefly env " + re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:0", step)
    if re.match(r"(\S*/)?membrane-es ui\b", command):
        return "serve_briefly env " + re.sub(r"--port \d+", "--port 0", step)
    return step


def shell_script(text: str) -> str:
    joined = text.replace("\\\n", " ")
    lines = [shell_line(line) for line in joined.splitlines() if strip_comment(line).strip()]
    return "set -euo pipefail\n" + SERVE_BRIEFLY + "\n".join(lines) + "\n"


def test_every_readme_command_runs(tmp_path: Path) -> None:
    for name in BESIDE:
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env = {**os.environ, "PATH": f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("MEMBRANE_API_KEY", None)
    ran = 0
    for number, block in enumerate(blocks(README.read_text())):
        if block.not_run or block.language not in ("sh", "python"):
            continue
        if block.language == "python":
            script = tmp_path / f"block{number}.py"
            script.write_text(block.text)
            command = [sys.executable, str(script)]
        else:
            script = tmp_path / f"block{number}.sh"
            script.write_text(shell_script(block.text))
            command = ["bash", str(script)]
        if "curl " in block.text:
            result = _against_http_api(tmp_path, script, command, env)
        else:
            result = subprocess.run(
                command, cwd=tmp_path, env=env, capture_output=True, text=True, check=False
            )
        assert result.returncode == 0, (
            f"README.md line {block.line} ({block.language} block) failed:\n"
            f"{script.read_text()}\n--- stdout\n{result.stdout[-3000:]}\n"
            f"--- stderr\n{result.stderr[-3000:]}"
        )
        ran += 1
    assert ran >= 5
    assert (tmp_path / "plot.png").stat().st_size > 0


def _against_http_api(
    tmp_path: Path, script: Path, command: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run a curl block against a daemon serving the HTTP entries API on a free port."""
    key = "readme-key"
    server = subprocess.Popen(
        ["membraned", "-db", str(tmp_path / "http-store"), "-http", "127.0.0.1:0", "-no-grpc"],
        env={**env, "MEMBRANE_API_KEY": key},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        port = None
        for line in server.stderr:
            found = re.search(r"HTTP entries API on .*\(port (\d+)\)", line)
            if found:
                port = found.group(1)
                break
        assert port, "the HTTP entries API never said where it listens"
        script.write_text(script.read_text().replace("127.0.0.1:8080", f"127.0.0.1:{port}"))
        return subprocess.run(
            command,
            cwd=tmp_path,
            env={**env, "KEY": key},
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        server.terminate()
        server.wait(timeout=60)
        if server.stderr is not None:
            server.stderr.close()


def test_the_rules() -> None:
    assert shell_line("python3 -m venv .venv && .venv/bin/pip install -q -e . && x") == "x"
    assert shell_line(".venv/bin/python -m pytest  # all") == (
        ".venv/bin/python -m pytest --collect-only -q"
    )
    assert shell_line("bash .ci/with-postgres .venv/bin/python -m pytest") == (
        "bash -n .ci/with-postgres && .venv/bin/python -m pytest --collect-only -q"
    )
    assert shell_line(".venv/bin/python -m bench.core --records 9") == (
        ".venv/bin/python -m bench.core --records 9 --help"
    )
    assert shell_line("A=1 membraned -addr 127.0.0.1:9090 -db x") == (
        "serve_briefly env A=1 membraned -addr 127.0.0.1:0 -db x"
    )
    assert shell_line("membraned -version") == "membraned -version"
    assert shell_line("membrane-es ui ./memory --port 8700  # x") == (
        "serve_briefly env membrane-es ui ./memory --port 0"
    )
    assert shell_line("echo 'a # b'  # c") == "echo 'a # b'"
    assert [b.language for b in blocks("<!-- not run: x -->\n```sh\nls\n```\n")] == ["sh"]
    assert blocks("<!-- not run: needs y -->\n```sh\nls\n```\n")[0].not_run == "needs y"

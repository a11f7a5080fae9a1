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
  ui``) start on port 0 of 127.0.0.1, must say they listen, and are then stopped with
  SIGTERM — except a server started in the background (its line ends with ``&``), which
  runs as written, as a reader's would, for the blocks that follow until one of them stops
  it (whatever is still running when the test ends is stopped then).
* every ``127.0.0.1:PORT`` the README names is a free port of this machine (the same one in
  every block), so runs side by side never collide.
* ``export NAME=value`` in a block holds for the blocks after it, as in the reader's shell.

A line these rules do not cover runs as written: a command added to the README must pass
here as it is, or gain a rule above saying how it is checked.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
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
    if step.endswith("&"):  # a server in the background: as written (see the rules)
        return step
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
    readme = README.read_text()
    ports = free_ports(readme)
    groups: list[int] = []  # each block's process group: its background servers
    ran = 0
    try:
        for number, block in enumerate(blocks(readme)):
            if block.not_run or block.language not in ("sh", "python"):
                continue
            text = with_ports(block.text, ports)
            if block.language == "python":
                script = tmp_path / f"block{number}.py"
                script.write_text(text)
                command = [sys.executable, str(script)]
            else:
                script = tmp_path / f"block{number}.sh"
                script.write_text(shell_script(text))
                command = ["bash", str(script)]
                env.update(exported(text))
            process = subprocess.Popen(
                command,
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            groups.append(process.pid)
            stdout, stderr = process.communicate(timeout=1800)
            assert process.returncode == 0, (
                f"README.md line {block.line} ({block.language} block) failed:\n"
                f"{script.read_text()}\n--- stdout\n{stdout[-3000:]}\n"
                f"--- stderr\n{stderr[-3000:]}"
            )
            ran += 1
    finally:
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGTERM)
    assert ran >= 5
    assert (tmp_path / "plot.png").stat().st_size > 0


def free_ports(text: str) -> dict[str, str]:
    """Each ``127.0.0.1:PORT`` of ``text`` (but port 0) → the same address on a free port."""
    found: dict[str, str] = {}
    for port in sorted(set(re.findall(r"127\.0\.0\.1:(\d+)", text)) - {"0"}):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            found[f"127.0.0.1:{port}"] = f"127.0.0.1:{probe.getsockname()[1]}"
    return found


def with_ports(text: str, ports: dict[str, str]) -> str:
    return re.sub(r"127\.0\.0\.1:\d+", lambda m: ports.get(m.group(0), m.group(0)), text)


def exported(text: str) -> dict[str, str]:
    """The variables a block exports (``export NAME=value``), for the blocks after it."""
    return dict(re.findall(r"^export (\w+)=(\S+)", text, flags=re.MULTILINE))


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
    assert shell_line("membraned -addr 127.0.0.1:9 > log 2>&1 &") == (
        "membraned -addr 127.0.0.1:9 > log 2>&1 &"
    )
    assert with_ports("a 127.0.0.1:80 b", {"127.0.0.1:80": "127.0.0.1:5"}) == "a 127.0.0.1:5 b"
    assert exported("export KEY=x  # the key\nls\n") == {"KEY": "x"}
    assert shell_line("membrane-es ui ./memory --port 8700  # x") == (
        "serve_briefly env membrane-es ui ./memory --port 0"
    )
    assert shell_line("echo 'a # b'  # c") == "echo 'a # b'"
    assert [b.language for b in blocks("<!-- not run: x -->\n```sh\nls\n```\n")] == ["sh"]
    assert blocks("<!-- not run: needs y -->\n```sh\nls\n```\n")[0].not_run == "needs y"

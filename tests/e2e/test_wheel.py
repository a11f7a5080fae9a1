"""The wheel as an index would get it: built by setuptools' own backend from a copy of the
sources, holding the type marker, the licence file and the SPDX licence metadata.

A build takes about a second: no isolated environment (nothing is downloaded; the dev extra
installs setuptools), no sdist step.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "membrane_es")
BUILD = "import sys, setuptools.build_meta as backend; backend.build_wheel(sys.argv[1])"


def test_the_wheel_ships_types_licence_and_project_urls(tmp_path: Path) -> None:
    # A build writes build/ and *.egg-info beside the sources: it works on a copy, in a
    # process of its own (the backend builds from its working directory).
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            ignored = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(ROOT / name, source / name, ignore=ignored)
        else:
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-c", BUILD, str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]

    (wheel_path,) = out.glob("membrane_es-*.whl")
    with zipfile.ZipFile(wheel_path) as wheel:
        names = set(wheel.namelist())
        (metadata_name,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        dist_info = metadata_name.split("/")[0]
        metadata = Parser().parsestr(wheel.read(metadata_name).decode())
        licence = wheel.read(f"{dist_info}/licenses/LICENSE")

    assert "membrane_es/py.typed" in names
    assert "membrane_es/grpc_server/proto/membrane/v1/membrane.proto" in names
    # the inspector's pages render from templates and one style sheet shipped beside its code
    assert "membrane_es/http_api/ui/templates/base.html" in names
    assert "membrane_es/http_api/ui/static/ui.css" in names
    assert not any(name.startswith(("tests/", "bench/")) for name in names)
    assert licence == (ROOT / "LICENSE").read_bytes()
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL") or [])
    assert urls["Reference implementation (Membrane)"].startswith("https://github.com/")
    for label, url in urls.items():  # absolute: an index shows them as links
        parts = urlsplit(url)
        assert parts.scheme == "https" and parts.netloc, (label, url)

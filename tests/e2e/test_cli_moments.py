"""A moment past the calendar's ends given to the command line (``--as-of``, ``--timestamp``)
is a validation error naming the option's field, never an ``OverflowError``."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane_es.cli import main
from tests.faults.input_classes import MOMENTS_PAST_THE_ENDS


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli-moments") / "memory"
    assert main(["capture", str(path), "--text", "a note about moments"]) == 0
    return path


@pytest.mark.parametrize("moment", MOMENTS_PAST_THE_ENDS)
@pytest.mark.parametrize("command", [["list"], ["retrieve", "a note"], ["stats"], ["metrics"]])
def test_a_moment_past_the_calendars_ends_is_a_validation_error(
    store: Path, command: list[str], moment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([command[0], str(store), *command[1:], "--as-of", moment])
    err = capsys.readouterr().err
    assert code != 0
    assert "validation error for as_of" in err and "outside the calendar" in err, err
    assert "OverflowError" not in err

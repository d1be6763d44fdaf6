"""``status`` and ``audit`` refuse a local lakehouse folder that does not exist, and
``maintain``, ``replay`` and ``sql`` warn about one (``pipelines.ops.common.loaded_config``),
before any Spark session: a typo in the path must not read as an empty, healthy lakehouse."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from pipelines import cli

ConfigFor = Callable[[Path], Path]


@pytest.mark.parametrize("command", ["audit", "status"])
def test_a_missing_lakehouse_folder_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config_for: ConfigFor, command: str
) -> None:
    missing = tmp_path / "lh_typo"
    config = config_for(missing)
    assert cli.main([command, "--config", str(config)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"protolake {command}: configuration error: lakehouse.path: {missing} does not exist "
        "(bronze and silver create it on their first run); is the path right?"
    )
    assert not missing.exists()


@pytest.mark.parametrize(
    ("command", "bad_argument", "its_error"),
    [
        ("maintain", ["--retention-hours", "-1"], "--retention-hours must be >= 0"),
        ("replay", ["--since", "yesterday"], "not an ISO 8601 time: 'yesterday'"),
    ],
)
def test_maintenance_commands_warn_of_a_missing_lakehouse_folder(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    config_for: ConfigFor,
    command: str,
    bad_argument: list[str],
    its_error: str,
) -> None:
    """The warning comes as the configuration loads (a bad argument then ends the command
    before any Spark session); the folder is not created."""
    missing = tmp_path / "lh_typo"
    config = config_for(missing)
    assert cli.main([command, "--config", str(config), *bad_argument]) == 2
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == "pipelines.ops" and r.levelno == logging.WARNING
    ]
    assert warnings == [
        f"lakehouse.path: {missing} does not exist (bronze and silver create it on their first "
        "run): nothing to do there; is the path right?"
    ]
    assert its_error in capsys.readouterr().err
    assert not missing.exists()


def test_an_existing_lakehouse_folder_is_no_warning(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    config_for: ConfigFor,
) -> None:
    lakehouse = tmp_path / "lh"
    lakehouse.mkdir()
    config = config_for(lakehouse)
    assert cli.main(["maintain", "--config", str(config), "--retention-hours", "-1"]) == 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "--retention-hours must be >= 0" in capsys.readouterr().err

"""``status`` and ``audit`` refuse a local lakehouse folder that does not exist, and
``maintain``, ``replay`` and ``sql`` warn about one (``pipelines.ops.common.loaded_config``),
before any Spark session: a typo in the path must not read as an empty, healthy lakehouse."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pipelines import cli


def _config(folder: Path, lakehouse: Path) -> Path:
    config = folder / "protolake.toml"
    config.write_text(
        '[kafka]\nbootstrap_servers = "127.0.0.1:9092"\ntopics = ["t"]\n'
        f'[lakehouse]\npath = "{lakehouse}"\n'
    )
    return config


@pytest.mark.parametrize("command", ["audit", "status"])
def test_a_missing_lakehouse_folder_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    missing = tmp_path / "lh_typo"
    config = _config(tmp_path, missing)
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
    command: str,
    bad_argument: list[str],
    its_error: str,
) -> None:
    """The warning comes as the configuration loads (a bad argument then ends the command
    before any Spark session); the folder is not created."""
    missing = tmp_path / "lh_typo"
    config = _config(tmp_path, missing)
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
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    lakehouse = tmp_path / "lh"
    lakehouse.mkdir()
    config = _config(tmp_path, lakehouse)
    assert cli.main(["maintain", "--config", str(config), "--retention-hours", "-1"]) == 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "--retention-hours must be >= 0" in capsys.readouterr().err

"""``status`` and ``audit`` refuse a local lakehouse folder that does not exist
(``pipelines.ops.common.loaded_config``), before any Spark session: a typo in the path must not
read as an empty, healthy lakehouse."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines import cli


@pytest.mark.parametrize("command", ["audit", "status"])
def test_a_missing_lakehouse_folder_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    missing = tmp_path / "lh_typo"
    config = tmp_path / "protolake.toml"
    config.write_text(
        '[kafka]\nbootstrap_servers = "127.0.0.1:9092"\ntopics = ["t"]\n'
        f'[lakehouse]\npath = "{missing}"\n'
    )
    assert cli.main([command, "--config", str(config)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"protolake {command}: configuration error: lakehouse.path: {missing} does not exist "
        "(bronze and silver create it on their first run); is the path right?"
    )
    assert not missing.exists()

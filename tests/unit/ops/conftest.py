"""A minimal configuration file for the operations commands' tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def config_for(tmp_path: Path) -> Callable[[Path], Path]:
    """Write a configuration whose lakehouse is the given folder; return its path."""

    def write(lakehouse: Path) -> Path:
        config = tmp_path / "protolake.toml"
        config.write_text(
            '[kafka]\nbootstrap_servers = "127.0.0.1:9092"\ntopics = ["t"]\n'
            f'[lakehouse]\npath = "{lakehouse}"\n'
        )
        return config

    return write

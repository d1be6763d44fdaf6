"""One replay at a time on a local lakehouse (``protolake replay`` locks
``_writers/replay``), refused before any Spark session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pipelines import cli
from tests.support.lock_holder import hold_in_another_process


def test_a_second_replay_on_a_local_lakehouse_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config_for: Callable[[Path], Path]
) -> None:
    """Two replays at once would both write the records silver does not hold yet."""
    lakehouse = tmp_path / "lh"
    lakehouse.mkdir()
    running = lakehouse / "_writers" / "replay"
    holder = hold_in_another_process(running)  # the other replay
    try:
        assert cli.main(["replay", "--config", str(config_for(lakehouse))]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"protolake replay: {running}: pid {holder.pid} on ")
        assert "replays already; wait for it to end" in err
    finally:
        holder.kill()
        holder.wait()

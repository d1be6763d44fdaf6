"""With ``--json`` a command's metrics lines on stderr are bare JSON, one document a line
(``cli.configure_logging``); every other log line keeps its time, level and logger."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import logging
from pipelines.cli import configure_logging
configure_logging(verbose=False, as_json=True)
logging.getLogger("pipelines.metrics").info('{"event": "batch", "records": 3}')
logging.getLogger("pipelines.silver").info("silver: batch 0 done")
"""


def test_metrics_lines_are_bare_json_and_the_rest_keeps_its_prefix() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    first, second = done.stderr.splitlines()
    assert json.loads(first) == {"event": "batch", "records": 3}
    assert second.endswith(" INFO pipelines.silver: silver: batch 0 done")

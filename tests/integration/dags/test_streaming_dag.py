"""protolake_streaming's task function against the real broker and registry: it starts the
continuous bronze and silver streams (spark-submit, processing-time, detached), judges them
healthy and caught up from their checkpoints, and starts bronze again after it was killed,
failing that check (a stream that died is a failed task, not a green restart)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from pipelines.demo_stream import produce_demo_stream
from tests.support.airflow_kit import make_airflow

pytestmark = pytest.mark.integration

RECORDS = 60
ENSURE = """
import json
from protolake_support import StreamDiedError, ensure_stream
try:
    print(json.dumps(ensure_stream({job!r}, 600.0)))
except StreamDiedError as exc:
    print(json.dumps({{"error": str(exc)}}))
"""
COUNTS = """
import json
from protolake_support import config_path, lakehouse_counts
print(json.dumps(lakehouse_counts(config_path())))
"""


def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ok, last = check()
        if ok:
            return last
        time.sleep(5)
    raise AssertionError(f"{what}: not reached in {timeout} s; last seen {last}")


@pytest.mark.timeout(2400)
def test_streams_are_started_judged_and_restarted_after_a_kill(
    bootstrap: str, registry_url: str, topic_prefix: str, tmp_path: Path
) -> None:
    summary = produce_demo_stream(
        bootstrap,
        registry_url,
        topic_prefix=topic_prefix,
        records=RECORDS,
        seed=5,
        poison_every=15,
    )
    lake, state = tmp_path / "lake", tmp_path / "streams"
    config = tmp_path / "protolake.toml"
    topics = ", ".join(json.dumps(t) for t in summary.topics)
    config.write_text(
        f'[lakehouse]\npath = "{lake}"\n'
        f'[kafka]\nbootstrap_servers = "{bootstrap}"\ntopics = [{topics}]\n'
        '[registry]\nurl = "${env:PROTOLAKE_REGISTRY_URL}"\nmax_retries = 2\n'
        '[bronze]\nprocessing_interval = "5 seconds"\n'
        '[silver]\nprocessing_interval = "5 seconds"\ncatalog_database = ""\n'
    )
    airflow = make_airflow(tmp_path / "airflow", config, registry_url, state)

    def totals() -> tuple[bool, Any]:
        counts = airflow.python(COUNTS)
        sums = {k: sum(v or 0 for v in t.values()) for k, t in counts.items()}
        return sums, counts

    try:
        started = airflow.python(ENSURE.format(job="bronze"))
        assert (started["verdict"], started["action"]) == ("dead", "started"), started
        first_pid = int((state / "bronze.pid").read_text())
        wait_for(lambda: ((s := totals()[0])["bronze"] == RECORDS, s), 900, "bronze landed")

        silver = airflow.python(ENSURE.format(job="silver"))
        assert silver["action"] == "started", silver
        wait_for(
            lambda: (
                (s := totals()[0])["silver"] + s["quarantine"] == RECORDS and s["silver"] > 0,
                s,
            ),
            900,
            "silver + quarantine = bronze",
        )

        for job in ("bronze", "silver"):
            again = airflow.python(ENSURE.format(job=job))
            assert (again["verdict"], again["action"], again["lag"]) == ("healthy", "none", 0)
        assert int((state / "bronze.pid").read_text()) == first_pid

        os.killpg(first_pid, signal.SIGKILL)
        wait_for(lambda: (not Path(f"/proc/{first_pid}").exists(), first_pid), 60, "killed")
        restarted = airflow.python(ENSURE.format(job="bronze"))
        assert f"bronze stream (pid {first_pid}," in restarted["error"], restarted
        assert "died since the previous check" in restarted["error"]
        assert "started again as pid" in restarted["error"]
        assert int((state / "bronze.pid").read_text()) != first_pid
        assert "=== " in (state / "bronze.log").read_text()  # the log of both starts
    finally:
        from protolake_support import stop_stream, stream_pid

        for job in ("bronze", "silver"):
            pid = stream_pid(job, state)
            if pid is not None:
                stop_stream(job, pid, grace_seconds=60)

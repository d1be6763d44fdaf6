"""protolake_streaming's task function against the real broker and registry: it starts the
continuous bronze and silver streams (spark-submit, processing-time, detached), judges them
healthy and caught up from their checkpoints, and starts bronze again after it was killed,
failing that check (a stream that died is a failed task, not a green restart)."""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pipelines.demo.produce import produce_demo_stream
from tests.support.airflow_kit import make_airflow

pytestmark = pytest.mark.integration

RECORDS = 60
# The DAG's start-up watch is 15 s: a stream that fails within it fails the start. Here every
# start succeeds (a crash after the watch is what the test provokes), so 5 s (the JVM is up and
# the job has read its configuration) checks the same and saves 10 s per start.
ENSURE = """
import json
import protolake_support.supervision as s
s.START_WATCH_SECONDS = 5.0
try:
    print(json.dumps(s.ensure_stream({job!r}, 600.0)))
except s.StreamDiedError as exc:
    print(json.dumps({{"error": str(exc)}}))
"""


def bronze_checkpoint(lake: Path) -> str:
    """What bronze's checkpoint says: the last batch planned, the last committed, the offsets."""
    from protolake_support.progress import read_checkpoint

    from lakehouse.layout import Layout
    from lakehouse.store import Store

    return str(read_checkpoint(Layout(str(lake)).checkpoint("bronze", "per_topic"), Store.local()))


def wait_for(
    check: Any,
    timeout: float,
    what: str,
    streams: tuple[str, ...] = (),
    state: Path | None = None,
    config: Path | None = None,
    explain: Any = None,
) -> Any:
    """Poll ``check`` (``(ok, seen)``) each second until ok; fail at once when one of the
    started ``streams`` (their pid files and logs in ``state``, started with ``config``) has
    died, and on timeout; the failure shows what was last seen, ``explain()`` (more of the
    state, as text) and the end of the streams' logs."""
    from protolake_support.supervision import stream_log_tail, stream_pid

    def failure(why: str, jobs: list[str]) -> AssertionError:
        logs = [stream_log_tail(state / f"{job}.log", str(config)) for job in jobs if state]
        more = explain() if explain else ""
        return AssertionError("\n".join([f"{what}: {why}; last seen {last}", more, *logs]))

    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ok, last = check()
        if ok:
            return last
        dead = [job for job in streams if stream_pid(job, state) is None]
        if dead:
            raise failure(f"{dead} died", dead)
        time.sleep(1)
    raise failure(f"not reached in {timeout} s", list(streams))


@pytest.mark.timeout(2400)
def test_streams_are_started_judged_and_restarted_after_a_kill(
    bootstrap: str, registry_url: str, topic_prefix: str, tmp_path: Path, monkeypatch: Any
) -> None:
    # what the configuration names, as the streams see it: the log tails of a failure are read
    # (and their secrets hidden) through it here too
    monkeypatch.setenv("PROTOLAKE_REGISTRY_URL", registry_url)
    summary = produce_demo_stream(
        bootstrap,
        registry_url,
        topic_prefix=topic_prefix,
        records=RECORDS,
        seed=5,
        poison_every=15,
    )
    # two of the stream's topics: the streams treat every table alike, and each topic more is
    # a query more in the silver stream on the same two cores
    part = summary.on_topics([f"{topic_prefix}orders", f"{topic_prefix}inventory"])
    lake, state = tmp_path / "lake", tmp_path / "streams"
    config = tmp_path / "protolake.toml"
    topics = ", ".join(json.dumps(t) for t in part.topics)
    config.write_text(
        f'[lakehouse]\npath = "{lake}"\n'
        f'[kafka]\nbootstrap_servers = "{bootstrap}"\ntopics = [{topics}]\n'
        '[registry]\nurl = "${env:PROTOLAKE_REGISTRY_URL}"\nmax_retries = 2\n'
        '[bronze]\nprocessing_interval = "5 seconds"\n'
        '[silver]\nprocessing_interval = "5 seconds"\n[catalog]\nsilver_database = ""\n'
    )
    airflow = make_airflow(tmp_path / "airflow", config, registry_url, state)

    def totals() -> tuple[bool, Any]:
        # the summary's counts, read in this process (deltalake, milliseconds): polling through
        # a fresh Airflow interpreter cost seconds per look
        from protolake_support.tables import layout_counts

        from lakehouse.layout import Layout
        from lakehouse.store import Store

        counts = layout_counts(Layout(str(lake)), Store.local())
        sums = {k: sum(v or 0 for v in t.values()) for k, t in counts.items()}
        return sums, counts

    try:
        started = airflow.python(ENSURE.format(job="bronze"))
        assert (started["verdict"], started["action"]) == ("dead", "started"), started
        first_pid = int((state / "bronze.pid").read_text())
        wait_for(
            lambda: ((s := totals())[0]["bronze"] == part.records, s),
            300,  # bronze lands in ~30 s even with both cores busy; past 300 s it has stalled
            "bronze landed",
            ("bronze",),
            state,
            config,
            lambda: bronze_checkpoint(lake),
        )

        silver = airflow.python(ENSURE.format(job="silver"))
        assert silver["action"] == "started", silver
        wait_for(
            lambda: (
                (s := totals())[0]["silver"] + s[0]["quarantine"] == part.records
                and s[0]["silver"] > 0,
                s,
            ),
            900,
            "silver + quarantine = bronze",
            ("bronze", "silver"),
            state,
            config,
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
        from protolake_support.supervision import stop_stream, stream_pid

        # both at once: each waits for its JVM to stop its queries and exit
        running = [(job, pid) for job in ("bronze", "silver") if (pid := stream_pid(job, state))]
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda stream: stop_stream(*stream, grace_seconds=60), running))

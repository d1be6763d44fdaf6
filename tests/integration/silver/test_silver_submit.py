"""The silver job through spark-submit on a Spark standalone cluster (a master and a worker on
127.0.0.1, started here from pyspark's own spark-class): the codec and the rest of protolake
reach the executors only as the --py-files zip that pipelines.jobs.submit_command builds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyspark
import pytest

from lakehouse.delta import list_delta_tables
from lakehouse.layout import Layout
from pipelines import bronze
from pipelines.demo.produce import produce_demo_stream
from pipelines.jobs import submit_command
from pipelines.quarantine import check_invariant
from tests.support.silver_itkit import make_config, unique_prefix, write_config_file
from tests.support.stack import free_port

pytestmark = pytest.mark.integration

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _wait_for_text(path: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(
        f"{path}: no {text!r} after {timeout} s:\n{path.read_text(errors='replace')[-3000:]}"
    )


@pytest.mark.timeout(3000)  # two more JVMs on a shared 2-core machine
def test_silver_job_on_a_standalone_cluster(
    bootstrap: str, registry: Any, spark: Any, tmp_path: Path
) -> None:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    master_port, work = free_port(), tmp_path / "work"
    master_url = f"spark://127.0.0.1:{master_port}"
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    # The master and the worker start (two JVMs) while this process produces the stream and
    # runs bronze: their start-ups overlap the set-up instead of following it.
    master = subprocess.Popen(
        [
            str(SPARK_CLASS),
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(master_port),
            "--webui-port",
            str(free_port()),
        ],
        env=env,
        stdout=master_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    worker = None
    try:
        summary = produce_demo_stream(
            bootstrap,
            registry.url,
            topic_prefix=unique_prefix("submit"),
            records=120,
            seed=5,
            poison_every=12,
        )
        lake = tmp_path / "lake"
        cfg = make_config(lake, summary.topics, registry.url)
        config = write_config_file(tmp_path / "silver.toml", lake, summary.topics, registry.url)
        # the worker starts once the master leads: a worker that finds no master retries only
        # after 5 to 15 s
        _wait_for_text(master_log, "I have been elected leader", 180)
        worker = subprocess.Popen(
            [
                str(SPARK_CLASS),
                "org.apache.spark.deploy.worker.Worker",
                master_url,
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "1g",
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(work),
            ],
            env=env,
            stdout=worker_log.open("w"),
            stderr=subprocess.STDOUT,
        )
        bronze.run(cfg, trigger="available-now", spark=spark)
        _wait_for_text(worker_log, "Successfully registered with master", 180)
        cmd = submit_command(
            "silver",
            config,
            master=master_url,
            args=["--trigger", "available-now"],
            python=sys.executable,
            conf={
                "spark.driver.host": "127.0.0.1",
                "spark.driver.memory": "768m",
                "spark.executor.memory": "512m",
                "spark.cores.max": "2",
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.databricks.delta.snapshotPartitions": "2",
            },
        )
        submit_log = tmp_path / "submit.log"
        with submit_log.open("w") as out:
            done = subprocess.run(
                cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=2400
            )
        text = submit_log.read_text(errors="replace")
        assert done.returncode == 0, text[-6000:]
        assert "silver:" in text
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)

    # the executors ran the codec from the shipped zip (spark-submit --py-files)
    assert list(work.glob("app-*/*/protolake-*.zip")), sorted(str(p) for p in work.rglob("*"))[:50]
    report = check_invariant(spark, str(lake))
    assert report.holds, report.summary()
    assert report.bronze_records == summary.records
    rows = (
        spark.read.format("delta")
        .load(Layout(str(lake)).quarantine)
        .groupBy("reason_code")
        .count()
        .collect()
    )
    assert {r[0]: r[1] for r in rows} == summary.expected_quarantine_by_reason(quarantine_rules=())
    assert len(list_delta_tables(f"{lake}/silver", spark)) == len(summary.per_message_type)

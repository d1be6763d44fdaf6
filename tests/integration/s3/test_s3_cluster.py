"""Bronze and silver through spark-submit on a standalone cluster that shares nothing but the
object store: a master and two workers on loopback, each worker with its own work and scratch
folders, the lakehouse on the stack's S3 store. One worker is killed while silver's batch
runs on it; the job finishes on the other, and the lakehouse holds every record exactly once
(checked record by record, and read back with delta-rs from the store)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyspark
import pytest

from lakehouse.layout import Layout, table_name
from lakehouse.tables import list_delta_tables
from pipelines.demo.produce import produce_demo_stream
from pipelines.jobs import submit_command
from pipelines.quarantine import check_invariant
from pipelines.settings import parse_config
from pipelines.settings.clients import prepare_session
from pipelines.settings.object_store import delta_storage_options
from tests.support.stack import BOOTSTRAP, free_port

pytestmark = pytest.mark.integration

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
RECORDS = 1500
SUBMIT_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.memory": "768m",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
}


def wait_for(predicate: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"no {what} after {timeout} s")


def text_of(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def start_worker(master_url: str, home: Path, env: dict[str, str]) -> subprocess.Popen[Any]:
    (home / "scratch").mkdir(parents=True)
    worker_env = {**env, "SPARK_LOCAL_DIRS": str(home / "scratch")}
    cmd = [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", master_url]
    cmd += ["--host", "127.0.0.1", "--cores", "1", "--memory", "768m"]
    cmd += ["--webui-port", str(free_port()), "--work-dir", str(home / "work")]
    log = (home / "worker.log").open("w")
    return subprocess.Popen(cmd, env=worker_env, stdout=log, stderr=subprocess.STDOUT)


def write_config(
    path: Path, lake: str, topics: list[str], registry_url: str, endpoint: str
) -> Path:
    """The jobs' TOML: the store's keys come from the environment, never from the file."""
    path.write_text(
        "\n".join(
            [
                "[lakehouse]",
                f'path = "{lake}"',
                "[s3]",
                f'endpoint = "{endpoint}"',
                "path_style_access = true",
                'access_key_id = "${env:AWS_ACCESS_KEY_ID}"',
                'secret_access_key = "${env:AWS_SECRET_ACCESS_KEY}"',
                "[kafka]",
                f'bootstrap_servers = "{BOOTSTRAP}"',
                "topics = [" + ", ".join(f'"{t}"' for t in topics) + "]",
                "[registry]",
                f'url = "{registry_url}"',
                "[catalog]",
                'bronze_database = ""',
                'silver_database = ""',
                'quarantine_database = ""',
                'quality_database = ""',
            ]
        )
        + "\n"
    )
    return path


def submit(job: str, config: Path, master_url: str, env: dict[str, str], log: Path) -> Any:
    cmd = submit_command(
        job,
        config,
        master=master_url,
        args=["--trigger", "available-now"],
        python=sys.executable,
        conf=SUBMIT_CONF,
    )
    return subprocess.Popen(
        cmd, cwd=log.parent, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
    )


@pytest.mark.timeout(900)
def test_two_workers_share_nothing_and_survive_a_killed_worker(
    spark, s3_store, bucket, bootstrap, registry_url, topic_prefix_factory, tmp_path
):
    env = {**os.environ, **s3_store.environment, "SPARK_LOCAL_IP": "127.0.0.1"}
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    master_port = free_port()
    master_url = f"spark://127.0.0.1:{master_port}"
    master_log = tmp_path / "master.log"
    master = subprocess.Popen(
        [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        + ["--port", str(master_port), "--webui-port", str(free_port())],
        env=env,
        stdout=master_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    workers: list[subprocess.Popen[Any]] = []
    homes = [tmp_path / "worker-1", tmp_path / "worker-2"]
    lake = f"s3a://{bucket}/lh"
    try:
        prefix = topic_prefix_factory()
        # two of the stream's topics (orders, customers with framed keys): the cluster runs
        # every table alike, and each topic more is a query more in each submitted job
        part = produce_demo_stream(
            bootstrap,
            registry_url,
            topic_prefix=prefix,
            records=RECORDS,
            seed=9,
            poison_every=25,
        ).on_topics([f"{prefix}orders", f"{prefix}customers"])
        config = write_config(
            tmp_path / "protolake.toml", lake, part.topics, registry_url, s3_store.endpoint
        )
        wait_for(lambda: "I have been elected leader" in text_of(master_log), "master", 180)
        workers = [start_worker(master_url, home, env) for home in homes]
        for home in homes:
            wait_for(
                lambda h=home: "Successfully registered with master" in text_of(h / "worker.log"),
                "worker registration",
                180,
            )
        bronze_log = tmp_path / "bronze.log"
        done = submit("bronze", config, master_url, env, bronze_log).wait(timeout=400)
        assert done == 0, text_of(bronze_log)[-6000:]

        bronze_apps = {p.name for home in homes for p in home.glob("work/app-*")}
        silver_log = tmp_path / "silver.log"
        silver = submit("silver", config, master_url, env, silver_log)

        def silver_stderr(home: Path) -> str:
            return "".join(
                text_of(p)
                for p in home.glob("work/app-*/*/stderr")
                if p.parent.parent.name not in bronze_apps
            )

        def running_on_worker_1() -> bool:
            return "Running task" in silver_stderr(homes[0])

        wait_for(running_on_worker_1, "task on worker 1", 400)
        workers[0].kill()  # mid-batch: its executor loses its worker and exits
        assert silver.wait(timeout=600) == 0, text_of(silver_log)[-6000:]
    finally:
        for w in workers:
            stop(w)
        stop(master)

    # Executors got the code only as the shipped zip, and each worker wrote only its own folders.
    for home in homes:
        assert list(home.glob("work/app-*/*/protolake-*.zip")), sorted(map(str, home.rglob("*")))[
            :40
        ]
    assert "Running task" in silver_stderr(homes[1])  # silver finished on the other worker
    cfg = parse_config(
        {
            "lakehouse": {"path": lake},
            "kafka": {"bootstrap_servers": BOOTSTRAP, "topics": part.topics},
            "s3": s3_store.section(),
        }
    )
    prepare_session(spark, cfg)
    report = check_invariant(spark, lake)
    assert report.holds, report.offenders
    assert report.bronze_records == part.records
    from deltalake import DeltaTable

    options = delta_storage_options(cfg)
    layout = Layout(lake)
    rows_by_table = {
        table_name(p): DeltaTable(p, storage_options=options).to_pyarrow_table().num_rows
        for p in list_delta_tables(layout.silver, spark)
    }
    silver_rows = sum(rows_by_table.values())
    quarantined = DeltaTable(layout.quarantine, storage_options=options).to_pyarrow_table()
    assert (
        silver_rows + quarantined.num_rows
        == part.records
        == report.silver_records + report.quarantined_records
    )
    # a silver table per message type, with its records (StreamPart.silver_rows_by_table says
    # why only the tables with rows), and each quarantined record with the reason it earned
    assert {name: n for name, n in rows_by_table.items() if n} == part.silver_rows_by_table(
        quarantine_rules=()
    )
    reasons = Counter(quarantined.column("reason_code").to_pylist())
    assert reasons == part.expected_quarantine_by_reason(quarantine_rules=())

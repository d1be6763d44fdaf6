"""pipelines.spark.build_session in-process against a real Spark standalone master (what
``protolake status|sql|replay`` do with ``[spark] master = "spark://..."``): the driver must
not advertise a loopback address (executors on other hosts connect back to it), and the
small-machine settings of a local master stay off. The master runs on 127.0.0.1 here, started
from pyspark's own spark-class; the driver registers with it from a routable address."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from tests.support.stack import free_port

pytestmark = pytest.mark.integration

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
SESSION = """
import json, os
from pipelines.spark import build_session
spark = build_session("protolake-cluster-session", master={master!r})
conf = spark.sparkContext.getConf()
print(json.dumps({{
    "driver_host": conf.get("spark.driver.host"),
    "ui_enabled": conf.get("spark.ui.enabled", None),
    "shuffle_partitions": conf.get("spark.sql.shuffle.partitions", None),
    "spark_local_ip": os.environ.get("SPARK_LOCAL_IP"),
    "app_id": spark.sparkContext.applicationId,
}}))
spark.stop()
"""


def wait_for_text(path: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise AssertionError(f"{path}: no {text!r} after {timeout} s:\n{path.read_text()[-3000:]}")


@pytest.mark.timeout(600)
def test_an_in_process_session_on_a_standalone_master_keeps_no_loopback(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SPARK_LOCAL_IP", "PYSPARK_SUBMIT_ARGS", "PROTOLAKE_SPARK_MASTER")
    }
    port, master_log = free_port(), tmp_path / "master.log"
    master = subprocess.Popen(
        [
            str(SPARK_CLASS),
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(free_port()),
        ],
        env={**env, "SPARK_LOCAL_IP": "127.0.0.1"},  # the master only: on loopback here
        stdout=master_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_text(master_log, "I have been elected leader", 180)
        url = f"spark://127.0.0.1:{port}"
        done = subprocess.run(
            [sys.executable, "-c", SESSION.format(master=url)],
            env={**env, "PYSPARK_PYTHON": sys.executable},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        wait_for_text(master_log, "Registered app protolake-cluster-session", 60)
    finally:
        master.send_signal(signal.SIGTERM)
        try:
            master.wait(timeout=30)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait(timeout=30)
    assert not seen["driver_host"].startswith("127."), seen
    assert seen["spark_local_ip"] is None, "build_session set a loopback SPARK_LOCAL_IP"
    assert seen["ui_enabled"] is None and seen["shuffle_partitions"] is None, seen
    assert seen["app_id"].startswith("app-"), seen  # a standalone application id

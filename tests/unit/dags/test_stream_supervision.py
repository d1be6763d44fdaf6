"""dags/protolake_support.py's supervision of the continuous streams (``ensure_stream``), run
for real in a fresh Airflow interpreter against a stand-in spark-submit (under a separate
SPARK_HOME) that behaves like a stream: it resolves the configuration as the job does, writes
a committed batch to its checkpoint, prints to its log, and stays up or crashes after a while.

- a cluster master: the stream gets no loopback address (SPARK_LOCAL_IP / spark.driver.host);
- a relative ``lakehouse.path``: the stream and the health check see the same lakehouse;
- a stream that crashes after its start-up check on every start fails the task (with the end
  of its log, secrets redacted) instead of being restarted silently.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

STAND_IN = """#!{python}
import json, os, sys, time
from pipelines.settings import load_config
config = sys.argv[sys.argv.index("--config") + 1]
keys = ("SPARK_LOCAL_IP", "PROTOLAKE_REGISTRY_AUTH")
with open(os.environ["FAKE_OUT"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(),
                        "env": {{k: os.environ.get(k) for k in keys}}}}) + "\\n")
# what the bronze job does first: its lakehouse, resolved as the job resolves it
lake = load_config(config).lakehouse_path
checkpoint = os.path.join(lake, "_checkpoints", "bronze", "per_topic")
for sub in ("offsets", "commits"):
    os.makedirs(os.path.join(checkpoint, sub), exist_ok=True)
with open(os.path.join(checkpoint, "offsets", "0"), "w") as f:
    f.write('v1\\n{{"batchWatermarkMs":0,"batchTimestampMs":0}}\\n')
with open(os.path.join(checkpoint, "commits", "0"), "w") as f:
    f.write('v1\\n{{"nextBatchWatermarkMs":0}}\\n')
print("stand-in stream up", flush=True)
# a careless library printing its settings: the secrets must not reach the task's error
print("registry auth", os.environ.get("PROTOLAKE_REGISTRY_AUTH"), flush=True)
print("jaas", os.environ.get("TEST_KAFKA_JAAS"), flush=True)
time.sleep(float(os.environ["FAKE_SECONDS"]))
print("Traceback (most recent call last):\\nRuntimeError: boom, the stream crashed", flush=True)
sys.exit(1)
"""

SUPERVISE = """
import json, time
import protolake_support as s
s.START_WATCH_SECONDS = {watch}
out = []
def dead():
    deadline = time.monotonic() + 60
    while s.stream_pid("bronze") is not None and time.monotonic() < deadline:
        time.sleep(0.5)
try:
    for i in range({checks}):
        if i and {wait_for_death}:
            dead()
        try:
            out.append(s.ensure_stream("bronze", 600.0))
        except s.StreamDiedError as exc:
            out.append({{"error": str(exc)}})
finally:
    pid = s.stream_pid("bronze")
    if pid is not None:
        s.stop_stream("bronze", pid, grace_seconds=10)
print(json.dumps(out))
"""

PASSWORD = "pa55-w0rd-xyz"
JAAS_PASSWORD = "kafka-s3cret-42"


@pytest.fixture
def stream_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "spark-elsewhere"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "spark-submit"
    script.write_text(STAND_IN.format(python=sys.executable))
    script.chmod(0o755)
    config = tmp_path / "conf" / "protolake.toml"
    config.parent.mkdir()
    config.write_text(
        '[lakehouse]\npath = "lake"\n'  # relative: resolved against the current directory
        '[kafka]\nbootstrap_servers = "127.0.0.1:9"\ntopics = ["t"]\n'
        '[kafka.options]\n"security.protocol" = "SASL_PLAINTEXT"\n'
        '"sasl.mechanism" = "PLAIN"\n"sasl.jaas.config" = "${env:TEST_KAFKA_JAAS}"\n'
        '[registry]\nurl = "${env:PROTOLAKE_REGISTRY_URL}"\n'
        'basic_auth = "${env:PROTOLAKE_REGISTRY_AUTH}"\n'
    )
    return {
        "SPARK_HOME": str(home),
        "FAKE_OUT": str(tmp_path / "submitted.jsonl"),
        "PROTOLAKE_CONFIG": str(config),
        "PROTOLAKE_STREAM_STATE_DIR": str(tmp_path / "streams"),
        "TEST_KAFKA_JAAS": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="u" password="{JAAS_PASSWORD}";'
        ),
        "AIRFLOW_CONN_PROTOLAKE_REGISTRY": json.dumps(
            {
                "conn_type": "http",
                "host": "127.0.0.1",
                "port": 9,
                "login": "svc",
                "password": PASSWORD,
            }
        ),
    }


def supervise(
    airflow_env: dict[str, str],
    env: dict[str, str],
    cwd: Path,
    *,
    master: str,
    seconds: float,
    checks: int,
    watch: float,
    wait_for_death: bool,
) -> tuple[list[dict[str, Any]], subprocess.CompletedProcess[str]]:
    cwd.mkdir(parents=True, exist_ok=True)
    code = SUPERVISE.format(watch=watch, checks=checks, wait_for_death=wait_for_death)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={
            **airflow_env,
            **env,
            "FAKE_SECONDS": str(seconds),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": master}),
        },
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc


def submissions(env: dict[str, str]) -> list[dict[str, Any]]:
    return [json.loads(x) for x in Path(env["FAKE_OUT"]).read_text().splitlines()]


def test_a_stream_on_a_cluster_gets_no_loopback_and_shares_the_checks_lakehouse(
    airflow_env: dict[str, str], stream_env: dict[str, str], tmp_path: Path
) -> None:
    task_dir = tmp_path / "task"
    airflow_env.pop("SPARK_LOCAL_IP", None)  # the worker sets none: nothing may invent one
    checks, _ = supervise(
        airflow_env,
        stream_env,
        task_dir,
        master="spark://10.1.2.3:7077",
        seconds=120,
        checks=2,
        watch=3,
        wait_for_death=False,
    )
    [first] = submissions(stream_env)
    argv = first["argv"]
    assert argv[argv.index("--master") + 1] == "spark://10.1.2.3:7077"
    assert first["env"]["SPARK_LOCAL_IP"] is None, "no loopback address for a cluster's driver"
    assert not any(a.startswith("spark.driver.host=") for a in argv)
    assert checks[0]["action"] == "started"
    assert (checks[1]["verdict"], checks[1]["action"]) == ("healthy", "none"), checks
    # the stream resolved the relative lakehouse.path where the health check does
    assert checks[1]["last_commit_age_seconds"] is not None, "the check saw the stream's batch"
    assert (task_dir / "lake" / "_checkpoints" / "bronze" / "per_topic" / "commits").is_dir()
    assert Path(first["cwd"]) == task_dir


def test_a_stream_that_crashes_after_its_start_up_check_fails_every_later_check(
    airflow_env: dict[str, str], stream_env: dict[str, str], tmp_path: Path
) -> None:
    checks, proc = supervise(
        airflow_env,
        stream_env,
        tmp_path / "task",
        master="local[2]",
        seconds=4,  # up through the start-up check (1 s), dead before the next check
        checks=3,
        watch=1,
        wait_for_death=True,
    )
    assert checks[0]["action"] == "started"  # the first start is no failure
    errors = [c.get("error", "") for c in checks[1:]]
    for error in errors:
        assert "bronze stream (pid" in error and "died since the previous check" in error
        assert "RuntimeError: boom, the stream crashed" in error  # the end of its log
        assert "started again as pid" in error
        assert PASSWORD not in error and JAAS_PASSWORD not in error
        assert "registry auth svc:***" in error or "registry auth ***" in error
    assert "3 starts in the last 24 h" in errors[-1]
    assert len(submissions(stream_env)) == 3  # it was started again each time
    assert all(s["env"]["SPARK_LOCAL_IP"] == "127.0.0.1" for s in submissions(stream_env))
    assert PASSWORD not in proc.stdout + proc.stderr
    state = Path(stream_env["PROTOLAKE_STREAM_STATE_DIR"])
    assert len((state / "bronze.starts").read_text().splitlines()) == 3

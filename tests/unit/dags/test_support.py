"""dags/protolake_support: the spark-submit operator's command line and environment (run
for real against a stand-in spark-submit under a separate SPARK_HOME, which records what it
was given), the streams' pid handling, and the health verdicts."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest
from protolake_support.environment import config_path, env_int
from protolake_support.progress import CheckpointProgress, judge_stream, pending_work
from protolake_support.supervision import python_drivers, stop_stream, stream_pid

from tests.support.checkpoints import delta_source_offset, write_checkpoint_batch

FAKE_SPARK_SUBMIT = """#!{python}
import json, os, sys
keys = ("SPARK_HOME", "PYSPARK_PYTHON", "SPARK_LOCAL_IP", "PROTOLAKE_REGISTRY_URL",
        "PROTOLAKE_REGISTRY_AUTH", "PROTOLAKE_REGISTRY_TOKEN")
with open(os.environ["FAKE_OUT"], "w") as f:
    json.dump({{"argv": sys.argv[1:], "env": {{k: os.environ.get(k) for k in keys}}}}, f)
print("stand-in spark-submit ran")
"""

EXECUTE = """
import json
from protolake_support.spark_submit import ProtolakeSparkSubmitOperator
op = ProtolakeSparkSubmitOperator(task_id="t", subcommand="silver",
                                  subcommand_args=["--trigger", "available-now"],
                                  refuse_when_streaming=True)
op.execute({})
print(json.dumps({"ok": True}))
"""


@pytest.fixture
def fake_spark(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "spark-elsewhere"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "spark-submit"
    script.write_text(FAKE_SPARK_SUBMIT.format(python=sys.executable))
    script.chmod(0o755)
    config = tmp_path / "protolake.toml"
    config.write_text(
        f'[lakehouse]\npath = "{tmp_path / "lake"}"\n'
        '[kafka]\nbootstrap_servers = "127.0.0.1:9092"\ntopics = ["t"]\n'
        '[registry]\nurl = "${env:PROTOLAKE_REGISTRY_URL}"\n'
    )
    return {
        "SPARK_HOME": str(home),
        "FAKE_OUT": str(tmp_path / "submitted.json"),
        "PROTOLAKE_CONFIG": str(config),
        "PROTOLAKE_STREAM_STATE_DIR": str(tmp_path / "streams"),
    }


EXECUTE_SILVER_IF_BEHIND = """
from protolake_support.spark_submit import ProtolakeSparkSubmitOperator
op = ProtolakeSparkSubmitOperator(task_id="t", subcommand="silver",
                                  subcommand_args=["--trigger", "available-now"],
                                  skip_when_caught_up=True)
op.execute({})
"""


def run_execute(
    airflow_env, extra: dict[str, str], code: str = EXECUTE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**airflow_env, **extra},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def conf_of(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")


def test_a_cluster_master_with_spark_elsewhere_and_registry_secrets_from_a_connection(
    airflow_env, fake_spark, tmp_path
):
    conns = {
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {"conn_type": "spark", "host": "spark://10.1.2.3", "port": 7077}
        ),
        "AIRFLOW_CONN_PROTOLAKE_REGISTRY": json.dumps(
            {
                "conn_type": "http",
                "host": "registry.internal",
                "schema": "https",
                "port": 8443,
                "login": "svc",
                "password": "pa55-w0rd-xyz",
            }
        ),
        "PYSPARK_PYTHON": "/opt/cluster/python3",
    }
    proc = run_execute(airflow_env, {**fake_spark, **conns})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    seen = json.loads(Path(fake_spark["FAKE_OUT"]).read_text())
    argv = seen["argv"]
    assert argv[argv.index("--master") + 1] == "spark://10.1.2.3:7077"
    zip_path = Path(argv[argv.index("--py-files") + 1])
    assert zip_path.is_file() and zip_path.name.startswith("protolake-")
    assert all(Path(j).is_file() for j in argv[argv.index("--jars") + 1].split(","))
    run_py = argv.index(str(Path(__file__).resolve().parents[3] / "pipelines/jobs/run.py"))
    assert argv[run_py + 1 :] == [
        "silver",
        "--config",
        fake_spark["PROTOLAKE_CONFIG"],
        "--trigger",
        "available-now",
    ]
    conf = conf_of(argv)
    assert conf["spark.pyspark.python"] == "/opt/cluster/python3"
    assert "spark.ui.enabled" not in conf  # local settings stay off a cluster
    assert seen["env"]["SPARK_HOME"] == fake_spark["SPARK_HOME"]
    assert seen["env"]["PYSPARK_PYTHON"] == "/opt/cluster/python3"
    assert seen["env"]["PROTOLAKE_REGISTRY_URL"] == "https://registry.internal:8443"
    assert seen["env"]["PROTOLAKE_REGISTRY_AUTH"] == "svc:pa55-w0rd-xyz"
    assert "pa55-w0rd-xyz" not in proc.stdout + proc.stderr
    assert "stand-in spark-submit ran" in proc.stdout + proc.stderr


def test_a_local_master_gets_small_machine_settings_and_airflows_python(
    airflow_env, fake_spark, tmp_path
):
    from pipelines.spark import DRIVER_JVM_OPTIONS, LOCAL_JVM_OPTIONS

    no_defaults = tmp_path / "spark-conf"  # no spark-defaults.conf names JVM options
    no_defaults.mkdir()
    conns = {
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PROTOLAKE_REGISTRY_URL": "http://127.0.0.1:8081",
        "SPARK_CONF_DIR": str(no_defaults),
    }
    proc = run_execute(airflow_env, {**fake_spark, **conns})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    seen = json.loads(Path(fake_spark["FAKE_OUT"]).read_text())
    conf = conf_of(seen["argv"])
    assert seen["argv"][seen["argv"].index("--master") + 1] == "local[2]"
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.ui.enabled"] == "false"
    assert conf[DRIVER_JVM_OPTIONS] == LOCAL_JVM_OPTIONS
    assert seen["env"]["PYSPARK_PYTHON"] == sys.executable
    assert seen["env"]["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert seen["env"]["PROTOLAKE_REGISTRY_AUTH"] is None  # no connection, nothing invented


def test_ingest_refuses_to_run_while_a_continuous_stream_is_up(airflow_env, fake_spark, tmp_path):
    state = Path(fake_spark["PROTOLAKE_STREAM_STATE_DIR"])
    state.mkdir()
    stream = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "/x/pipelines/jobs/run.py", "bronze"]
    )
    try:
        (state / "bronze.pid").write_text(f"{stream.pid}\n")
        conns = {
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PROTOLAKE_REGISTRY_URL": "http://127.0.0.1:8081",
        }
        proc = run_execute(airflow_env, {**fake_spark, **conns})
    finally:
        stream.kill()
        stream.wait()
    assert proc.returncode != 0
    assert "continuous streams are running (bronze" in proc.stderr
    assert not Path(fake_spark["FAKE_OUT"]).exists(), "nothing was submitted"


def test_silver_is_submitted_only_when_its_checkpoints_say_it_has_work(
    airflow_env, fake_spark, tmp_path
):
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakehouse.layout import Layout

    layout = Layout(str(tmp_path / "lake"))
    bronze = layout.bronze_table("t")
    write_deltalake(bronze, pa.table({"value": [b"x"]}))  # version 0
    conns = {
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PROTOLAKE_REGISTRY_URL": "http://127.0.0.1:8081",
    }
    submitted = Path(fake_spark["FAKE_OUT"])

    proc = run_execute(airflow_env, {**fake_spark, **conns}, EXECUTE_SILVER_IF_BEHIND)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "silver has work (t: never ran): submitting" in proc.stdout + proc.stderr
    assert submitted.exists()

    submitted.unlink()
    write_checkpoint_batch(Path(layout.checkpoint("silver", "t")), 0, delta_source_offset(1))
    proc = run_execute(airflow_env, {**fake_spark, **conns}, EXECUTE_SILVER_IF_BEHIND)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "silver is caught up with its sources: nothing submitted" in proc.stdout + proc.stderr
    assert not submitted.exists()

    write_deltalake(bronze, pa.table({"value": [b"y"]}), mode="append")  # version 1
    proc = run_execute(airflow_env, {**fake_spark, **conns}, EXECUTE_SILVER_IF_BEHIND)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "silver has work (t: 1 behind): submitting" in proc.stdout + proc.stderr
    assert submitted.exists()


def test_skipping_when_caught_up_is_for_available_now_bronze_and_silver_only():
    from protolake_support.spark_submit import ProtolakeSparkSubmitOperator

    with pytest.raises(ValueError, match="available-now only"):
        ProtolakeSparkSubmitOperator(task_id="t", subcommand="maintain", skip_when_caught_up=True)
    with pytest.raises(ValueError, match="available-now only"):
        ProtolakeSparkSubmitOperator(
            task_id="t",
            subcommand="silver",
            subcommand_args=["--trigger", "processing-time"],
            skip_when_caught_up=True,
        )


def test_a_missing_configuration_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="PROTOLAKE_CONFIG is not set"):
        config_path({})
    with pytest.raises(RuntimeError, match="no such file"):
        config_path({"PROTOLAKE_CONFIG": str(tmp_path / "nope.toml")})
    (tmp_path / "c.toml").write_text("")
    assert config_path({"PROTOLAKE_CONFIG": str(tmp_path / "c.toml")}) == str(
        (tmp_path / "c.toml").resolve()
    )


def test_env_int():
    assert env_int("X", 5, {}) == 5
    assert env_int("X", 5, {"X": " 12 "}) == 12
    with pytest.raises(ValueError, match="X: must be an integer"):
        env_int("X", 5, {"X": "twelve"})


def _await_exec(pid: int, marker: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    cmdline = Path(f"/proc/{pid}/cmdline")
    while marker not in cmdline.read_bytes().decode(errors="replace"):
        assert time.monotonic() < deadline, f"process {pid} did not exec within {timeout} s"
        time.sleep(0.05)


def test_a_pid_counts_only_while_it_is_that_jobs_spark_submit(tmp_path):
    (tmp_path / "silver.pid").write_text("not a pid")
    assert stream_pid("silver", tmp_path) is None
    assert stream_pid("bronze", tmp_path) is None  # no pid file
    job = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(120)",
            "/x/pipelines/jobs/run.py",
            "silver",
        ],
        start_new_session=True,
    )
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        _await_exec(job.pid, "run.py")  # until exec, the child's command line is pytest's
        (tmp_path / "silver.pid").write_text(f"{job.pid}\n")
        (tmp_path / "bronze.pid").write_text(f"{other.pid}\n")
        assert stream_pid("silver", tmp_path) == job.pid
        assert stream_pid("bronze", tmp_path) is None  # a recycled pid is not the stream
        t0 = time.monotonic()
        stop_stream("silver", job.pid, grace_seconds=30)
        assert time.monotonic() - t0 < 30, "SIGTERM was enough"
        assert job.poll() is not None or job.wait(timeout=10) is not None
        assert stream_pid("silver", tmp_path) is None
    finally:
        for p in (job, other):
            if p.poll() is None:
                p.kill()
                p.wait()


def progress(age: float | None) -> CheckpointProgress:
    return CheckpointProgress("cp", 3, 3, age)


def test_health_verdicts():
    assert judge_stream("bronze", None, [("t", progress(5), 0)], 600).verdict == "dead"
    idle = judge_stream("bronze", 42, [("t", progress(86400), 0)], 600, running_seconds=9999)
    assert idle.verdict == "healthy"  # nothing to do: an old last batch is fine
    busy = judge_stream("bronze", 42, [("t", progress(30), 1000)], 600, running_seconds=9999)
    assert busy.verdict == "healthy" and busy.lag == 1000
    stuck = judge_stream("bronze", 42, [("t", progress(900), 7)], 600, running_seconds=9999)
    assert stuck.verdict == "stale" and "t: lag 7" in stuck.reason
    young = judge_stream("silver", 42, [("t", None, 7)], 600, running_seconds=60)
    assert young.verdict == "healthy"  # just started: its first batch is still coming
    never = judge_stream("silver", 42, [("a", progress(5), 0), ("new", None, 3)], 600, 9999)
    assert never.verdict == "stale" and "new: lag 3, last batch never" in never.reason
    unknown = judge_stream("bronze", 42, [("t", progress(9999), None)], 600, 9999)
    assert unknown.verdict == "healthy" and unknown.lag is None


def test_the_silver_lag_counts_a_version_read_in_part_as_unread(monkeypatch):
    from protolake_support import progress as progress_mod

    monkeypatch.setattr(progress_mod, "delta_version", lambda table, store: 7)

    def lag(**offset: object) -> int | None:
        source = {"sourceVersion": 1, "reservoirId": "r", **offset}
        done = CheckpointProgress("cp", 3, 3, 1.0, {"sources": [source]})
        return progress_mod.silver_lag(done, "bronze/t", store=None)  # type: ignore[arg-type]

    assert lag(reservoirVersion=8, index=-1, isStartingVersion=False) == 0  # read to its end
    assert lag(reservoirVersion=7, index=-1, isStartingVersion=False) == 1
    assert lag(reservoirVersion=7, index=5, isStartingVersion=False) == 1  # files of 7 unread
    assert lag(reservoirVersion=7, index=5, isStartingVersion=True) == 1  # first read, in part
    assert lag(reservoirVersion=5, index=-1, isStartingVersion=False) == 3
    assert lag(reservoirVersion=10, index=-1, isStartingVersion=False) is None  # table went back


def test_a_job_is_caught_up_only_when_every_query_is_known_committed_and_not_behind():
    done = CheckpointProgress("cp", 3, 3, 10.0)
    assert pending_work([("a", done, 0), ("b", done, 0)]) is None
    assert (
        pending_work([]) == "no query found (no checkpoint readable; for silver, no bronze table)"
    )
    assert pending_work([("a", done, 0), ("new", None, 4)]) == "new: never ran"
    died = CheckpointProgress("cp", 4, 3, 10.0)  # batch 4 planned, not committed
    assert pending_work([("a", died, 0)]) == "a: batch 4 not committed"
    assert pending_work([("a", done, None)]) == "a: lag not measurable"
    assert pending_work([("a", done, 0), ("b", done, 12)]) == "b: 12 behind"


# Spark's own default (SECRET_REDACTION_PATTERN): what a job without our setting gets
SPARK_DEFAULT_REDACTION = r"(?i)secret|password|token|access[.]?key"


def test_registry_secrets_in_yarn_or_kubernetes_driver_env_settings_are_redacted_by_spark(
    airflow_env, fake_spark, tmp_path
):
    # on YARN and Kubernetes the provider turns the job's environment into Spark settings
    # (spark.yarn.appMasterEnv.* / spark.kubernetes.driverEnv.*; the same code path, and a
    # k8s:// master needs the `kubernetes` package in Airflow's environment, not installed here)
    conns = {
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "yarn"}),
        "AIRFLOW_CONN_PROTOLAKE_REGISTRY": json.dumps(
            {
                "conn_type": "http",
                "host": "registry.internal",
                "login": "svc",
                "password": "pa55-w0rd-xyz",
                "extra": {"bearer_token": "t0k3n-abc"},
            }
        ),
    }
    proc = run_execute(airflow_env, {**fake_spark, **conns})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    argv = json.loads(Path(fake_spark["FAKE_OUT"]).read_text())["argv"]
    conf = conf_of(argv)
    carrying = {k: v for k, v in conf.items() if "pa55-w0rd-xyz" in v or "t0k3n-abc" in v}
    assert set(carrying) == {
        "spark.yarn.appMasterEnv.PROTOLAKE_REGISTRY_AUTH",
        "spark.yarn.appMasterEnv.PROTOLAKE_REGISTRY_TOKEN",
    }
    # Spark redacts a setting when its regex finds a match in the key or the value
    regex = conf.get("spark.redaction.regex", SPARK_DEFAULT_REDACTION)
    for key, value in carrying.items():
        assert re.search(regex, key) or re.search(regex, value), key

    # and Spark itself: spark-submit --verbose prints its settings through the same redaction
    app = tmp_path / "app.py"
    app.write_text("print('app ran')\n")
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    confs = [x for k, v in conf.items() for x in ("--conf", f"{k}={v}")]
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    shown = subprocess.run(
        [str(spark_submit), "--verbose", "--master", "local[1]", *confs, str(app)],
        env={**env, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = shown.stdout + shown.stderr
    assert shown.returncode == 0 and "app ran" in out, out[-3000:]
    assert "(spark.yarn.appMasterEnv.PROTOLAKE_REGISTRY_AUTH,*********(redacted))" in out
    assert "pa55-w0rd-xyz" not in out and "t0k3n-abc" not in out


DRIVER = """
import signal, sys, time
from pathlib import Path

def stop(*_):
    time.sleep(1.0)  # stopping the queries, releasing the lease: calls into the JVM
    Path(sys.argv[1]).write_text("released")
    sys.exit(0)

signal.signal(signal.SIGTERM, stop)
print("driver up", flush=True)
while True:
    time.sleep(0.1)
"""


def test_a_stream_is_stopped_through_its_python_driver_so_it_can_release_its_lease(tmp_path):
    # spark-submit's JVM leads the group and ends at once on SIGTERM, taking the driver with
    # it: here a shell that, signalled, kills its child at once
    driver = tmp_path / "pipelines" / "jobs" / "run.py"
    driver.parent.mkdir(parents=True)
    driver.write_text(DRIVER)
    released = tmp_path / "released"
    leader = subprocess.Popen(
        [
            "/bin/sh",
            "-c",
            f"{sys.executable} {driver} {released} & child=$!; "
            'trap "kill -9 $child; exit 143" TERM; wait $child',
            "spark-submit",
        ],
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert leader.stdout is not None and leader.stdout.readline() == "driver up\n"

        (child,) = python_drivers(leader.pid)
        assert child != leader.pid
        stop_stream("bronze", leader.pid, grace_seconds=30)
        assert released.read_text() == "released"  # the driver ended its own way
        assert leader.wait(timeout=10) == 0  # and the leader with it
    finally:
        if leader.poll() is None:
            os.killpg(leader.pid, signal.SIGKILL)
            leader.wait()

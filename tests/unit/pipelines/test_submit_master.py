"""pipelines.jobs.submit_command without ``master``: spark-submit then takes the master from
``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else the installation's ``conf/``), so the
loopback and small-machine settings of a local master must follow that file, not the absence
of ``--master``. Checked against the real spark-submit's reading of the file (``--verbose``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.jobs import RUN_SCRIPT, default_master, submit_command


def conf_of(cmd: list[str]) -> dict[str, str]:
    return dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--conf")


@pytest.fixture
def conf_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "spark-conf"
    folder.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(folder))
    monkeypatch.delenv("MASTER", raising=False)
    return folder


def test_a_cluster_master_from_spark_defaults_gets_no_loopback_settings(
    conf_dir: Path, tmp_path: Path
) -> None:
    (conf_dir / "spark-defaults.conf").write_text(
        "# the cluster this machine submits to\nspark.master   spark://127.0.0.1:1\n"
    )
    cmd = submit_command("bronze", tmp_path / "c.toml")
    assert "--master" not in cmd
    conf = conf_of(cmd)
    assert "spark.driver.host" not in conf and "spark.ui.enabled" not in conf
    assert "spark.pyspark.python" not in conf  # the cluster's Python, not this path

    # what spark-submit itself makes of that command (run.py --help: no SparkContext)
    verbose = [cmd[0], "--verbose", *cmd[1 : cmd.index(str(RUN_SCRIPT)) + 1], "--help"]
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    done = subprocess.run(
        verbose,
        env={**env, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert re.findall(r"^\s*master\s+(\S+)$", out, re.M) == ["spark://127.0.0.1:1"], out[-3000:]
    assert "(spark.driver.host,127.0.0.1)" not in out


def test_the_master_is_decided_as_spark_submit_decides_it(
    conf_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    defaults = conf_dir / "spark-defaults.conf"
    assert default_master() == "local[*]"  # no file: spark-submit's own default
    assert conf_of(submit_command("bronze", "c.toml"))["spark.driver.host"] == "127.0.0.1"
    assert conf_of(submit_command("bronze", "c.toml"))["spark.pyspark.python"] == sys.executable
    monkeypatch.setenv("MASTER", "yarn")
    assert default_master() == "yarn"
    defaults.write_text("spark.master=local[4]\nspark.ui.enabled: true\n")
    assert default_master() == "local[4]"  # the file comes before $MASTER
    assert "spark.driver.host" in conf_of(submit_command("bronze", "c.toml"))
    defaults.write_text("spark.master: k8s://https://10.0.0.1:6443\n! a comment\n")
    assert default_master() == "k8s://https://10.0.0.1:6443"
    assert default_master({"spark.master": "local[2]"}) == "local[2]"  # --conf comes first
    cmd = submit_command("bronze", "c.toml", conf={"spark.master": "local[2]"})
    assert conf_of(cmd)["spark.driver.host"] == "127.0.0.1"
    defaults.unlink()
    defaults.mkdir()  # unreadable: the master is unknown, so no local settings
    assert default_master() is None
    assert "spark.driver.host" not in conf_of(submit_command("bronze", "c.toml"))
    # an explicit master decides alone
    assert conf_of(submit_command("bronze", "c.toml", "local[2]"))["spark.ui.enabled"] == "false"
    assert "spark.ui.enabled" not in conf_of(submit_command("bronze", "c.toml", "spark://h:7077"))


def test_a_local_master_runs_the_client_compiler_unless_spark_defaults_names_jvm_options(
    conf_dir: Path,
) -> None:
    from pipelines.spark import DRIVER_JVM_OPTIONS, LOCAL_JVM_OPTIONS, local_conf

    assert local_conf()[DRIVER_JVM_OPTIONS] == LOCAL_JVM_OPTIONS  # no spark-defaults.conf
    assert conf_of(submit_command("silver", "c.toml", "local[2]"))[DRIVER_JVM_OPTIONS] == (
        LOCAL_JVM_OPTIONS
    )
    # the caller's own options win
    mine = {DRIVER_JVM_OPTIONS: "-Xss4m"}
    assert (
        conf_of(submit_command("silver", "c.toml", "local[2]", conf=mine))[DRIVER_JVM_OPTIONS]
        == "-Xss4m"
    )
    # a cluster's JVMs are the cluster's
    assert DRIVER_JVM_OPTIONS not in conf_of(submit_command("silver", "c.toml", "spark://h:7077"))
    # options chosen in spark-defaults.conf are left to spark-submit, which reads them
    defaults = conf_dir / "spark-defaults.conf"
    for key in (DRIVER_JVM_OPTIONS, "spark.driver.defaultJavaOptions"):
        defaults.write_text(f"{key}  -XX:+UseSerialGC\n")
        assert DRIVER_JVM_OPTIONS not in local_conf()
        assert DRIVER_JVM_OPTIONS not in conf_of(submit_command("silver", "c.toml", "local[2]"))
    assert local_conf()["spark.ui.enabled"] == "false"  # the other local settings stay
